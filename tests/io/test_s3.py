"""Remote reads against moto's S3 server on 127.0.0.1: request counters and byte equality.

Counters are deterministic (requests made, bytes fetched per byte used, most requests in flight);
nothing here measures speed.
"""

import math
import os
import time

import fsspec
import numpy as np
import pytest

from recpipe.decode.order import block_shuffle, byte_runs
from recpipe.io import RecordReader, RecordWriter
from recpipe.io.format.framing import frame
from recpipe.io.sources import S3_CLIENT_DEFAULTS, open_source, url_to_fs

from ._helpers import jpeg

KIB = 1 << 10


def _options(options, **recpipe):
    merged = dict(options)
    merged["recpipe"] = {**options["recpipe"], **recpipe}
    return merged


def _upload(base, options, payloads, tmp_path, name="d"):
    """Write the records locally and to S3; return ``(s3 url, local url)``."""
    local = f"{tmp_path}/{name}.rec"
    for url, opts in ((local, None), (f"{base}/{name}.rec", options)):
        with RecordWriter(url, storage_options=opts) as writer:
            for payload in payloads:
                writer.write(payload)
    return f"{base}/{name}.rec", local


def _payloads(n, size=3000, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.bytes(size + int(rng.integers(0, 64))) for _ in range(n)]


def test_sequential_streaming_uses_big_chunks(s3, s3_server, tmp_path):
    base, options = s3
    payloads = _payloads(200, size=5000)
    url, local = _upload(base, options, payloads, tmp_path)
    chunk = 128 * KIB
    opts = _options(options, chunk_bytes=chunk, readahead_chunks=2)
    with RecordReader(url, storage_options=opts) as reader:
        s3_server.faults()  # count from here: the .idx read is not part of the stream
        source = reader._source
        # the scanning Window reads 4 MiB blocks; make it read in chunk-sized steps instead
        from recpipe.io.format.scan import iter_records

        got = [p for _, p in iter_records(source, block_size=chunk)]
        stats = source.stats()
    assert got == payloads
    size = os.path.getsize(local)
    assert stats["requests"] <= math.ceil(size / chunk) + 2
    assert stats["bytes_fetched"] <= size + chunk  # nothing read twice but the first block
    assert s3_server.counters()["ranged_gets"] == stats["requests"]
    assert stats["retries"] == 0


def test_indexed_prefetch_coalesces_neighbours(s3, tmp_path):
    base, options = s3
    payloads = _payloads(300)
    url, local = _upload(base, options, payloads, tmp_path)
    # a budget under the file's size: windows of plan_window records, not the whole file
    opts = _options(options, plan_window=100, max_gap=0, max_block=1 << 30, max_inflight=4,
                    budget_bytes=200 * KIB)
    with RecordReader(url, storage_options=opts) as reader, RecordReader(local) as near:
        plan = reader.prefetch(range(len(reader)))
        assert plan.planned_requests == 3  # 300 consecutive records, windows of 100
        assert [reader[i] for i in range(len(reader))] == [near[i] for i in range(len(near))]
        stats = reader.source_stats()
    assert stats["requests"] == 3
    assert stats["bytes_fetched"] == os.path.getsize(local)  # bytes fetched per byte used: 1.0
    assert stats["max_inflight"] <= 4


def test_block_shuffle_fetches_each_run_once(s3, tmp_path):
    base, options = s3
    payloads = _payloads(240)
    url, local = _upload(base, options, payloads, tmp_path)
    with RecordReader(url, storage_options=options) as reader:
        sizes = [end - start for start, end in (reader.span(i) for i in range(len(reader)))]
        runs = byte_runs(sizes, 64 * KIB)
        order = block_shuffle(len(reader), np.random.default_rng(0), block_records=0,
                              window_blocks=3, run_starts=runs)
        plan = reader.prefetch(order, runs=runs)
        got = [reader[int(p)] for p in order]
        stats = reader.source_stats()
    assert got == [payloads[p] for p in order]
    assert plan.planned_requests == len(runs) == stats["requests"]
    assert stats["bytes_fetched"] == os.path.getsize(local)
    assert all(sum(sizes[a:b]) <= 64 * KIB for a, b in zip(runs, runs[1:] + [len(sizes)]))


