"""The class names of a ``.rec``: the label map ``recpipe pack`` publishes beside it.

``pack SRC OUT`` writes ``OUT.labels.json`` (``classes``: class name -> label; ``splits``: the
shard files of each split) next to ``OUT.rec``, ``OUT-00000-of-00004.rec`` or ``OUT_train.rec``.
``find_label_map(rec_url)`` tries those prefixes and accepts a map that lists the file among
its shards (or lists no shards); ``class_names`` turns it into label -> name.
"""

import json
import logging
import re
from typing import Dict, Optional, Tuple

from ..io.sources import url_to_fs

__all__ = ["find_label_map", "class_names"]

log = logging.getLogger(__name__)

_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
_SPLIT = re.compile(r"_(train|val)$")
_MAX_BYTES = 64 << 20  # a label map of millions of classes is still far below this


def _prefixes(stem):
    found = [stem]
    for pattern in (_SHARD, _SPLIT):
        stem = pattern.sub("", stem)
        if stem not in found:
            found.append(stem)
    return found


def _lists(data, name):
    shards = [shard.get("rec") for split in (data.get("splits") or {}).values()
              for shard in split.get("shards", [])]
    return not shards or name in shards


def find_label_map(rec_url: str, storage_options: Optional[dict] = None
                   ) -> Optional[Tuple[str, dict]]:
    """``(url, data)`` of the label map that names ``rec_url``'s classes, or None."""
    rec_url = str(rec_url)
    folder, _, name = rec_url.rpartition("/")
    stem = name[:-4] if name.endswith(".rec") else name
    for prefix in _prefixes(stem):
        url = f"{folder}/{prefix}.labels.json" if folder else f"{prefix}.labels.json"
        try:
            fs, path = url_to_fs(url, storage_options)
            if not fs.exists(path) or fs.size(path) > _MAX_BYTES:
                continue
            with fs.open(path, "rb") as f:
                data = json.loads(f.read())
        except (OSError, ValueError) as exc:
            log.info("label map %s not read: %s", url, exc)
            continue
        if isinstance(data, dict) and isinstance(data.get("classes"), dict) \
                and _lists(data, name):
            return url, data
    return None


def class_names(rec_url: str, storage_options: Optional[dict] = None
                ) -> Optional[Tuple[str, Dict[str, str]]]:
    """``(label map url, {label text: class name})`` for ``rec_url``, or None; label texts as
    ``recpipe inspect`` prints labels (``"3"``, ``"0.5"``)."""
    found = find_label_map(rec_url, storage_options)
    if found is None:
        return None
    url, data = found
    names = {}
    for name, label in data["classes"].items():
        try:
            names[format(float(label), "g")] = str(name)
        except (TypeError, ValueError):
            continue
    return url, names
