"""``OUT.manifest.json``: the shards of a distributed pack, tied together.

A Dask pack (``cluster``) publishes it last, once every shard is in place: per split, the
shards in order with their record count, the size and SHA-256 of each ``.rec``/``.idx``,
plus the options, the label map, the partition fingerprint and the recpipe version. Shard files are
named relative to the manifest's folder, so the output can be moved as a whole.

``read_manifest(url)`` gives the shard URLs in order; ``iter_records`` reads every record of
all shards with ``RecordReader``:

>>> manifest = read_manifest("s3://bucket/train.manifest.json")   # doctest: +SKIP
>>> for rec_url, idx_url in manifest.shard_urls():                 # doctest: +SKIP
...     with recpipe.RecordReader(rec_url, idx_url) as reader: ...
"""

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Optional, Tuple

from ..io.atomic import publish
from ..io.sources import url_to_fs
from .items import join_url

__all__ = ["MANIFEST_FORMAT", "MANIFEST_VERSION", "ManifestShard", "Manifest", "manifest_url",
           "build_manifest", "check_manifest", "publish_manifest", "read_manifest", "iter_records"]

log = logging.getLogger(__name__)

MANIFEST_FORMAT = "recpipe-pack-manifest"
MANIFEST_VERSION = 1


def manifest_url(out):
    return f"{out}.manifest.json"


def _name(url):
    return str(url).rsplit("/", 1)[-1]


def _folder(url):
    url = str(url)
    return url.rsplit("/", 1)[0] if "/" in url else ""


@dataclass(frozen=True)
class ManifestShard:
    """One shard of a manifest, with its files' URLs resolved against the manifest's folder."""

    split: str
    rec: str
    idx: str
    records: int
    rec_bytes: int
    idx_bytes: int
    rec_sha256: Optional[str]
    idx_sha256: Optional[str]


@dataclass(frozen=True)
class Manifest:
    url: str
    data: dict

    @property
    def classes(self):
        """Class name -> label for a folder source; None for a ``.lst`` source."""
        return self.data.get("classes")

    @property
    def splits(self):
        return list(self.data["splits"])

    @property
    def records(self):
        return sum(split["records"] for split in self.data["splits"].values())

    def shards(self, split=None) -> Tuple[ManifestShard, ...]:
        """The shards of ``split`` (default: all splits, in manifest order), in order."""
        if split is not None and split not in self.data["splits"]:
            raise KeyError(f"{self.url}: no split {split!r} (has {', '.join(self.splits)})")
        names = [split] if split is not None else self.splits
        folder = _folder(self.url)
        return tuple(
            ManifestShard(name, join_url(folder, s["rec"]), join_url(folder, s["idx"]),
                          s["records"], s["rec_bytes"], s["idx_bytes"], s.get("rec_sha256"),
                          s.get("idx_sha256"))
            for name in names for s in self.data["splits"][name]["shards"])

    def shard_urls(self, split=None):
        """``[(rec_url, idx_url), ...]`` in order, ready for ``RecordReader(rec, idx)``."""
        return [(shard.rec, shard.idx) for shard in self.shards(split)]


def build_manifest(partition, splits, digests, version):
    """The manifest of ``partition`` written as ``splits`` (``{name: [ShardSummary]}``), with
    ``digests`` (``{rec url: (rec_sha256, idx_sha256, idx_bytes)}``)."""
    def shard_entry(shard):
        rec_sha256, idx_sha256, idx_bytes = digests[shard.rec]
        return {"rec": _name(shard.rec), "idx": _name(shard.idx), "records": shard.records,
                "rec_bytes": shard.bytes, "idx_bytes": idx_bytes, "rec_sha256": rec_sha256,
                "idx_sha256": idx_sha256}

    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "recpipe_version": version,
        "source": partition.src,
        "root": partition.root,
        "fingerprint": partition.fingerprint,
        "options": dataclasses.asdict(partition.options),
        "classes": partition.classes,
        "records": sum(s.records for shards in splits.values() for s in shards),
        "bytes": sum(s.bytes for shards in splits.values() for s in shards),
        "splits": {name: {"records": sum(s.records for s in shards),
                          "bytes": sum(s.bytes for s in shards),
                          "shards": [shard_entry(s) for s in shards]}
                   for name, shards in splits.items()},
    }


