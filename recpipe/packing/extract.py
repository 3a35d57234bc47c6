"""Leaving a ``.rec``: every image record once, its bytes unchanged, into files or tar shards.

``extract_records(src, out)`` writes ``OUT/<label>/<key>.<ext>`` (the folder is the record's
first label, named by its class when the label map ``recpipe pack`` wrote beside the ``.rec``
is there: ``ClassFolders``; the image bytes are the record's, never re-encoded) and
``OUT/<stem>.lst``, an
im2rec list with all labels that ``recpipe pack OUT/<stem>.lst NEW --pass-through --pack-label``
packs back into an equivalent ``.rec`` (its labels written exactly: ``index.exact_label_text``,
where im2rec's ``%f`` would round them). ``format="tar"`` writes WebDataset-style shards
``OUT/shard-000000.tar`` instead: ``<key>.<ext>`` (the image), ``<key>.cls`` (the first label)
and ``<key>.json`` (all labels, the key, the header id and the record position).

Structure is not an image: a file in InsightFace's layout (``recpipe.io.format.layout``) has its
header record and identity records left out. The records are cut into chunks (a tar shard each) of
about ``shard_size`` bytes, extracted in parallel; a chunk is done when its marker
``OUT/.recpipe-extract/chunk-NNNNNN.json`` is published (atomically), so a run that stops is
continued by running it again; after a complete run the state folder is removed (OUT holds
only the images and the list, or the shards). A new extract into an OUT that already holds
files is refused unless ``overwrite``. The plan of a run (``OUT/.recpipe-extract/plan.json``) names
the source by its content (``content_identity``: its index, size and checksum sidecar, or without
a sidecar the version of the file): a different or rewritten source (a relabelled re-pack of
the same size) is refused, never taken for the one that was extracted. A chunk whose marker
exists but one of whose outputs is gone is extracted again. Nothing is written outside OUT whatever
labels or keys say: folder names come from numbers, file names from keys that are single safe path
components (else, or when keys repeat, ``record-<position>``), and every path is checked with
``check_inside``.
"""

import array
import hashlib
import io
import json
import logging
import os
import re
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Union

import numpy as np

from ..errors import DecodeError, RecordFormatError
from ..io.atomic import AtomicOutput, publish, temporary_name
from ..io.health.explain import explain_stop
from ..io.format.header import unpack_header
from ..io.sidecars.index import format_list_line
from ..io.sidecars.label_map import find_label_map, read_label_map
from ..io.format.layout import image_positions
from ..io.reader import RecordReader
from ..io.sources import url_to_fs
from .inputs import check_inside

__all__ = ["EXTRACT_FORMATS", "ClassFolders", "ExtractSummary", "content_identity",
           "extract_chunk", "extract_positions", "extract_records", "label_folder",
           "record_name", "image_extension", "plan_chunks"]

log = logging.getLogger(__name__)

EXTRACT_FORMATS = ("folder", "tar")
STATE_FOLDER = ".recpipe-extract"
DEFAULT_SHARD_BYTES = 256 << 20
_MAX_CHUNK_RECORDS = 10000  # folder format: markers stay small, workers stay busy
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
_SIGNATURES = ((b"\xff\xd8\xff", ".jpg"), (b"\x89PNG\r\n\x1a\n", ".png"), (b"GIF8", ".gif"),
               (b"BM", ".bmp"), (b"II*\x00", ".tif"), (b"MM\x00*", ".tif"))


@dataclass
class ExtractSummary:
    """What ``extract_records`` did: images written (this run and kept from an earlier one),
    their bytes, the chunks, the ``.lst`` (folder format) and the seconds taken."""

    src: str
    out: str
    format: str
    images: int = 0
    bytes: int = 0
    chunks: int = 0
    resumed_chunks: int = 0
    skipped_records: int = 0  # header and identity records of an InsightFace layout
    list_file: Optional[str] = None
    label_map: Optional[str] = None  # the label map whose class names name the folders
    shards: List[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self):
        return asdict(self)