def test_exact_shuffle_requests_and_amplification_are_bounded(s3, tmp_path):
    base, options = s3
    payloads = _payloads(200)
    url, _ = _upload(base, options, payloads, tmp_path)
    gap = 8 * KIB
    opts = _options(options, plan_window=50, max_gap=gap, max_block=256 * KIB)
    order = [int(p) for p in np.random.default_rng(1).permutation(len(payloads))]
    with RecordReader(url, storage_options=opts) as reader:
        plan = reader.prefetch(order)
        got = [reader[p] for p in order]
        stats = reader.source_stats()
        used = sum(reader.span(p)[1] - reader.span(p)[0] for p in order)
    assert got == [payloads[p] for p in order]
    assert stats["requests"] == plan.planned_requests < len(order)
    assert stats["bytes_fetched"] == plan.planned_bytes
    # every request's extra bytes are gaps of at most max_gap between the records it serves
    assert stats["bytes_fetched"] <= used + gap * (len(order) - plan.planned_requests)


def test_cancelled_plan_frees_its_requests(s3, tmp_path):
    base, options = s3
    url, _ = _upload(base, options, _payloads(100), tmp_path)
    opts = _options(options, plan_window=10, budget_bytes=10 * KIB)
    with RecordReader(url, storage_options=opts) as reader:
        plan = reader.prefetch(range(100))
        reader[0]
        plan.cancel()
        assert reader._source._prefetcher.held_bytes == 0
        requests = reader.source_stats()["requests"]
        assert requests < plan.planned_requests  # the budget kept most of the plan queued
        assert reader[50] == reader[50]


def test_block_cache_serves_later_epochs(s3, tmp_path):
    base, options = s3
    payloads = _payloads(120)
    url, local = _upload(base, options, payloads, tmp_path)
    cache = tmp_path / "cache"
    opts = _options(options, cache_dir=str(cache), cache_block=64 * KIB, cache_bytes=1 << 30)
    for epoch in range(2):
        with RecordReader(url, storage_options=opts) as reader:
            plan = reader.prefetch(range(len(reader)))
            assert [reader[i] for i in range(len(reader))] == payloads
            plan.cancel()
            stats = reader.source_stats()
        if epoch == 0:
            assert stats["requests"] >= math.ceil(os.path.getsize(local) / (64 * KIB))
        else:
            assert stats["requests"] == 0 and stats["cache_hits"] > 0


def test_block_cache_respects_its_size_limit(s3, tmp_path):
    base, options = s3
    payloads = _payloads(120)
    url, _ = _upload(base, options, payloads, tmp_path)
    cache = tmp_path / "cache"
    limit = 100 * KIB
    opts = _options(options, cache_dir=str(cache), cache_block=32 * KIB, cache_bytes=limit)
    with RecordReader(url, storage_options=opts) as reader:
        assert [reader[i] for i in range(len(reader))] == payloads
        held = reader._source.cache.size()
    assert 0 < held <= limit


def test_storage_options_reach_every_layer(s3):
    base, options = s3
    with pytest.raises(ValueError, match="unknown storage_options"):
        open_source(f"{base}/x.rec", {**options, "recpipe": {"nope": 1}})
    mine = {**options, "config_kwargs": {"max_pool_connections": 7}}
    fs, _ = url_to_fs(f"{base}/x", mine)
    config = fs.config_kwargs
    assert config["max_pool_connections"] == 7
    assert config["read_timeout"] == S3_CLIENT_DEFAULTS["read_timeout"]
    assert fs.endpoint_url == options["endpoint_url"]
    with pytest.raises(FileNotFoundError, match="x.rec"):
        RecordReader(f"{base}/x.rec", storage_options=options)


