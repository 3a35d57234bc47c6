"""``recpipe view``'s server, driven over HTTP in this process: pages, thumbnails, health, labels,
draws and batches against the loader's own arrays, and requests a local page never sends."""

import os
import socket
import threading
import time

import numpy as np
import pytest

import recpipe
from recpipe.decode.loader import ImageLoader
from recpipe.decode.decoders import get_decoder
from recpipe.view import serve_file
from recpipe.view.model import plan_json
from recpipe.view.pictures import dct_scale_for, thumbnail, viewable
from tests.view._client import options, viewer
from tests.view._files import (DAMAGED, FRAMING, KEY_BASE, NOT_IMAGE, SHAPE, SUM_DAMAGED,
                               TRUNCATED, label_of, write_damaged, write_faces)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return write_damaged(tmp_path_factory.mktemp("pack"))


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    return write_faces(tmp_path_factory.mktemp("faces"))


def clean_batches(rec, epoch, batch_size=8, **changes):
    """``{batch index: (images, labels, positions)}`` of the full batches of ``epoch`` that
    hold no damaged record, from a loader of its own (on_error='skip' only lets it go on past
    the damaged ones; the clean batches are the same under 'raise')."""
    found = {}
    with ImageLoader(rec, options=options(batch_size, on_error="skip", **changes)) as loader:
        loader.set_epoch(epoch)
        for index, batch in enumerate(loader):
            if len(batch.images) == batch_size and not set(batch.positions) & {*DAMAGED,
                                                                                NOT_IMAGE}:
                found[index] = (batch.images.copy(), batch.labels.copy(),
                                batch.positions.copy())
    return found


# -- browsing ----------------------------------------------------------------------------------


def test_a_page_lists_key_label_size_and_format_and_marks_the_damaged(pack):
    with viewer(pack) as client:
        info = client.get("/api/info").json()
        assert info["records"] == 60 and info["sums"] and info["layout"] is None
        page = client.get("/api/page?start=0&count=48").json()
        assert page["total"] == 60 and [r["position"] for r in page["records"]] == list(range(48))
        first = page["records"][0]
        assert first["key"] == KEY_BASE and first["label"] == [label_of(0)]
        assert first["image"]["format"] == "jpeg"
        assert (first["image"]["height"], first["image"]["width"]) == SHAPE
        assert first["bytes"] > first["image"]["bytes"] > 0 and "error" not in first
        by_position = {r["position"]: r for r in page["records"]}
        assert by_position[SUM_DAMAGED]["error"]["kind"] == "sum"
        assert "checksum mismatch" in by_position[SUM_DAMAGED]["error"]["error"]
        assert by_position[FRAMING]["error"]["kind"] == "format"
        assert by_position[FRAMING]["error"]["offset"] == by_position[FRAMING]["offset"]
        assert by_position[NOT_IMAGE]["error"]["kind"] == "not-image"
        second = client.get("/api/page?start=48&count=48").json()
        assert [r["position"] for r in second["records"]] == list(range(48, 60))