def image_extension(data):
    """The file extension of image bytes by their signature (``.bin`` when unknown)."""
    head = bytes(data[:12])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return ".webp"
    for magic, extension in _SIGNATURES:
        if head.startswith(magic):
            return extension
    return ".bin"


def label_folder(label):
    """The folder of a label: ``"%d"`` for a whole number, else its shortest float text
    (``0.5``, ``nan``); never a path separator or ``..``."""
    value = float(label)
    if value.is_integer():
        return "%d" % value
    return repr(value)


_UNSAFE_CLASS = re.compile(r"[/\\\x00-\x1f\x7f]")


class ClassFolders:
    """The folder of each label: its class name from a label map (``recpipe.io.sidecars.label_map``)
    when the map names it, else ``label_folder``. A map is used only when every name is a
    plain single folder name (no separator or control character, not hidden, no surrounding
    spaces, at most 255 bytes) that cannot be taken for another label's number; else the
    folders are numbers (logged)."""

    def __init__(self, label_map=None):
        self.url = None
        self.names = {}
        if label_map is None:
            return
        names = {float(label): name for label, name in label_map.names().items()}
        unsafe = [name for label, name in names.items() if not _usable_class(name, label)]
        if unsafe:
            log.warning("label map %s not used for folder names: %r cannot name a folder",
                        label_map.url, unsafe[0])
            return
        self.url = label_map.url
        self.names = names

    def folder(self, label):
        name = self.names.get(float(label))
        return name if name is not None else label_folder(label)

    def to_dict(self):
        """For the plan: the names in use, by label text."""
        return {label_folder(label): name for label, name in sorted(self.names.items())}


def _usable_class(name, label):
    if not name or name in (".", "..") or name.startswith(".") or name != name.strip() or \
            _UNSAFE_CLASS.search(name) or len(name.encode("utf-8")) > 255:
        return False
    try:  # a name that reads as a number must be its own label's
        return float(name) == label
    except ValueError:
        return True


def record_name(key, position):
    """The file stem of a record: its index key when that is a short safe name (letters,
    digits, ``_``, ``-``), else ``record-<position>``."""
    text = str(key)
    return text if _SAFE_NAME.match(text) else f"record-{position}"


def plan_chunks(sizes, shard_size, max_records=None):
    """Cut records of byte sizes ``sizes`` into ``[start, stop)`` chunks of about
    ``shard_size`` bytes (and at most ``max_records`` records)."""
    bounds, start, total = [], 0, 0
    for i, size in enumerate(np.asarray(sizes, dtype=np.int64).tolist()):
        total += size
        if total >= shard_size or (max_records and i + 1 - start >= max_records):
            bounds.append((start, i + 1))
            start, total = i + 1, 0
    if start < len(sizes):
        bounds.append((start, len(sizes)))
    return bounds