def test_image_loader_from_s3_matches_local(s3, tmp_path):
    from recpipe.decode.loader import ImageLoader
    from recpipe.io import IRHeader, pack

    base, options = s3
    payloads = [pack(IRHeader(0, float(i % 3), i, 0), jpeg(i, shape=(40, 48, 3)))
                for i in range(48)]
    url, local = _upload(base, options, payloads, tmp_path)
    kwargs = dict(batch_size=8, data_shape=(3, 32, 32), threads=2, seed=3, rand_mirror=True,
                  random_resized_crop=True, run_bytes=8 * KIB, lookahead=False)
    batches, stats = {}, {}
    for name, target, opts, shuffle in (("s3", url, options, False), ("local", local, None, False),
                                        ("s3-block", url, options, "block")):
        with ImageLoader(target, storage_options=opts, shuffle=shuffle, **kwargs) as loader:
            batches[name] = [(x.copy(), y.copy()) for x, y in loader]
            stats[name] = loader.reader.source_stats()
            runs = loader._runs
    assert len(batches["s3"]) == len(batches["local"]) == 6
    for (xs, ys), (xl, yl) in zip(batches["s3"], batches["local"]):
        assert np.array_equal(ys, yl) and np.array_equal(xs, xl)
    labels = sorted(float(v) for _, y in batches["s3-block"] for v in y)
    assert labels == sorted(float(v) for _, y in batches["local"] for v in y)
    # one request per run, plus one at open: record 0, read to detect InsightFace's layout
    assert len(runs) > 2 and stats["s3-block"]["requests"] == len(runs) + 1
    assert stats["s3"]["requests"] == 2  # 48 consecutive records: one coalesced request


def test_pack_dataset_writes_to_s3(s3, tmp_path):
    import cv2

    from recpipe.packing.packer import pack_dataset

    base, options = s3
    for cls in ("a", "b"):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for i in range(3):
            img = np.full((16, 16, 3), 40 * i + (cls == "b") * 100, np.uint8)
            cv2.imwrite(str(tmp_path / "src" / cls / f"{i}.png"), img)
    pack_dataset(str(tmp_path / "src"), f"{base}/out", workers=0, storage_options=options)
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "out"), workers=0)
    fs, path = url_to_fs(f"{base}/out.rec", options)
    assert fs.cat_file(path) == (tmp_path / "out.rec").read_bytes()
    assert not [p for p in fs.ls(base.split("//")[1], detail=False) if p.endswith(".tmp")]
    with RecordReader(f"{base}/out.rec", storage_options=options) as reader:
        assert len(reader) == 6


def test_memory_filesystem_source_counts_requests():
    fs = fsspec.filesystem("memory")
    data = b"".join(frame(bytes([i]) * 100) for i in range(10))
    fs.pipe("/counting/x.rec", data)
    with open_source("memory://counting/x.rec") as source:
        assert bytes(source.read(0, len(data))) == data
        assert source.stats()["requests"] == 1
    fs.rm("/counting", recursive=True)


def test_damaged_record_on_s3_fails_its_checksum(s3, tmp_path):
    """The sidecar travels with the pack: a record damaged in the S3 copy raises."""
    from recpipe.errors import RecordFormatError
    from recpipe.io.sidecars.sums import sums_url_for

    base, options = s3
    payloads = _payloads(6)
    url, local = _upload(base, options, payloads, tmp_path, name="summed")
    fs, path = url_to_fs(url, options)
    assert fs.exists(url_to_fs(sums_url_for(url), options)[1])
    with RecordReader(url, storage_options=options) as reader:
        offset = int(reader.offsets[3])
    data = bytearray(fs.cat_file(path))
    data[offset + 100] ^= 1
    fs.pipe_file(path, bytes(data))
    with RecordReader(url, storage_options=options) as reader:
        assert reader.sums is not None and reader[2] == payloads[2]
        with pytest.raises(RecordFormatError, match="checksum mismatch") as info:
            reader[3]
    assert (info.value.record, info.value.offset) == (3, offset)


def test_shuffled_small_file_is_fetched_once_an_epoch(s3, tmp_path):
    """A shuffled epoch over a file that fits in half the prefetch budget is planned as one
    window: each byte is requested once, not once per window of ``plan_window`` records whose
    coalesced requests straddle the same gaps."""
    base, options = s3
    payloads = _payloads(200)
    url, local = _upload(base, options, payloads, tmp_path)
    opts = _options(options, plan_window=20, max_gap=1 << 20, max_block=1 << 30)
    order = [int(p) for p in np.random.default_rng(2).permutation(len(payloads))]
    with RecordReader(url, storage_options=opts) as reader:
        reader.prefetch(order)
        got = [reader[p] for p in order]
        stats = reader.source_stats()
    assert got == [payloads[p] for p in order]
    assert stats["bytes_fetched"] <= os.path.getsize(local)
    assert stats["requests"] == 1