def test_thumbnails_come_from_a_dct_scaled_decode_and_damage_is_an_error_never_pixels(pack):
    decoder = get_decoder("auto", integrity="strict")
    with recpipe.RecordReader(pack, integrity="off") as reader:
        _, jpeg = recpipe.unpack(reader[3])
    scale = dct_scale_for(decoder, *SHAPE, 40)
    assert scale != (1, 1) and -(-SHAPE[1] * scale[0] // scale[1]) >= 40
    expected = thumbnail(decoder, jpeg, 40)
    assert max(expected.shape[:2]) == 40
    with viewer(pack) as client:
        scales = []
        decode = client.app.decoder.decode

        def recording(data, *, scale=(1, 1), channels=3):
            scales.append(scale)
            return decode(data, scale=scale, channels=channels)

        client.app.decoder.decode = recording
        reply = client.get("/thumb/3.jpg?size=40")
        assert reply.status == 200 and reply.headers["Content-Type"] == "image/jpeg"
        assert scales == [scale]
        shown = reply.image()
        assert shown.shape == expected.shape
        assert np.abs(shown.astype(int) - expected).mean() < 16  # a JPEG of those pixels
        for position, kind in ((TRUNCATED, "decode"), (SUM_DAMAGED, "sum"),
                               (FRAMING, "format"), (NOT_IMAGE, "not-image")):
            reply = client.get(f"/thumb/{position}.jpg?size=64")
            assert reply.status == 422, position
            assert reply.headers["Content-Type"] == "application/json"
            error = reply.json()
            assert error["kind"] == kind and error["record"] == position
            assert error["error"]
        # the strict decoder is what makes the difference: a lenient one gives pixels
        with recpipe.RecordReader(pack, integrity="off") as reader:
            _, cut = recpipe.unpack(reader[TRUNCATED])
        assert get_decoder("auto", strict=False).decode(cut).size > 0
        health = client.get("/api/health").json()
        seen = {e["position"]: e for e in health["viewer"]}
        assert set(seen) == {TRUNCATED, SUM_DAMAGED, FRAMING}
        assert seen[TRUNCATED]["path"] == pack and seen[FRAMING]["offset"] > 0


def test_a_record_picture_and_its_facts(pack):
    with viewer(pack) as client:
        record = client.get("/api/record/42").json()
        assert record["key"] == KEY_BASE + 42 and record["header"]["id"] == 42
        assert record["sample"] == 42
        picture = client.get("/picture/42.png?max=2048")
        assert picture.headers["Content-Type"] == "image/png"
        with recpipe.RecordReader(pack) as reader:
            _, jpeg = recpipe.unpack(reader[42])
        assert np.array_equal(picture.image(), get_decoder("auto").decode(jpeg))
        assert client.get("/api/record/60").status == 404
        assert "60 records" in client.get("/api/record/60").json()["error"]


def test_jump_to_a_key_or_a_position(pack):
    with viewer(pack) as client:
        assert client.get(f"/api/find?q={KEY_BASE + 42}").json()["position"] == 42
        assert client.get("/api/find?q=%2342").json()["position"] == 42
        missing = client.get("/api/find?q=42")  # a position is not a key here
        assert missing.status == 404 and "no record with key 42" in missing.json()["error"]
        assert client.get("/api/find?q=abc").status == 404
        assert client.get("/api/find?q=%23999").status == 404
        assert client.get("/api/find?q=").status == 400


def test_by_label_order_and_histogram(pack):
    with viewer(pack) as client:
        first = client.get("/api/page?order=label&count=200")
        assert first.status in (200, 202)
        page = client.poll("/api/page?order=label&count=200", lambda r: r.status == 200).json()
        records = page["records"]
        groups = [r["group"] for r in records]
        readable = [g for g in groups if g is not None]
        assert readable == sorted(readable) and groups[-1] is None  # the unreadable one last
        assert [r["position"] for r in records if r["group"] is None] == [FRAMING]
        for record in records:
            if record["group"] is not None:
                assert record["group"] == label_of(record["position"])
        histogram = client.poll("/api/labels", lambda r: r.json()["state"] == "ready").json()
        counts = {label: sum(1 for p in range(60) if p != FRAMING and label_of(p) == label)
                  for label in {label_of(p) for p in range(60)}}
        assert dict((k, n) for k, n in histogram["histogram"]) == counts
        assert histogram["unreadable"] == 1 and histogram["distinct"] == 5
        found = client.get("/api/find?q=label:3").json()
        assert found["order"] == "label" and label_of(found["position"]) == 3.0
        assert client.get("/api/find?q=label:9").status == 404


def test_insightface_files_are_browsed_by_identity(faces):
    rec, labels = faces
    with viewer(rec, data_shape=(3, 32, 32)) as client:
        info = client.get("/api/info").json()
        assert info["layout"]["images"] == len(labels) and info["layout"]["identities"] == 4
        state = client.poll("/api/labels?start=1", lambda r: r.json()["state"] == "ready").json()
        assert state["of"] == "identity" and state["histogram"] == [[0, 3], [1, 1], [2, 4],
                                                                     [3, 2]]
        page = client.get("/api/page?order=label&count=200").json()
        assert [r["group"] for r in page["records"]] == labels
        assert [r["key"] for r in page["records"]] == list(range(1, len(labels) + 1))
        found = client.get("/api/find?q=label:2").json()
        assert found["position"] == 5 and found["index"] == 4
        header = client.get("/api/record/0").json()
        assert header["role"] == "header" and header["sample"] is None
        for path in ("/thumb/0.jpg", "/api/draws/0", f"/thumb/{len(labels) + 1}.jpg"):
            reply = client.get(path)
            assert reply.status == 422 and reply.json()["kind"] == "not-image", path
        # sample numbers of the loader: images are keys 1..N, samples 0..N-1
        assert client.get("/api/draws/3").json()["sample"] == 2


# -- what the model gets -----------------------------------------------------------------------


def test_draws_are_the_loaders_pixels_with_the_plans_that_made_them(pack):
    with viewer(pack) as client:
        answer = client.get("/api/draws/42?n=4&epoch=2").json()
        assert [d["epoch"] for d in answer["draws"]] == [2, 3, 4, 5]
        with ImageLoader(pack, options=options()) as loader:
            for draw in answer["draws"]:
                image, _ = loader.records.decode(42, 42, draw["epoch"])
                shown = client.get(draw["url"]).image()
                assert np.array_equal(shown, image.transpose(1, 2, 0))
                _, jpeg = recpipe.unpack(loader.reader[42])
                plan = loader.augmenter.plan(*loader.decoder.size(jpeg),
                                             loader.augmenter.sample_rng(3, draw["epoch"], 42))
                assert draw["plan"] == plan_json(plan)
        plans = [d["plan"] for d in answer["draws"]]
        assert len({tuple(p["crop_box"]) for p in plans}) == 4  # random-resized crops differ
        x0, y0, x1, y1 = plans[0]["crop_box"]
        assert 0 <= x0 < x1 <= SHAPE[1] and 0 <= y0 < y1 <= SHAPE[0]
        assert client.get("/api/draws/42?n=1000").status == 400
        assert client.get(f"/api/draws/{TRUNCATED}").status in (200, 422)
        assert client.get(f"/draw/{TRUNCATED}/0.png").status == 422


def test_a_batch_is_what_the_loader_delivers_pixel_for_pixel(pack):
    epoch = 1
    expected = clean_batches(pack, epoch)
    index = sorted(expected)[-1]
    images, labels, positions = expected[index]
    with viewer(pack) as client:
        batch = client.get(f"/api/batch/{epoch}/{index}").json()
        assert batch["positions"] == positions.tolist()
        assert batch["keys"] == [KEY_BASE + p for p in positions.tolist()]
        assert batch["labels"] == labels.tolist() and batch["pad"] == 0
        assert batch["dtype"] == "uint8" and batch["shape"] == list(images.shape)
        for slot, url in enumerate(batch["images"]):
            shown = client.get(url)
            assert shown.headers["Content-Type"] == "image/png"
            assert np.array_equal(shown.image(), images[slot].transpose(1, 2, 0)), slot
        raw = client.get(batch["npy"]).body
        import io

        assert np.array_equal(np.load(io.BytesIO(raw)), images)
        assert client.get(f"/batch/{epoch}/{index}/8.png").status == 404
        assert client.get(f"/api/batch/{epoch}/{batch['batches']}").status == 404


def test_the_batch_is_the_one_recpipe_replay_rebuilds(pack, tmp_path):
    from recpipe.decode.replay import replay

    log = tmp_path / "provenance.jsonl"
    with ImageLoader(pack, options=options(on_error="skip", provenance=str(log))) as loader:
        loader.set_epoch(2)
        delivered = {i: b.positions.copy() for i, b in enumerate(loader)}
    index = next(i for i, p in delivered.items()
                 if len(p) == 8 and not set(p) & {*DAMAGED, NOT_IMAGE})
    again = replay(str(log), index, 2)
    with viewer(pack) as client:
        batch = client.get(f"/api/batch/2/{index}").json()
        assert batch["positions"] == again.positions.tolist()
        for slot, url in enumerate(batch["images"]):
            assert np.array_equal(client.get(url).image(), again.images[slot].transpose(1, 2, 0))


def test_float_batches_are_shown_with_the_normalisation_undone(pack):
    normalise = dict(mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4, std_g=57.1,
                     std_b=57.4)
    epoch = 0
    expected = clean_batches(pack, epoch)  # uint8: the raw pixels
    index = sorted(expected)[0]
    with viewer(pack, dtype="float32", **normalise) as client:
        batch = client.get(f"/api/batch/{epoch}/{index}").json()
        assert batch["dtype"] == "float32"
        for slot, url in enumerate(batch["images"]):
            shown = client.get(url).image().astype(int)
            raw = expected[index][0][slot].transpose(1, 2, 0).astype(int)
            assert np.abs(shown - raw).max() <= 1


def test_a_batch_holding_a_damaged_record_is_an_error_naming_it(pack):
    with ImageLoader(pack, options=options(on_error="skip")) as loader:
        loader.set_epoch(0)
        sizes = {i: len(b.images) for i, b in enumerate(loader)}
    short = [i for i, n in sizes.items() if n < 8 and i != len(sizes) - 1]
    assert short
    with viewer(pack) as client:
        reply = client.get(f"/api/batch/0/{short[0]}")
        assert reply.status == 422
        error = reply.json()
        assert error["record"] in (*DAMAGED, NOT_IMAGE) and error["path"] == pack
        seen = {e["position"] for e in client.get("/api/health").json()["viewer"]}
        assert error["record"] in seen or error["record"] == NOT_IMAGE


def test_viewable_undoes_mean_std_and_scale():
    from recpipe.decode.augment import AugmentConfig

    config = AugmentConfig(data_shape=(3, 2, 2), mean_r=10, mean_g=20, mean_b=30, std_r=2,
                           std_g=4, std_b=5, scale=0.5)
    raw = np.arange(12, dtype=np.float64).reshape(2, 2, 3) * 20
    means, stds = np.array([10, 20, 30.0]), np.array([2, 4, 5.0])
    normalised = ((raw - means) * 0.5 / stds).transpose(2, 0, 1).astype(np.float32)
    assert np.array_equal(viewable(normalised, config), np.clip(raw, 0, 255).astype(np.uint8))


# -- health and the whole-file jobs ------------------------------------------------------------


def test_health_lists_the_quarantine_and_verify_with_offsets(pack):
    with ImageLoader(pack, options=options(on_error="skip")) as loader:
        for _ in loader:  # the loader meets every bad record and quarantines it
            pass
    with viewer(pack) as client:
        health = client.get("/api/health").json()
        quarantined = {e["position"]: e for e in health["quarantine"]}
        assert set(quarantined) == {TRUNCATED, SUM_DAMAGED, NOT_IMAGE, FRAMING}
        assert quarantined[SUM_DAMAGED]["kind"] == "sum"
        assert quarantined[TRUNCATED]["kind"] == "decode"
        assert quarantined[FRAMING]["kind"] == "format"
        page = client.get("/api/page?start=0&count=48").json()
        marked = {r["position"] for r in page["records"] if r["marks"]}
        assert marked == {TRUNCATED, SUM_DAMAGED, NOT_IMAGE, FRAMING}
        assert client.post("/api/jobs/verify?decode=1").status in (200, 202)
        done = client.poll("/api/jobs/verify", lambda r: r.json()["state"] != "running",
                           seconds=120).json()
        assert done["state"] == "done", done
        health = client.get("/api/health").json()
        kinds = {(p["kind"], p["position"]) for p in health["verify"]["problems"]}
        assert ("checksum-mismatch", SUM_DAMAGED) in kinds
        assert ("decode-failed", TRUNCATED) in kinds
        bad = [p for p in health["verify"]["problems"] if p["kind"] == "bad-record"]
        offset = page["records"][FRAMING]["offset"]
        assert any(p["offset"] <= offset < p["end"] for p in bad)
        page = client.get("/api/page?start=0&count=48").json()
        sources = {m["source"] for m in page["records"][SUM_DAMAGED]["marks"]}
        assert {"quarantine", "verify"} <= sources


def test_the_summary_is_what_recpipe_inspect_prints(pack):
    import subprocess
    import sys

    printed = subprocess.run([sys.executable, "-m", "recpipe", "inspect", pack, "--no-progress"],
                             capture_output=True, text=True, timeout=120)
    with viewer(pack) as client:
        assert client.get("/api/jobs/summary").json()["state"] == "idle"
        client.post("/api/jobs/summary")
        job = client.poll("/api/jobs/summary", lambda r: r.json()["state"] != "running",
                          seconds=120).json()
        assert job["state"] == "done", job
        assert job["result"]["text"] == printed.stdout and "UNREADABLE" in printed.stdout


def test_nothing_is_written_beside_the_data(pack):
    folder = os.path.dirname(pack)
    before = {name: os.stat(os.path.join(folder, name)).st_mtime_ns
              for name in os.listdir(folder)}
    with viewer(pack) as client:
        client.get("/api/page?count=48")
        client.get("/thumb/1.jpg")
        client.get("/api/draws/1")
        client.poll("/api/labels?start=1", lambda r: r.json()["state"] == "ready")
    after = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in os.listdir(folder)}
    assert after == before