class _Output:
    """OUT: its filesystem, the confined paths under it, and atomic writes."""

    def __init__(self, out, storage_options):
        self.url = str(out).rstrip("/")
        self.fs, self.root = url_to_fs(self.url, storage_options)
        self.root = self.root.rstrip("/")
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple)
                                else (self.fs.protocol,))
        self.storage_options = storage_options
        self._made = set()
        self._lock = threading.Lock()

    def url_of(self, relpath):
        return f"{self.url}/{relpath}"

    def path_of(self, relpath):
        """The filesystem path of ``relpath`` under OUT, refused (UnsafeInput) when it leaves
        OUT (``..``, absolute, a symlinked folder pointing out)."""
        check_inside(self.root, relpath, local=self.local)
        return f"{self.root}/{relpath}"

    def makedirs(self, relfolder):
        with self._lock:  # held while making it: no other thread writes into it before
            if relfolder not in self._made:
                self.fs.makedirs(self.path_of(relfolder) if relfolder else self.root,
                                 exist_ok=True)
                self._made.add(relfolder)

    def write(self, relpath, data):
        """Write ``data`` to ``relpath``: under a temporary name, then renamed (locally), or
        one whole-object put (object stores), so a file is never seen half written."""
        path = self.path_of(relpath)
        folder = relpath.rsplit("/", 1)[0] if "/" in relpath else ""
        self.makedirs(folder)
        if self.local:
            temp = temporary_name(path)
            with open(temp, "wb") as f:
                f.write(data)
            os.replace(temp, path)
        else:
            self.fs.pipe_file(path, bytes(data))

    def publish(self, relpath, data):
        """Write ``data`` atomically (fsynced locally): for markers and the list."""
        self.path_of(relpath)
        return publish(self.url_of(relpath), data, self.storage_options)

    def remove_leftovers(self):
        """Remove the temporary files an interrupted run left (``.<name>.<tag>.tmp`` in OUT,
        its label folders and the state folder)."""
        for pattern in ("/.*.tmp", "/*/.*.tmp"):
            for path in self.fs.glob(self.root + pattern):
                log.info("removing %s, left by an interrupted run", path)
                self.fs.rm(path)

    def exists(self, relpath):
        return self.fs.exists(self.path_of(relpath))

    def first_file(self):
        """The path of one file under OUT, or None when it holds none."""
        if not self.fs.exists(self.root):
            return None
        for folder, _, files in self.fs.walk(self.root):
            if files:
                return f"{str(folder).rstrip('/')}/{sorted(files)[0]}"
        return None

    def remove_state(self):
        """Remove the state folder (the plan and the markers) of a complete run."""
        try:
            self.fs.rm(self.path_of(STATE_FOLDER), recursive=True)
        except FileNotFoundError:
            pass

    def file_hashes(self):
        """``_path_hash`` of every file under OUT, sorted: one listing, 8 bytes a file."""
        hashes = array.array("Q")
        for folder, _, files in self.fs.walk(self.root):
            relfolder = str(folder)[len(self.root):].strip("/")
            for name in files:
                hashes.append(_path_hash(f"{relfolder}/{name}" if relfolder else name))
        return np.sort(np.frombuffer(hashes, dtype=np.uint64)) if hashes else \
            np.zeros(0, np.uint64)

    def read_text(self, relpath):
        with self.fs.open(self.path_of(relpath), "rb") as f:
            return f.read().decode("utf-8")


@dataclass(frozen=True)
class _Record:
    """One image record, ready to write."""

    position: int
    key: object
    index: int
    labels: tuple
    image: memoryview

    def stem(self, by_key):
        """The file stem: by key (``record_name``) when ``by_key``, else by position."""
        return record_name(self.key, self.position) if by_key else f"record-{self.position}"


def _read_record(reader, position, key):
    payload = reader[position]
    header, start = unpack_header(payload, path=reader.url, record=position)
    label = header.label
    labels = tuple(float(v) for v in np.atleast_1d(label)) if header.flag else (float(label),)
    index = key if isinstance(key, (int, np.integer)) else header.id
    return _Record(position, key, int(index), labels, memoryview(payload)[start:])