def publish_manifest(out, data, storage_options=None):
    """Write ``data`` to ``OUT.manifest.json`` atomically; returns its URL."""
    return publish(manifest_url(out), json.dumps(data, indent=2).encode(), storage_options)


def read_manifest(url, storage_options=None):
    """The ``Manifest`` at ``url`` (``OUT.manifest.json``, or the prefix ``OUT``)."""
    url = str(url)
    if not url.endswith(".json"):
        url = manifest_url(url)
    fs, path = url_to_fs(url, storage_options)
    try:
        data = json.loads(fs.cat_file(path))
    except ValueError as e:
        raise ValueError(f"{url}: not a JSON manifest ({e})") from e
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{url}: not a recpipe pack manifest")
    if data.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{url}: unsupported manifest version {data.get('version')!r}")
    _validate(url, data)
    return Manifest(url, data)


_SHARD_INTS = ("records", "rec_bytes", "idx_bytes")


def _validate(url, data):
    """Refuse a manifest whose structure is wrong or whose shard names leave its folder; the
    messages name fields and types, never quote the file's contents."""
    splits = data.get("splits")
    if not isinstance(splits, dict) or not splits:
        raise ValueError(f"{url}: 'splits' must be a non-empty object")
    for name, split in splits.items():
        shards = split.get("shards") if isinstance(split, dict) else None
        if not isinstance(shards, list):
            raise ValueError(f"{url}: split {len(name)}-character name: 'shards' must be a list")
        for i, shard in enumerate(shards):
            where = f"{url}: shard {i} of a split"
            if not isinstance(shard, dict):
                raise ValueError(f"{where} is a {type(shard).__name__}, not an object")
            for key in ("rec", "idx"):
                _check_name(where, key, shard.get(key))
            for key in _SHARD_INTS:
                value = shard.get(key)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{where}: {key!r} must be an integer >= 0, "
                                     f"not a {type(value).__name__}")
            for key in ("rec_sha256", "idx_sha256"):
                value = shard.get(key)
                if value is not None and not (isinstance(value, str) and len(value) == 64
                                              and all(c in "0123456789abcdef" for c in value)):
                    raise ValueError(f"{where}: {key!r} must be 64 hex digits or null")


def _check_name(where, key, value):
    """A shard file name: relative to the manifest's folder, without ``..`` or a scheme."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {key!r} must be a file name, not a {type(value).__name__}")
    parts = value.replace("\\", "/").split("/")
    if value.startswith("/") or "://" in value or ".." in parts or ":" in parts[0]:
        raise ValueError(f"{where}: {key!r} must be a path relative to the manifest's folder "
                         "(no absolute path, no '..', no URL)")


def check_manifest(url, storage_options=None):
    """Check every shard against the manifest: sizes, SHA-256 digests and record counts.
    Returns the ``Manifest``; raises ValueError naming the first shard that differs."""
    from ..io.reader import RecordReader
    from .shards import file_digest

    manifest = read_manifest(url, storage_options)
    for shard in manifest.shards():
        for which, expected_sha, expected_bytes in (
                ("rec", shard.rec_sha256, shard.rec_bytes), ("idx", shard.idx_sha256,
                                                            shard.idx_bytes)):
            path = getattr(shard, which)
            sha256, size = file_digest(path, storage_options)
            if size != expected_bytes:
                raise ValueError(f"{path}: {size} bytes, the manifest says {expected_bytes}")
            if expected_sha is not None and sha256 != expected_sha:
                raise ValueError(f"{path}: SHA-256 differs from the manifest's")
        with RecordReader(shard.rec, shard.idx, storage_options) as reader:
            if len(reader) != shard.records:
                raise ValueError(f"{shard.rec}: {len(reader)} records, the manifest says "
                                 f"{shard.records}")
    return manifest


def iter_records(url, split=None, storage_options=None):
    """``(key, payload)`` of every record of the manifest's shards, shard by shard in order."""
    from ..io.reader import RecordReader

    for shard in read_manifest(url, storage_options).shards(split):
        with RecordReader(shard.rec, shard.idx, storage_options) as reader:
            if len(reader) != shard.records:
                raise ValueError(f"{shard.rec}: {len(reader)} records, the manifest says "
                                 f"{shard.records}")
            for key, payload in zip(reader.keys, reader):
                yield key, payload
