"""The label map that ``recpipe pack`` publishes beside its files: the class name of each label.

``recpipe pack SRC OUT`` writes ``OUT.labels.json`` (``{"classes": {name: label}, "splits":
{split: {"shards": [{"rec": file name, "bytes": size, ...}]}}}``) beside ``OUT.rec`` or its
shards ``OUT-00000-of-00004.rec`` and splits ``OUT_train...``/``OUT_val...``.
``find_label_map(rec_url)`` finds the map of a ``.rec`` from its name, and takes it only when
the map lists that file with its current size (a map of another pack, or of an earlier version
of the file, is not used).
"""

import json
import logging
import re
from typing import Dict, NamedTuple, Optional

from ...errors import RecordFormatError
from ..sources import read_small_file

__all__ = ["LABEL_MAP_SUFFIX", "LabelMap", "find_label_map", "label_map_candidates",
           "read_label_map"]

log = logging.getLogger(__name__)

LABEL_MAP_SUFFIX = ".labels.json"
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
_SPLIT = re.compile(r"_(train|val)$")


class LabelMap(NamedTuple):
    """A label map: ``classes`` (name -> label), the ``.rec`` file names it lists with their
    sizes (``files``), and where it was read (``url``)."""

    url: str
    classes: Dict[str, int]
    files: Dict[str, int]

    def names(self) -> Dict[int, str]:
        """label -> class name."""
        return {label: name for name, label in self.classes.items()}


def label_map_candidates(rec_url):
    """Where the label map of ``rec_url`` may be, most specific first: ``X.rec`` ->
    ``X.labels.json``; a shard or split file -> the map of its pack's prefix too."""
    rec_url = str(rec_url)
    stem = rec_url[:-4] if rec_url.endswith(".rec") else rec_url
    candidates = [stem]
    for pattern in (_SHARD, _SPLIT):
        head, tail = (stem.rsplit("/", 1) if "/" in stem else ("", stem))
        shorter = pattern.sub("", tail)
        if shorter and shorter != tail:
            stem = f"{head}/{shorter}" if head else shorter
            candidates.append(stem)
    return [candidate + LABEL_MAP_SUFFIX for candidate in candidates]


def read_label_map(url, storage_options=None):
    """Parse the label map at ``url``; a malformed one raises RecordFormatError naming it."""
    try:
        data = json.loads(read_small_file(url, storage_options).decode("utf-8"))
        classes = {str(name): int(label) for name, label in data["classes"].items()
                   if int(label) == label}
        files = {str(shard["rec"]): int(shard.get("bytes", -1))
                 for split in data.get("splits", {}).values() for shard in split["shards"]}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise RecordFormatError(f"not a label map of recpipe pack: {e}", path=str(url)) from e
    return LabelMap(str(url), classes, files)


def find_label_map(rec_url, rec_size=None, storage_options=None) -> Optional[LabelMap]:
    """The label map that lists ``rec_url`` (with ``rec_size`` bytes, when given), or None.
    A map that cannot be read is logged and skipped."""
    name = str(rec_url).rsplit("/", 1)[-1]
    for url in label_map_candidates(rec_url):
        try:
            found = read_label_map(url, storage_options)
        except FileNotFoundError:
            continue
        except (OSError, RecordFormatError) as e:
            log.warning("label map %s not used: %s", url, e)
            continue
        size = found.files.get(name)
        if size is None:
            continue
        if rec_size is not None and size >= 0 and size != rec_size:
            log.warning("label map %s describes %s of %d bytes, not %d: not used (the file "
                        "changed since it was packed)", url, name, size, rec_size)
            continue
        return found
    return None
