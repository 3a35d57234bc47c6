"""The remote block cache on a full disk (issue 30, item 9): a failed cache write never fails a
read, temporary files are cleaned up and counted, the default limit follows the free space.

The full disk is real: ``EFBIG`` from a file size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored) in a
subprocess, and ``ENOSPC`` from a small tmpfs mounted in a private mount namespace (root only:
skipped elsewhere)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from recpipe.io.remote import cache as cache_module
from recpipe.io.remote.cache import BlockCache

KIB = 1 << 10

# writes a 40-record .rec to memory://, then reads it with ImageLoader through a block cache in
# argv[1] with argv[2] (JSON) as recpipe's remote options; prints a JSON summary
_LOADER = textwrap.dedent("""
    import json, logging, os, resource, signal, sys
    import cv2, numpy as np
    import recpipe
    from recpipe import ImageLoader

    cache_dir, options, fsize = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    warnings = []
    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())
    logging.getLogger("recpipe.io.remote.cache").addHandler(Keep(logging.WARNING))
    rng = np.random.default_rng(0)
    with recpipe.RecordWriter("memory://full/data.rec") as writer:
        for i in range(40):
            ok, jpeg = cv2.imencode(".jpg", rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), jpeg.tobytes()))
    if fsize:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    storage = {"recpipe": {"cache_dir": cache_dir, **options}}
    labels = []
    for epoch in range(2):
        with ImageLoader("memory://full/data.rec", 8, (3, 32, 32), on_error="skip",
                         storage_options=storage) as loader:
            for images, batch_labels in loader:
                labels.extend(batch_labels.tolist())
            stats = loader.reader.source_stats()
    files = [name for _, _, names in os.walk(cache_dir) for name in names]
    held = sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(cache_dir) for name in names)
    print(json.dumps({"labels": sorted(labels), "files": files, "held": held,
                      "warnings": warnings, "stats": stats}))
""")


def _run(cache_dir, options, fsize=0, mount_kib=None):
    command = [sys.executable, "-c", _LOADER, str(cache_dir), json.dumps(options), str(fsize)]
    if mount_kib is not None:
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f'mount -t tmpfs -o size={mount_kib}k tmpfs "$0" && exec "$@"',
                   str(cache_dir.parent)] + command
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, RECPIPE_INDEX_CACHE="0"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _can_mount_tmpfs(tmp_path):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_cache_write_failing_with_efbig_serves_the_fetched_bytes(tmp_path):
    # 64 KiB blocks under a 16 KiB file size limit: every cache write fails half-way
    out = _run(tmp_path / "cache", {"cache_block": 64 * KIB}, fsize=16 * KIB)
    assert out["labels"] == sorted(list(range(40)) * 2)  # both epochs, nothing skipped
    assert not [name for name in out["files"] if name.endswith(".tmp")]
    assert out["stats"]["cache_write_errors"] >= 1
    assert len(out["warnings"]) == 1 and "cannot write" in out["warnings"][0]


@pytest.mark.parametrize("limit", [1 << 30, None])
def test_a_full_disk_never_fails_a_read(tmp_path, limit):
    """ENOSPC on a 96 KiB tmpfs (the .rec is ~220 KiB): with a 1 GiB limit the disk fills and
    writes fail; with the default limit the cache stays within half of the disk."""
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("cannot mount a tmpfs here (needs root and unshare)")
    mount = tmp_path / "disk"
    mount.mkdir()
    out = _run(mount / "cache", {"cache_block": 16 * KIB, "cache_bytes": limit}, mount_kib=96)
    assert out["labels"] == sorted(list(range(40)) * 2)
    assert not [name for name in out["files"] if name.endswith(".tmp")]
    if limit is None:
        assert 0 < out["held"] <= 48 * KIB
        assert out["stats"]["cache_write_errors"] == 0 and not out["warnings"]
    else:
        assert out["stats"]["cache_write_errors"] >= 1 and len(out["warnings"]) == 1


def test_temporary_files_count_and_stale_ones_are_removed(tmp_path):
    cache = BlockCache(tmp_path, "s3://b/x.rec|100|etag", max_bytes=12 * KIB, block_size=4 * KIB)
    folder = tmp_path / "other"
    folder.mkdir()
    stale = folder / "0000000001.deadbeef.tmp"
    stale.write_bytes(b"s" * 6 * KIB)
    old = time.time() - cache_module.STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    live = folder / "0000000002.cafef00d.tmp"  # another writer's, being written now
    live.write_bytes(b"l" * 4 * KIB)
    cache.put(0, b"a" * 4 * KIB)
    cache.put(1, b"b" * 4 * KIB)
    assert not stale.exists() and live.exists()
    # the live temporary file counts: blocks 0 and 1 fit beside it, a third evicts block 0
    assert cache.size() == 12 * KIB
    cache.put(2, b"c" * 2 * KIB)
    assert cache.get(0, 4 * KIB) is None
    assert cache.get(1, 4 * KIB) == b"b" * 4 * KIB
    assert cache.size() == 10 * KIB


def test_the_default_limit_follows_the_free_space(tmp_path, monkeypatch):
    """A 24 KiB disk holding nothing but the cache: the default limit is half of it."""
    cache = BlockCache(tmp_path, "u", block_size=4 * KIB)
    disk = {"size": 24 * KIB}

    def usage(path):
        free = disk["size"] - cache.size()
        return shutil._ntuple_diskusage(disk["size"], disk["size"] - free, free)

    monkeypatch.setattr(cache_module.shutil, "disk_usage", usage)
    cache.put(0, b"a" * 4 * KIB)
    assert cache.limit() == 12 * KIB
    for block in range(1, 6):
        cache.put(block, b"x" * 4 * KIB)
    assert cache.size() == 12 * KIB
    disk["size"] = 1 << 50
    assert cache.limit() == cache_module.DEFAULT_MAX_BYTES


def test_a_cache_folder_that_cannot_be_made_is_a_cache_that_misses(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = BlockCache(blocker / "cache", "u", max_bytes=1 << 20, block_size=4 * KIB)
    cache.put(0, b"a" * 4 * KIB)  # NotADirectoryError: logged, not raised
    assert cache.write_errors == 1
    assert cache.get(0, 4 * KIB) is None
