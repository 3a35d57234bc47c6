"""Restart markers in JPEG bytes, losslessly: what ``recpipe pack --restart`` and
``recpipe retrofit`` write, and why a crop then decodes faster.

A baseline JPEG is one run of Huffman-coded data: a decoder that wants a crop still
entropy-decodes every MCU row above it and every MCU beside it in the rows it reads (70% of a
full decode of a ~440 px photo is that entropy decoding). With restart markers every few MCUs,
recpipe's decoder (``csrc/jpeg/restart.h``) hands libjpeg only the intervals the crop touches;
the intervals are found by scanning the bytes for the markers (1-2% of a decode), so no index
is stored anywhere and the file stays a standard JPEG that MXNet, DALI, PIL and OpenCV read to
the same pixels.

``add_restarts(data, policy)`` rewrites a JPEG's entropy-coded data with restart intervals: the
DCT coefficients are read and written back (libjpeg's transcoding API, as ``jpegtran -restart``
does) and checked to be the same, so every decoder gives the same pixels; with optimal Huffman
tables (``policy.optimize``, the default) the file usually gets smaller, not bigger
(experiments/restart_markers: 2.3% smaller for the shared photos with ``auto``).

Policies (``RestartPolicy.parse``): ``"auto"`` (intervals of the divisor of a row's MCU count
nearest 4 MCUs: a crop skips columns too), ``"off"``, or a number of MCU rows per interval.
"""

import logging
from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

from .._optional import extension

__all__ = ["RESTART_CHOICES", "RestartLayout", "RestartPolicy", "add_restarts",
           "encoder_interval", "restart_layout", "restarts_available"]

log = logging.getLogger(__name__)

RESTART_CHOICES = "'auto', 'off' or a number of MCU rows per interval"
AUTO_MCUS = 4  # measured: 1.88x a full decode for train crops, 2.3% smaller files


@dataclass(frozen=True)
class RestartPolicy:
    """Where the restart intervals go: every ``rows`` MCU rows, or (``rows`` 0) every ``mcus``
    MCUs (the divisor of a row's MCU count nearest it, so that intervals start columns too);
    ``optimize``: optimal Huffman tables."""

    rows: int = 0
    mcus: int = AUTO_MCUS
    optimize: bool = True

    def __post_init__(self):
        if self.rows < 0 or self.mcus < 0 or (self.rows == 0 and self.mcus == 0):
            raise ValueError(f"restart intervals need rows > 0 or mcus > 0, got rows={self.rows}, "
                             f"mcus={self.mcus}")

    @classmethod
    def parse(cls, value: Union[str, int, None, "RestartPolicy"]) -> Optional["RestartPolicy"]:
        """``"auto"`` -> the default policy, ``"off"``/None -> None, a positive number of MCU
        rows (int or digits) -> one interval every that many rows; ValueError otherwise."""
        if value is None or isinstance(value, RestartPolicy):
            return value
        if isinstance(value, bool):
            raise ValueError(f"restart must be {RESTART_CHOICES}, got {value!r}")
        text = str(value).strip().lower()
        if text == "auto":
            return cls()
        if text == "off":
            return None
        try:
            rows = int(text)
        except ValueError:
            raise ValueError(f"restart must be {RESTART_CHOICES}, got {value!r}") from None
        if rows <= 0:
            raise ValueError(f"restart rows must be >= 1, got {rows} (use 'off' for none)")
        return cls(rows=rows, mcus=0)

    @staticmethod
    def name(value) -> str:
        """The canonical spelling of a policy value: ``"auto"``, ``"off"`` or the rows."""
        policy = RestartPolicy.parse(value)
        if policy is None:
            return "off"
        if policy == RestartPolicy():
            return "auto"
        if policy.mcus == 0 and policy.optimize:
            return str(policy.rows)
        return repr(policy)


class RestartLayout(NamedTuple):
    """The restart intervals of a JPEG that a crop can use (``restart_layout``)."""

    interval: int      # MCUs per interval
    mcus_per_row: int
    mcu_rows: int
    row_group: int     # MCU rows between intervals that start a row
    column_mcus: int   # MCUs per column cut (the interval when it divides a row)
    mcu_width: int
    mcu_height: int


def restarts_available() -> bool:
    """True when recpipe's libjpeg extension (``recpipe._batch``) is built."""
    return extension("_batch") is not None


def _module():
    module = extension("_batch")
    if module is None:
        raise ImportError("restart markers need recpipe's libjpeg extension (recpipe._batch): "
                          "install the libjpeg-turbo headers (apt-get install "
                          "libjpeg62-turbo-dev) and reinstall recpipe")
    return module


def add_restarts(data, policy: Union[RestartPolicy, str, int, None] = "auto") -> Optional[bytes]:
    """``data`` (JPEG bytes) rewritten with restart intervals, losslessly (the same
    coefficients, checked), or None when it is left as it is: not a JPEG, a stream that cannot
    take them (progressive, arithmetic-coded, lossless, 12-bit), a policy of ``"off"``, or a
    stream libjpeg reads with errors or corrupt-data warnings (its bytes are kept: nothing
    libjpeg had to guess is written). ImportError when ``recpipe._batch`` is not built."""
    policy = RestartPolicy.parse(policy)
    if policy is None or len(data) < 4 or bytes(data[:3]) != b"\xff\xd8\xff":
        return None
    module = _module()
    try:
        return module.add_restarts(data, policy.rows, policy.mcus, policy.optimize)
    except ValueError as e:
        log.debug("restart markers not added (%s): the bytes are kept", e)
        return None


def encoder_interval(policy: Union[RestartPolicy, str, int, None], width: int,
                     components: int) -> int:
    """The restart interval (MCUs) an encoder writing a ``width``-pixel image of ``components``
    components at 4:2:0 (one component: no subsampling) gives it under ``policy``: the interval
    ``add_restarts`` would choose, so that encoding with it equals encoding and then adding the
    markers, without the second pass. 0: no markers (``"off"``, or a row too long to count)."""
    policy = RestartPolicy.parse(policy)
    if policy is None:
        return 0
    interval = _module().restart_interval(width, components, 1 if components == 1 else 2,
                                          policy.rows, policy.mcus)
    return max(interval, 0)


def restart_layout(data) -> Optional[RestartLayout]:
    """The restart intervals of ``data`` that let a crop skip rows or columns, or None (no
    markers, or none a region decode can use)."""
    found = _module().restart_layout(data)
    return None if found is None else RestartLayout(*found)