class _Extractor:
    """Writes chunks of records to OUT, one ``run(chunk)`` per worker task."""

    def __init__(self, reader, positions, out, fmt, progress, folders=None):
        self.reader = reader
        self.folders = folders or ClassFolders()
        self.positions = positions
        self.keys = reader.keys
        # repeated keys would give two records one name: then every name is by position
        self.by_key = reader.table.identity or _unique(self.keys.array)
        self.out = out
        self.format = fmt
        self.progress = progress
        self._lock = threading.Lock()

    def _advance(self, nbytes):
        if self.progress is not None:
            with self._lock:
                self.progress(nbytes)

    def records(self, start, stop):
        positions = self.positions[start:stop]
        reads = self.reader.prefetch(positions)  # remote: coalesced range requests ahead
        try:
            for position in positions.tolist():
                yield _read_record(self.reader, position, self.keys[position])
        finally:
            reads.cancel()

    def run(self, number, start, stop):
        """Extract records ``[start, stop)`` of the plan as chunk ``number``; publish its
        marker last; return ``(images, bytes)``."""
        if self.format == "tar":
            lines, nbytes, shard = self._tar(number, start, stop)
        else:
            (lines, nbytes), shard = self._folder(start, stop), None
        marker = {"chunk": number, "start": start, "stop": stop, "images": stop - start,
                  "bytes": nbytes, "lines": lines, "shard": shard}
        self.out.publish(_marker(number), json.dumps(marker).encode("utf-8"))
        return stop - start, nbytes

    def _folder(self, start, stop):
        lines, nbytes = [], 0
        for record in self.records(start, stop):
            relpath = (f"{self.folders.folder(record.labels[0])}/{record.stem(self.by_key)}"
                       f"{image_extension(record.image)}")
            self.out.write(relpath, record.image)
            lines.append(format_list_line(record.index, record.labels, relpath, exact=True))
            nbytes += len(record.image)
            self._advance(len(record.image))
        return lines, nbytes

    def _tar(self, number, start, stop):
        relpath = f"shard-{number:06d}.tar"
        self.out.path_of(relpath)
        nbytes = 0
        # streamed to a temporary name, renamed when whole: memory stays one record
        with AtomicOutput(self.out.url_of(relpath), self.out.storage_options) as shard, \
                tarfile.open(fileobj=shard, mode="w|", format=tarfile.USTAR_FORMAT) as tar:
            for record in self.records(start, stop):
                stem = record.stem(self.by_key)
                meta = {"key": str(record.key), "id": record.index, "position": record.position,
                        "labels": list(record.labels)}
                name = self.folders.names.get(record.labels[0])
                if name is not None:
                    meta["class"] = name
                members = ((image_extension(record.image), record.image),
                           (".cls", label_folder(record.labels[0]).encode("ascii")),
                           (".json", json.dumps(meta).encode("utf-8")))
                for extension, data in members:
                    info = tarfile.TarInfo(stem + extension)
                    info.size, info.mode, info.mtime = len(data), 0o644, 0
                    tar.addfile(info, io.BytesIO(data))
                nbytes += len(record.image)
                self._advance(len(record.image))
        return [], nbytes, relpath


def _path_hash(relpath):
    return int.from_bytes(hashlib.blake2b(relpath.encode("utf-8"), digest_size=8).digest(),
                          "little")


def content_identity(reader):
    """What an extract of ``reader``'s file is bound to: its size, a digest of its index
    (offsets and keys) and, when it has a checksum sidecar, a digest of the sums of every
    record; without a sidecar, the version of the file (``RecordReader.identity``: a local
    file's modification time and inode, an object's ETag), since the records' bytes are then
    not summed anywhere (a same-size relabelled re-pack has the same index)."""
    table = reader.table
    index = hashlib.sha256(np.asarray(table.offsets, dtype="<i8").tobytes())
    if not table.identity:
        keys = table.keys
        index.update(b"keys")
        if isinstance(keys, list):  # string keys
            index.update("\n".join(map(str, keys)).encode("utf-8"))
        else:
            index.update(np.asarray(keys, dtype="<i8").tobytes())
    identity = {"size": reader.size, "index_sha256": index.hexdigest()}
    sums = reader.sums
    if sums is not None:
        identity["sums_sha256"] = hashlib.sha256(sums.to_bytes()).hexdigest()
    else:
        identity["version"] = reader.identity
    return identity