def _held(windows, start, end):
    """The bytes ``[start, end)`` of the file from the first window holding them, else None."""
    for buffer, base in windows:
        if base <= start and end <= base + len(buffer):
            return bytes(buffer[start - base:end - base])
    return None


def test_a_run_is_served_from_the_prefetch_plan_as_windows(s3, tmp_path):
    """``RecordReader.windows`` (what the native decoder is handed for a remote run) takes a
    whole run from the prefetch plan under one lock (``Prefetcher.take_windows``): each record's
    span in the file is held, byte-equal, by one of the plan's requests, and no request is sent
    beyond the plan's; a span the plan does not hold is read on its own into a window of its
    own."""
    base, options = s3
    payloads = _payloads(120)
    url, local = _upload(base, options, payloads, tmp_path)
    with open(local, "rb") as f:
        file = f.read()
    order = [int(p) for p in np.random.default_rng(3).permutation(len(payloads))]
    with RecordReader(url, storage_options=options) as reader:
        plan = reader.prefetch(order[:96])
        got = []
        for first in range(0, 96, 32):
            windows, starts, ends = reader.windows(order[first:first + 32])
            assert len(windows) <= plan.planned_requests
            got += [_held(windows, s, e) for s, e in zip(starts.tolist(), ends.tolist())]
        assert reader.source_stats()["requests"] == plan.planned_requests
        windows, starts, ends = reader.windows(order[96:])  # not announced: read one by one
        assert len(windows) == len(order) - 96
        got += [_held(windows, s, e) for s, e in zip(starts.tolist(), ends.tolist())]
        want = [file[s:e] for s, e in (reader.span(p) for p in order)]
    assert got == want


def test_take_windows_serves_planned_spans_by_request_and_leaves_the_rest():
    """``Prefetcher.take_windows``: planned spans come as their requests' bytes (one window a
    request, however many spans it serves), a span no plan holds and one whose request failed
    are left to the caller (read on their own)."""
    from concurrent.futures import Future

    from recpipe.io.remote.prefetch import Prefetcher

    data = bytes(range(256)) * 4

    def submit(start, end):
        future = Future()
        if start >= 512:
            future.set_exception(OSError("request failed"))
        else:
            future.set_result(data[start:end])
        return future

    prefetcher = Prefetcher(submit, budget=1 << 20, max_gap=0, max_block=1 << 20,
                            plan_window=8, timeout=5)
    prefetcher.announce([(0, 10), (10, 20), (100, 4), (600, 8)])
    windows, missing = prefetcher.take_windows([(10, 20), (0, 10), (300, 4), (600, 8)])
    assert [(bytes(buffer), start) for buffer, start in windows] == [(data[0:30], 0)]
    assert missing == [(300, 4), (600, 8)]
    assert prefetcher.take_windows([(0, 10)]) == ([], [(0, 10)])  # taken once: let go
    windows, missing = prefetcher.take_windows([(100, 4)])
    assert [(bytes(buffer), start) for buffer, start in windows] == [(data[100:104], 100)]
    assert missing == []
    assert prefetcher.held_bytes == 0


def test_the_next_epochs_reads_are_sent_while_this_epoch_runs(s3, tmp_path):
    """With ``lookahead`` the next epoch's reads are announced as soon as every request of this
    epoch's plan is sent (its order is known from the seed), not a prefetch depth before the end:
    its first windows arrive while this epoch is decoded. The batches are those of a loader
    that announces nothing ahead."""
    from recpipe.decode.loader import ImageLoader
    from recpipe.io import IRHeader, pack

    base, options = s3
    payloads = [pack(IRHeader(0, float(i % 3), i, 0), jpeg(i, shape=(40, 48, 3)))
                for i in range(48)]
    url, _ = _upload(base, options, payloads, tmp_path)
    kwargs = dict(batch_size=8, data_shape=(3, 32, 32), threads=1, prefetch=1, seed=5,
                  rand_mirror=True, run_bytes=8 * KIB, shuffle="block", storage_options=options)
    with ImageLoader(url, lookahead=False, **kwargs) as loader:
        want = [[(x.copy(), y.copy()) for x, y in loader] for _ in range(2)]
    with ImageLoader(url, **kwargs) as loader:
        runs = len(loader._runs)
        first = iter(loader)
        got = [[tuple(a.copy() for a in next(first))]]
        deadline = time.monotonic() + 30  # requests are counted when a fetch thread sends them
        while (sent := loader.reader.source_stats()["requests"]) < 1 + 2 * runs and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        got[0] += [(x.copy(), y.copy()) for x, y in first]
        got.append([(x.copy(), y.copy()) for x, y in loader])
    # one request at open (record 0: InsightFace's layout?), one per run for each epoch
    assert runs > 2 and sent == 1 + 2 * runs
    assert len(got[0]) == len(got[1]) == 6
    for mine, theirs in zip(got, want):
        for (xm, ym), (xt, yt) in zip(mine, theirs):
            assert np.array_equal(xm, xt) and np.array_equal(ym, yt)


