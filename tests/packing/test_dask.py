"""``pack_dataset(..., dask=...)`` / ``recpipe pack --dask``: shards written by Dask tasks.

Runs on a ``LocalCluster`` of 2 worker processes shared by the module (``client`` fixture).
Why a module fixture: the first Dask client in a process starts distributed's process-wide
"Dask-Offload" thread (``distributed.utils._offload_executor``, a module-level executor that
Dask never shuts down and its own test suite starts at import). Starting the cluster before
the first test's thread snapshot (tests/conftest.py) keeps that one thread out of the check,
which still fails a test that leaves any other thread running: every cluster and client a test
or ``pack_dataset`` makes must be closed. The module fixture closes its client and cluster.
"""

import hashlib
import json
import os
import sys

import cv2
import fsspec
import numpy as np
import pytest

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed: pip install 'recpipe[dask]'")

import recpipe  # noqa: E402
from recpipe.cli import main  # noqa: E402
from recpipe.errors import DecodeError  # noqa: E402
from recpipe.packing.cluster import default_shard_count  # noqa: E402
from recpipe.packing.jobs import ShardTaskError  # noqa: E402
from recpipe.packing.manifest import iter_records, read_manifest  # noqa: E402
from recpipe.packing.packer import pack_dataset  # noqa: E402
from recpipe.packing.partition import cut_by_count  # noqa: E402

CLASSES = ("cat", "dog", "eel")
PER_CLASS = 4
BAD = "dog/zz_bad.jpg"  # sorts last in dog: index 8 of 13 in walk order


@pytest.fixture(scope="module", autouse=True)
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0") as local_cluster:
        with distributed.Client(local_cluster) as dask_client:
            assert dask_client.submit(sum, [1, 2]).result(timeout=60) == 3  # warm it up
            yield local_cluster, dask_client


@pytest.fixture
def client(cluster):
    return cluster[1]


@pytest.fixture
def address(cluster):
    return cluster[0].scheduler_address


def _jpeg(h, w, seed):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()


@pytest.fixture
def photos(tmp_path):
    src = tmp_path / "src"
    seed = 0
    for name in CLASSES:
        (src / name).mkdir(parents=True)
        for i in range(PER_CLASS):
            seed += 1
            (src / name / f"img{i:02d}.jpg").write_bytes(_jpeg(18 + 3 * seed, 24 + 2 * i, seed))
    return src


def _add_bad_image(photos):
    (photos / BAD).write_bytes(b"this is not an image at all")


def _visible(folder):
    return sorted(n for n in os.listdir(folder) if not n.startswith("."))


def _same_files(a, b, names):
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _records(rec):
    with recpipe.RecordReader(str(rec)) as reader:
        return [(key, reader[i]) for i, key in enumerate(reader.keys)]


def test_pass_through_equals_single_machine_byte_for_byte(photos, tmp_path, client):
    args = dict(pass_through=True, shards=3, seed=5)
    single = pack_dataset(photos, tmp_path / "one" / "o", **args)
    spread = pack_dataset(photos, tmp_path / "dask" / "o", dask=client, **args)
    assert spread.written == single.written == len(CLASSES) * PER_CLASS
    assert spread.cluster["workers"] == 2 and spread.workers == 2
    assert _visible(tmp_path / "dask") == sorted(_visible(tmp_path / "one") + ["o.manifest.json"])
    shard_files = [n for n in _visible(tmp_path / "one") if n.endswith((".rec", ".idx"))]
    assert len(shard_files) == 6
    _same_files(tmp_path / "one", tmp_path / "dask", shard_files + ["o.labels.json"])
    assert spread.manifest_file == str(tmp_path / "dask" / "o.manifest.json")
    moved = [{**vars(s), "rec": s.rec.replace("/one/", "/dask/"),
              "idx": s.idx.replace("/one/", "/dask/")} for s in single.splits["all"]]
    assert [vars(s) for s in spread.splits["all"]] == moved