def _done_chunks(output, chunks):
    """The chunks of an earlier run that are done: their marker is published and reads, and
    every file it lists is still there (a chunk missing one is extracted again)."""
    done, present = set(), None
    for number in range(chunks):
        if not output.exists(_marker(number)):
            continue
        try:
            marker = json.loads(output.read_text(_marker(number)))
            outputs = [marker["shard"]] if marker["shard"] else \
                [line.rstrip("\n").rsplit("\t", 1)[-1] for line in marker["lines"]]
        except (ValueError, KeyError, TypeError) as e:
            log.warning("%s: unreadable marker of chunk %d (%s): extracting it again",
                        output.url, number, e)
            continue
        if present is None:
            present = output.file_hashes()
        missing = _missing(present, [_path_hash(relpath) for relpath in outputs])
        if missing:
            log.warning("%s: chunk %d was done but %d of its files are gone: extracting it "
                        "again", output.url, number, missing)
            continue
        done.add(number)
    return done


def _missing(present, wanted):
    """How many of the hashes ``wanted`` are not in the sorted array ``present``."""
    wanted = np.asarray(wanted, dtype=np.uint64)
    if not len(present):
        return len(wanted)
    at = np.minimum(np.searchsorted(present, wanted), len(present) - 1)
    return int(np.sum(present[at] != wanted))


def _unique(keys):
    keys = np.asarray(keys)
    return len(np.unique(keys)) == len(keys)


def _marker(number):
    return f"{STATE_FOLDER}/chunk-{number:06d}.json"


def _check_plan(out, plan, overwrite):
    """Record the plan on a first run; on a later one, refuse a different source or plan.
    A first run into an OUT that already holds files is refused unless ``overwrite``."""
    relpath = f"{STATE_FOLDER}/plan.json"
    if out.exists(relpath):
        earlier = json.loads(out.read_text(relpath))
        if earlier != plan:
            raise ValueError(f"{out.url} holds an extract of another file or with other "
                             f"options ({earlier}); use an empty OUT or the same command")
        return True
    if not overwrite:
        held = out.first_file()
        if held is not None:
            raise ValueError(f"{out.url} already holds files ({held}...), e.g. a complete "
                             "extract: extract into an empty folder, or overwrite=True "
                             "(--overwrite) to write over them (files this extract does not "
                             "write are left as they are)")
    out.publish(relpath, json.dumps(plan).encode("utf-8"))
    return False


def _collect(output, chunks, summary, list_name):
    """Add the chunks' markers up into ``summary`` and, for the folder format, write the list
    ``list_name`` from them, one marker in memory at a time."""
    listing = None
    if list_name is not None:
        output.path_of(list_name)
        listing = AtomicOutput(output.url_of(list_name), output.storage_options)
    try:
        for number in range(chunks):
            marker = json.loads(output.read_text(_marker(number)))
            summary.images += marker["images"]
            summary.bytes += marker["bytes"]
            if marker["shard"]:
                summary.shards.append(output.url_of(marker["shard"]))
            if listing is not None:
                listing.write("".join(marker["lines"]).encode("utf-8"))
    except BaseException:
        if listing is not None:
            listing.discard()
        raise
    if listing is not None:
        listing.commit()
        summary.list_file = listing.url


def _class_folders(src, size, label_map, storage_options):
    if label_map is False:
        return ClassFolders()
    if label_map is None or label_map is True:
        return ClassFolders(find_label_map(src, size, storage_options))
    return ClassFolders(read_label_map(label_map, storage_options))