# -- requests a local page never sends ---------------------------------------------------------


def _raw(client, text, timeout=10):
    with socket.create_connection((client.host, client.port), timeout=timeout) as s:
        s.sendall(text.encode("latin-1"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("path", [
    "/static/../app.py", "/static/%2e%2e/%2e%2e/etc/passwd", "/../../etc/passwd",
    "/thumb/..%2f..%2fetc%2fpasswd.jpg", "/static/index.html/..", "//etc/passwd",
    "/static/app.js%00.png", "/api/record/-1", "/static/dataset.py"])
def test_paths_outside_the_routes_are_404(pack, path):
    with viewer(pack) as client:
        answer = _raw(client, f"GET {path} HTTP/1.0\r\nHost: {client.host}:{client.port}\r\n\r\n")
        assert answer.startswith(b"HTTP/1.0 404"), answer[:200]
        assert b"root:" not in answer and b"import" not in answer


def test_sizes_and_lengths_over_the_limits_are_refused(pack):
    with viewer(pack) as client:
        for path in ("/api/page?count=100000", "/thumb/1.jpg?size=100000",
                     "/picture/1.png?max=99999", "/api/draws/1?n=10000",
                     "/draw/1/99999999999.png", "/api/batch/99999999999/0", "/api/page?start=x",
                     "/api/page?order=../../etc"):
            reply = client.get(path)
            assert reply.status == 400, (path, reply.body)
            assert "error" in reply.json()
        assert client.get("/api/page?" + "&".join(f"f{i}=1" for i in range(50))).status == 400
        assert client.get("/api/find?q=" + "1" * 5000).status == 414
        assert client.get("/api/record/1", headers={"Host": "evil.example:80"}).status == 421
        assert client.request("/api/jobs/verify", "POST").status == 403  # no header: refused
        assert client.request("/api/jobs/verify", "POST", headers={
            "X-Recpipe-View": "1", "Origin": "http://evil.example"}).status == 403
        assert client.request("/api/info", "PUT").status == 405
        assert client.request("/api/info", "POST", headers={"X-Recpipe-View": "1"}).status == 405
        page = client.get("/nowhere", headers={"Accept": "text/html"})
        assert page.status == 404 and page.headers["Content-Type"].startswith("text/html")
        assert b"Traceback" not in page.body and b"no page at /nowhere" in page.body


def test_many_requests_at_once_get_answers_or_503_and_bounded_threads(pack):
    with viewer(pack) as client:
        baseline = threading.active_count()
        statuses, errors, peak = [], [], [0]

        def hammer(worker):
            for i in range(6):
                try:
                    reply = client.get(f"/thumb/{(worker * 6 + i) % 60}.jpg?size={64 + worker}",
                                       timeout=60)
                    statuses.append(reply.status)
                except OSError as exc:  # refused while the backlog is full
                    errors.append(exc)
                peak[0] = max(peak[0], threading.active_count())

        threads = [threading.Thread(target=hammer, args=(w,)) for w in range(48)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert set(statuses) <= {200, 422, 503} and statuses.count(200) > 0
        # the server's threads did not grow with the clients (48 client threads are ours)
        assert peak[0] <= baseline + 48 + 4
        assert client.get("/api/info").status == 200  # and it still answers


def test_a_silent_client_holds_a_worker_for_the_timeout_only(pack):
    with serve_file(pack, options(), workers=2).start() as running:
        running.server.timeout_seconds = 1.0
        from tests.view._client import Client

        client = Client(running.url)
        idle = [socket.create_connection((client.host, client.port)) for _ in range(2)]
        try:
            start = time.monotonic()
            assert client.get("/api/info", timeout=30).status == 200
            assert time.monotonic() - start < 20
        finally:
            for s in idle:
                s.close()


def test_any_fsspec_url_is_served_through_range_reads(pack):
    """A ``memory://`` copy of the pack: pages, thumbnails, the label scan (range reads, not a
    memory map) and a batch, as for a local file."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for suffix in (".rec", ".idx", ".sums"):
        with open(pack[:-4] + suffix, "rb") as f:
            fs.pipe(f"/view-test/pack{suffix}", f.read())
    url = "memory://view-test/pack.rec"
    try:
        with viewer(url) as client:
            page = client.get("/api/page?count=48").json()
            kinds = {r["position"]: r.get("error", {}).get("kind") for r in page["records"]}
            assert kinds[SUM_DAMAGED] == "sum" and kinds[FRAMING] == "format"
            assert kinds[0] is None
            assert client.get("/thumb/0.jpg").status == 200
            labels = client.poll("/api/labels?start=1", lambda r: r.json()["state"] != "running")
            assert labels.json()["state"] == "ready" and labels.json()["unreadable"] == 1
            local = clean_batches(pack, 0)
            index = sorted(local)[0]
            batch = client.get(f"/api/batch/0/{index}").json()
            assert batch["positions"] == local[index][2].tolist()
            assert np.array_equal(client.get(batch["images"][0]).image(),
                                  local[index][0][0].transpose(1, 2, 0))
    finally:
        fs.rm("/view-test", recursive=True)


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_batches_with_damaged_records_follow_the_loaders_error_policy(pack, on_error):
    with ImageLoader(pack, options=options(on_error=on_error)) as loader:
        loader.set_epoch(1)
        delivered = [(b.images.copy(), b.labels.copy(), b.pad, b.positions.copy())
                     for b in loader]
    with viewer(pack, on_error=on_error) as client:
        for index, (images, labels, pad, positions) in enumerate(delivered):
            batch = client.get(f"/api/batch/1/{index}").json()
            assert batch["positions"] == positions.tolist(), index
            assert batch["labels"] == labels.tolist() and batch["pad"] == pad
            raw = client.get(batch["npy"]).body
            import io

            assert np.array_equal(np.load(io.BytesIO(raw)), images), index


def test_a_block_shuffle_of_a_remote_file_is_the_loaders(pack):
    import fsspec

    fs = fsspec.filesystem("memory")
    for suffix in (".rec", ".idx", ".sums"):
        with open(pack[:-4] + suffix, "rb") as f:
            fs.pipe(f"/view-block/pack{suffix}", f.read())
    url = "memory://view-block/pack.rec"
    settings = dict(shuffle="block", run_bytes=30000, on_error="skip")
    try:
        with ImageLoader(url, options=options(**settings)) as loader:
            assert loader.shuffle == "block"
            loader.set_epoch(2)
            delivered = [b.positions.copy() for b in loader]
        with viewer(url, **settings) as client:
            for index, positions in enumerate(delivered):
                assert client.get(f"/api/batch/2/{index}").json()["positions"] == \
                    positions.tolist()
    finally:
        fs.rm("/view-block", recursive=True)


def test_record_heads_gathered_from_windows_of_the_file_or_range_reads(pack, monkeypatch):
    import fsspec

    from recpipe.view import labels

    with recpipe.RecordReader(pack, integrity="off") as reader:
        offsets = reader.offsets.array
    shuffled = np.random.default_rng(0).permutation(offsets)
    whole = labels.read_heads(pack, None, shuffled)
    monkeypatch.setattr(labels, "_WINDOW_BYTES", 16384)  # many windows, each mapped in turn
    monkeypatch.setattr(labels, "_RANGE_BYTES", 16384)
    done = []
    assert np.array_equal(labels.read_heads(pack, None, shuffled, step=done.append), whole)
    assert len(done) > 10 and done[-1] == len(offsets)
    fs = fsspec.filesystem("memory")
    with open(pack, "rb") as f:
        fs.pipe("/heads/pack.rec", f.read())
    try:
        assert np.array_equal(labels.read_heads("memory://heads/pack.rec", None, shuffled), whole)
    finally:
        fs.rm("/heads", recursive=True)
    _, label0, _ = labels.head_labels(whole)
    expected = [np.nan if o == offsets[FRAMING] else label_of(int(np.flatnonzero(offsets == o)[0]))
                for o in shuffled]
    assert np.array_equal(label0, np.array(expected, np.float32), equal_nan=True)


def test_a_label_scan_that_cannot_be_made_says_why(pack, monkeypatch):
    from recpipe.view import labels

    monkeypatch.setattr(labels, "MAX_SCANNED_RECORDS", 10)
    with viewer(pack) as client:
        client.get("/api/labels?start=1")
        state = client.poll("/api/labels", lambda r: r.json()["state"] != "running").json()
        assert state["state"] == "failed" and "60 records" in state["error"]
        for path in ("/api/page?order=label", "/api/find?q=label:1"):
            reply = client.get(path)
            assert reply.status == 503 and "not available" in reply.json()["error"], path
        assert client.get("/api/page?order=record").status == 200