def test_reencode_with_val_split_matches_single_machine(photos, tmp_path, address):
    args = dict(resize=12, val_ratio=0.25, shards=2, seed=1)
    single = pack_dataset(photos, tmp_path / "one" / "o", **args)
    spread = pack_dataset(photos, tmp_path / "dask" / "o", dask=address, **args)
    assert set(spread.splits) == {"train", "val"}
    for split in ("train", "val"):
        for i in range(2):
            name = f"o_{split}-{i:05d}-of-00002.rec"
            ours, theirs = _records(tmp_path / "dask" / name), _records(tmp_path / "one" / name)
            assert [k for k, _ in ours] == [k for k, _ in theirs] and ours
            for (_, a), (_, b) in zip(ours, theirs):
                header_a, img_a = recpipe.unpack_img(a)
                header_b, img_b = recpipe.unpack_img(b)
                assert header_a.label == header_b.label and header_a.id == header_b.id
                assert img_a.shape == img_b.shape and min(img_a.shape[:2]) == 12
    assert [s.records for s in spread.splits["val"]] == [s.records for s in single.splits["val"]]


def test_manifest_lists_shards_with_sizes_and_checksums(photos, tmp_path, client):
    out = tmp_path / "out" / "o"
    summary = pack_dataset(photos, out, resize=10, shards=3, dask=client)
    manifest = json.loads((tmp_path / "out" / "o.manifest.json").read_text())
    assert manifest["recpipe_version"] == recpipe.__version__
    assert manifest["classes"] == {name: i for i, name in enumerate(CLASSES)}
    assert manifest["options"]["shards"] == 3 and manifest["options"]["image"]["resize"] == 10
    shards = manifest["splits"]["all"]["shards"]
    assert [s["rec"] for s in shards] == [f"o-{i:05d}-of-00003.rec" for i in range(3)]
    assert [s["records"] for s in shards] == [b - a for a, b in cut_by_count(12, 3)]
    for entry in shards:
        for ext in ("rec", "idx"):
            data = (tmp_path / "out" / entry[ext]).read_bytes()
            assert entry[f"{ext}_sha256"] == hashlib.sha256(data).hexdigest()
            assert entry[f"{ext}_bytes"] == len(data)
        assert len(_records(tmp_path / "out" / entry["rec"])) == entry["records"]
    assert manifest["records"] == summary.written == 12
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".") or "plan" in n]
    # reading a multi-shard output back, in order
    urls = read_manifest(out).shard_urls()
    assert urls == [(str(tmp_path / "out" / s["rec"]), str(tmp_path / "out" / s["idx"]))
                    for s in shards]
    keys = [key for key, _ in iter_records(str(out) + ".manifest.json")]
    assert keys == [k for s in shards for k, _ in _records(tmp_path / "out" / s["rec"])]
    assert sorted(keys) == list(range(12))


def test_failing_item_reported_with_shard_and_path(photos, tmp_path, client):
    _add_bad_image(photos)
    single = pack_dataset(photos, tmp_path / "one" / "o", resize=10, shards=3, shuffle=False)
    spread = pack_dataset(photos, tmp_path / "dask" / "o", resize=10, shards=3, shuffle=False,
                          dask=client)
    assert not spread.ok and spread.failed == 1 and spread.written == 12
    (error,) = spread.errors
    assert error["path"] == BAD and error["shard"] == "o-00001-of-00003.rec"
    assert single.errors[0]["shard"] == "o-00001-of-00003.rec"  # the same shard, on one machine
    assert spread.errors == single.errors
    assert spread.unusual == single.unusual
    planned = [b - a for a, b in cut_by_count(13, 3)]
    assert [s.records for s in spread.splits["all"]] == [planned[0], planned[1] - 1, planned[2]]