def test_a_batch_claims_its_windows_where_it_is_issued(s3, tmp_path):
    """``RecordReader.claim_windows``: the records are taken from the prefetch plan when the
    claim is made (where batches are issued), their bytes waited for by ``windows()`` (where
    they are decoded, once however many threads ask): the same windows as ``windows``, no
    request beyond the plan's, and what the claim took is no longer the plan's."""
    import threading

    base, options = s3
    payloads = _payloads(64)
    url, local = _upload(base, options, payloads, tmp_path)
    with open(local, "rb") as f:
        file = f.read()
    order = [int(p) for p in np.random.default_rng(5).permutation(len(payloads))]
    with RecordReader(url, storage_options=options) as reader:
        plan = reader.prefetch(order)
        claims = [reader.claim_windows(order[first:first + 16]) for first in range(0, 64, 16)]
        assert plan.all_sent  # every span claimed: the plan's requests are all out
        got = {}
        threads = [threading.Thread(target=lambda i=i: got.setdefault(i, claims[i].windows()))
                   for i in range(len(claims))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(got) == list(range(len(claims)))
        assert claims[0].windows() is got[0]  # waited for once
        for i, windows in got.items():
            starts, ends = reader.spans(order[16 * i:16 * i + 16])
            held = [_held(windows, s, e) for s, e in zip(starts.tolist(), ends.tolist())]
            assert held == [file[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
        assert reader.source_stats()["requests"] == plan.planned_requests
        windows, starts, ends = reader.windows(order[:4])  # claimed before: read on its own
        assert len(windows) == 4
        assert reader.source_stats()["requests"] == plan.planned_requests + 4


def test_a_span_announced_twice_is_served_twice_oldest_plan_first():
    """The prefetcher's plans are searched oldest first, each span of a plan served once: a
    span repeated in a plan (a padded last batch) or announced by two plans (two epochs) is
    taken as often as announced, from the older plan's request first."""
    from concurrent.futures import Future

    from recpipe.io.remote.prefetch import Prefetcher

    data = bytes(range(256)) * 4
    sent = []

    def submit(start, end):
        sent.append((start, end))
        future = Future()
        future.set_result(data[start:end])
        return future

    prefetcher = Prefetcher(submit, budget=1 << 20, max_gap=0, max_block=1 << 20,
                            plan_window=8, timeout=5)
    first = prefetcher.announce([(0, 10), (0, 10), (40, 8)])
    second = prefetcher.announce(np.array([[40, 8], [0, 10]]))
    assert sent == [(0, 10), (40, 48)] * 2  # each plan coalesced in offset order
    windows, missing = prefetcher.take_windows([(0, 10), (40, 8), (0, 10)])
    assert missing == [] and [(bytes(b), s) for b, s in windows] == [(data[0:10], 0),
                                                                      (data[40:48], 40)]
    assert all(item.done for item in first.requests)  # the older plan served all three
    windows, missing = prefetcher.take_windows([(0, 10), (0, 10), (40, 9)])
    assert [(bytes(b), s) for b, s in windows] == [(data[0:10], 0)]
    assert missing == [(0, 10), (40, 9)]  # announced twice, asked three times; another length
    second.cancel()
    assert prefetcher.take_windows([(40, 8)]) == ([], [(40, 8)])
    assert prefetcher.held_bytes == 0