def _run_all(extractor, tasks, workers):
    """Run the chunk tasks on ``workers`` threads; the first failure cancels what has not
    started and is raised (its chunk, and those not run, have no marker)."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="extract")
    try:
        for future in [pool.submit(extractor.run, *task) for task in tasks]:
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def extract_records(src: str, out: str, *, index_url: Optional[str] = None,
                    format: str = "folder", shard_size: int = DEFAULT_SHARD_BYTES,
                    workers: int = 4, storage_options: Optional[dict] = None,
                    progress=None, label_map: Union[None, bool, str] = None,
                    overwrite: bool = False, chunk_runner=None) -> ExtractSummary:
    """Write every image record of ``src`` once into ``out`` (see the module docstring).

    ``format``: 'folder' (a folder per label, plus ``OUT/<stem>.lst``) or 'tar' (WebDataset
    shards of about ``shard_size`` bytes); ``workers``: chunks extracted at once;
    ``storage_options`` are used on both sides; ``progress(bytes)`` is called per image.
    ``label_map``: None finds the map ``recpipe pack`` wrote beside ``src``
    (``recpipe.io.sidecars.label_map``) and names the folders by class; False names them by number;
    a URL names the map to use. ``overwrite``: a new extract may write into an OUT that already
    holds files. Running it again after an interruption continues where it stopped.
    ``chunk_runner(todo, folders)``: runs the chunk tasks ``(number, start, stop)`` elsewhere,
    each with ``extract_chunk`` and the ``ClassFolders`` given (``recpipe.packing.wholefile``: on a
    Dask cluster)."""
    if format not in EXTRACT_FORMATS:
        raise ValueError(f"format={format!r}: expected one of {EXTRACT_FORMATS}")
    if shard_size < 1 or workers < 1:
        raise ValueError(f"shard_size={shard_size} and workers={workers} must be >= 1")
    started = time.perf_counter()
    summary = ExtractSummary(str(src), str(out), format)
    with RecordReader(src, index_url, storage_options) as reader:
        positions = extract_positions(reader)
        summary.skipped_records = len(reader) - len(positions)
        starts, ends = reader.spans(positions)
        chunks = plan_chunks(ends - starts, shard_size,
                             _MAX_CHUNK_RECORDS if format == "folder" else None)
        folders = _class_folders(src, reader.size, label_map, storage_options)
        summary.label_map = folders.url
        output = _Output(out, storage_options)
        output.makedirs("")
        plan = {"source_bytes": reader.size, "records": len(reader), "images": len(positions),
                "format": format, "chunks": [list(c) for c in chunks],
                "source": content_identity(reader), "classes": folders.to_dict()}
        resumed = _check_plan(output, plan, overwrite)
        done = set()
        if resumed:
            output.remove_leftovers()
            done = _done_chunks(output, len(chunks))
        extractor = _Extractor(reader, positions, output, format, progress, folders)
        todo = [(n, a, b) for n, (a, b) in enumerate(chunks) if n not in done]
        summary.chunks, summary.resumed_chunks = len(chunks), len(chunks) - len(todo)
        try:
            if chunk_runner is None:
                _run_all(extractor, todo, workers)
            else:
                chunk_runner(todo, folders)
        except (RecordFormatError, DecodeError) as e:  # say which record, its source file
            explained = explain_stop(e, reader, loader=False)
            if explained is e:
                raise
            raise explained from None
    stem = os.path.splitext(str(src).rstrip("/").rsplit("/", 1)[-1])[0] or "extract"
    _collect(output, len(chunks), summary, None if format == "tar" else f"{stem}.lst")
    output.remove_state()  # complete: OUT holds the images and the list, or the shards
    summary.seconds = time.perf_counter() - started
    log.info("extracted %d images (%d bytes) of %s into %s", summary.images, summary.bytes,
             src, out)
    return summary


def extract_positions(reader):
    """The positions of the records ``extract_records`` writes: every record, or the images
    of an InsightFace layout."""
    chosen = image_positions(reader)
    return np.arange(len(reader), dtype=np.int64) if chosen is None else chosen


def extract_chunk(reader, positions, out, number, start, stop, *, format="folder",
                  storage_options=None, folders=None):
    """Extract chunk ``number`` of an ``extract_records`` plan (the records
    ``positions[start:stop]`` of ``reader``) into ``out`` and publish its marker, as
    ``extract_records`` does, into the class ``folders`` of its plan (``ClassFolders``): what a
    cluster task runs. Returns ``(images, bytes)``."""
    return _Extractor(reader, positions, _Output(out, storage_options), format, None,
                      folders).run(number, start, stop)
