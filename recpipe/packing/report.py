"""What a pack run did: per-split output sizes, unusual inputs and errors, speed."""

import collections
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..image.info import REASONS

__all__ = ["InputReport", "ShardSummary", "PackSummary", "MAX_EXAMPLES"]

MAX_EXAMPLES = 5


class InputReport:
    """Counts of unusual inputs (with a few example paths per reason) and every error."""

    def __init__(self, max_examples=MAX_EXAMPLES):
        self.max_examples = max_examples
        self.counts: "collections.Counter[str]" = collections.Counter()
        self.examples = collections.defaultdict(list)
        self.errors = []
        # kept / re-encoded / transcoded payloads
        self.actions: "collections.Counter[str]" = collections.Counter()

    def add(self, path, reasons, error=None, action=None):
        if action:
            self.actions[action] += 1
        for reason in reasons:
            self.counts[reason] += 1
            if len(self.examples[reason]) < self.max_examples:
                self.examples[reason].append(path)
        if error:
            self.errors.append({"path": path, "reason": error})

    def merge(self, other):
        """Add ``other``'s counts, examples and errors after this report's own (reports of
        shards merged in plan order equal one report of all items in that order)."""
        self.counts.update(other.counts)
        self.actions.update(getattr(other, "actions", {}))
        for reason, paths in other.examples.items():
            room = self.max_examples - len(self.examples[reason])
            self.examples[reason].extend(paths[:max(room, 0)])
        self.errors.extend(other.errors)

    def unusual(self):
        """``{reason: {"count", "meaning", "examples"}}``, most frequent first."""
        return {reason: {"count": count, "meaning": REASONS.get(reason, reason),
                         "examples": list(self.examples[reason])}
                for reason, count in self.counts.most_common()}


@dataclass
class ShardSummary:
    rec: str
    idx: str
    records: int = 0
    bytes: int = 0
    kept: bool = False  # published by an earlier run and kept by --resume


@dataclass
class PackSummary:
    """The result of ``pack_dataset``; ``ok`` is False when any item failed."""

    out: str
    items: int
    classes: Optional[Dict[str, int]]
    splits: Dict[str, List[ShardSummary]]
    written: int = 0
    failed: int = 0
    resumed_records: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    seconds: float = 0.0
    workers: int = 0
    labels_file: Optional[str] = None
    manifest_file: Optional[str] = None  # OUT.manifest.json, written by a Dask run
    cluster: Optional[dict] = None  # the Dask cluster a run used: scheduler, workers, threads
    unusual: Dict[str, dict] = field(default_factory=dict)
    errors: List[dict] = field(default_factory=list)
    # images whose bytes were kept, re-encoded (JPEG) or transcoded (other formats)
    actions: Dict[str, int] = field(default_factory=dict)

    @property
    def ok(self):
        return self.failed == 0

    @property
    def images_per_second(self):
        return self.written / self.seconds if self.seconds else 0.0

    @property
    def megabytes_per_second(self):
        return self.input_bytes / 1e6 / self.seconds if self.seconds else 0.0

    def to_dict(self):
        return {
            "out": self.out,
            "ok": self.ok,
            "items": self.items,
            "written": self.written,
            "failed": self.failed,
            "resumed_records": self.resumed_records,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "seconds": round(self.seconds, 4),
            "images_per_second": round(self.images_per_second, 1),
            "megabytes_per_second": round(self.megabytes_per_second, 2),
            "workers": self.workers,
            "labels_file": self.labels_file,
            "manifest_file": self.manifest_file,
            "cluster": self.cluster,
            "classes": self.classes,
            "splits": {name: [vars(shard).copy() for shard in shards]
                       for name, shards in self.splits.items()},
            "unusual": self.unusual,
            "errors": self.errors,
            "actions": self.actions,
        }