def test_on_error_raise_publishes_no_manifest_and_resume_finishes(photos, tmp_path, client):
    _add_bad_image(photos)
    args = dict(resize=10, shards=3, shuffle=False, on_error="raise", flush_every=1)
    with pytest.raises(DecodeError, match="shard o-00001-of-00003.rec") as raised:
        pack_dataset(photos, tmp_path / "run" / "o", dask=client, **args)
    assert raised.value.path.endswith(BAD)
    # the other shards ran to completion; the failed one and the manifest are not published
    assert _visible(tmp_path / "run") == ["o-00000-of-00003.idx", "o-00000-of-00003.rec",
                                          "o-00000-of-00003.sources.jsonl",
                                          "o-00000-of-00003.sums",
                                          "o-00002-of-00003.idx", "o-00002-of-00003.rec",
                                          "o-00002-of-00003.sources.jsonl",
                                          "o-00002-of-00003.sums", "o.pack-plan.json"]
    (photos / BAD).write_bytes(_jpeg(30, 20, 99))  # fix the input, then resume
    resumed = pack_dataset(photos, tmp_path / "run" / "o", dask=client, resume=True, **args)
    assert resumed.ok and resumed.written == 1
    assert resumed.resumed_records == 12  # 2 shards kept whole, 3 records of the stopped one
    assert [s.kept for s in resumed.splits["all"]] == [True, False, True]
    clean = pack_dataset(photos, tmp_path / "clean" / "o", **args)
    assert clean.written == 13
    assert _visible(tmp_path / "run") == sorted(_visible(tmp_path / "clean") + ["o.manifest.json"])
    _same_files(tmp_path / "clean", tmp_path / "run", _visible(tmp_path / "clean"))
    manifest = read_manifest(tmp_path / "run" / "o")
    assert sum(s.records for s in manifest.shards()) == 13
    for shard in manifest.shards():  # kept, continued and new shards all hashed whole
        for url, digest in ((shard.rec, shard.rec_sha256), (shard.idx, shard.idx_sha256)):
            with open(url, "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == digest


def test_task_failure_names_the_shard_and_publishes_nothing(photos, tmp_path, client):
    (tmp_path / "out" / "o-00001-of-00003.rec").mkdir(parents=True)  # cannot be replaced
    with pytest.raises(ShardTaskError, match="o-00001-of-00003.rec") as raised:
        pack_dataset(photos, tmp_path / "out" / "o", pass_through=True, shards=3, dask=client)
    assert [f["shard"] for f in raised.value.failures] == ["o-00001-of-00003.rec"]
    assert "o.manifest.json" not in _visible(tmp_path / "out")
    assert "o.labels.json" not in _visible(tmp_path / "out")
    assert "o.pack-plan.json" in _visible(tmp_path / "out")


def test_default_shard_count():
    assert default_shard_count(2, 12) == 4
    assert default_shard_count(8, 3) == 3
    assert default_shard_count(4, 10, val_ratio=0.2) == 2  # no empty validation shard
    assert default_shard_count(1, 0) == 1


@pytest.mark.parametrize("runner", ["local", "dask"])
def test_resume_keeps_the_interrupted_runs_shard_count(photos, tmp_path, runner, client):
    """Resuming without --shards continues the interrupted run's shards, whatever the runner
    (the Dask runner would otherwise choose its own count, the local one a single file)."""
    out = tmp_path / "o"
    with pytest.raises(ZeroDivisionError):
        pack_dataset(photos, out, pass_through=True, shards=5,
                     progress=lambda *a: 1 / 0)  # stopped after the plan was saved
    resumed = pack_dataset(photos, out, pass_through=True, resume=True,
                           dask=client if runner == "dask" else None)
    assert resumed.ok and len(resumed.splits["all"]) == 5
    assert resumed.written + resumed.resumed_records == 12


def test_missing_dask_says_what_to_install(photos, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"recpipe\[dask\]"):
        pack_dataset(photos, tmp_path / "o", pass_through=True, dask="local")
    assert not (tmp_path / "o.pack-plan.json").exists()


def test_cli_dask_local_json(photos, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["pack", str(photos), str(out), "--pass-through", "--dask", "local",
                 "--workers", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["manifest_file"] == str(out) + ".manifest.json"
    assert report["cluster"]["workers"] == 2 and report["cluster"]["default_shards"]
    shards = default_shard_count(2, 12)
    assert report["cluster"]["shards"] == len(report["splits"]["all"]) == shards
    assert len(read_manifest(report["manifest_file"]).shards()) == shards
    assert report["written"] == 12


def test_cli_dask_address_failing_item_exit_status(photos, tmp_path, capsys, address,
                                                   monkeypatch):
    _add_bad_image(photos)
    monkeypatch.chdir(tmp_path)  # relative paths: the workers' working folder is another one
    args = ["pack", "src", "out/o", "--resize", "10", "--shards", "3", "--no-shuffle",
            "--dask", address]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert f"{BAD} (shard o-00001-of-00003.rec)" in out
    assert "manifest: out/o.manifest.json" in out
    assert f"dask: 3 shard task(s) on {address} (2 workers, 2 threads)" in out
    assert "o-00001-of-00003.rec: 3 records" in out
    assert len(_records(tmp_path / "out" / "o-00001-of-00003.rec")) == 3
    assert main(args + ["--tolerate-errors"]) == 0
    capsys.readouterr()
    assert main(args + ["--on-error", "raise"]) == 1
    err = capsys.readouterr().err
    assert BAD in err and "o-00001-of-00003.rec" in err


@pytest.fixture(scope="module")
def s3_bucket():
    """``(bucket url, storage_options)`` on a moto S3 server (a subprocess); fsspec's I/O
    thread and its executor are started here, before the test's thread snapshot, as in
    tests/io/conftest.py: they live for the process."""
    pytest.importorskip("s3fs", reason="s3fs not installed: pip install -e '.[test,s3]'")
    pytest.importorskip("moto.moto_server.werkzeug_app", reason="moto[server] not installed")
    import concurrent.futures
    import uuid

    import fsspec.asyn
    import s3fs

    from tests.io.s3server import S3Server

    loop = fsspec.asyn.get_loop()
    executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fsspec-executor")
    executor.submit(lambda: None).result()
    loop.call_soon_threadsafe(loop.set_default_executor, executor)
    server = S3Server(lifetime=300)
    try:
        options = {"endpoint_url": server.endpoint, "key": "testing", "secret": "testing"}
        bucket = f"t-{uuid.uuid4().hex[:12]}"
        s3fs.S3FileSystem(**options).mkdir(bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()


def test_s3_output_equals_local(photos, tmp_path, client, s3_bucket):
    base, options = s3_bucket
    single = pack_dataset(photos, tmp_path / "o", pass_through=True, shards=2)
    spread = pack_dataset(photos, f"{base}/o", pass_through=True, shards=2, dask=client,
                          storage_options=options)
    assert spread.written == single.written == 12
    assert spread.manifest_file == f"{base}/o.manifest.json"
    manifest = read_manifest(f"{base}/o", storage_options=options)
    fs = fsspec.filesystem("s3", **options)
    for shard in manifest.shards():
        for url in (shard.rec, shard.idx):
            assert fs.cat_file(url) == (tmp_path / url.rsplit("/", 1)[1]).read_bytes()
    assert [k for k, _ in iter_records(spread.manifest_file, storage_options=options)] == [
        k for s in ("o-00000-of-00002.rec", "o-00001-of-00002.rec")
        for k, _ in _records(tmp_path / s)]
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(base, detail=False)) == sorted(
        [n for n in _visible(tmp_path) if n.startswith("o")] + ["o.manifest.json"])


@pytest.mark.parametrize("runner", ["local", "dask"])
def test_a_pack_where_everything_fails_publishes_nothing_on_any_runner(photos, tmp_path, runner,
                                                                        client):
    for path in photos.rglob("*.jpg"):
        path.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="nothing packed"):
        pack_dataset(photos, tmp_path / "out" / "o", resize=10, shards=3,
                     dask=client if runner == "dask" else None)
    assert _visible(tmp_path / "out") == []  # no empty shard, label map, manifest or plan
