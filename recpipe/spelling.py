"""``did_you_mean``: the hint that follows an unknown keyword in an error message."""

import difflib
from typing import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``" (did you mean 'shuffle'?)"`` naming the closest of ``known`` to ``word``, or ``""``
    when none is close."""
    close = difflib.get_close_matches(str(word), sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
