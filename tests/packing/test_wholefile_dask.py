"""``verify``, ``index`` and ``extract`` with ``--dask``: the file's chunks as tasks on a Dask
``LocalCluster`` of 2 worker processes (shared by the module, as in ``test_dask.py``, whose
docstring says why), over local files and S3 (a moto server): the same report, sidecar, index,
files and list as the one-machine run, byte for byte; a lost worker, failed tasks and an
interrupted run end with the same output, published once."""

import json
import os
import signal
import time

import fsspec
import pytest

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed: pip install 'recpipe[dask]'")

from recpipe.cli import main  # noqa: E402
from recpipe.decode.decoders import get_decoder  # noqa: E402
from recpipe.io.sidecars.rebuild import rebuild_index  # noqa: E402
from recpipe.io.health.verify import verify  # noqa: E402
from recpipe.packing.chunks import ChunkTaskError, work_url_for  # noqa: E402
from recpipe.packing.extract import extract_records  # noqa: E402
from recpipe.packing.wholefile import (ClusterOptions, extract_on_cluster,  # noqa: E402
                                       index_on_cluster, verify_on_cluster)
from tests.packing.test_chunks import patch, write_images  # noqa: E402
from tests.packing.test_extract import write_labelled  # noqa: E402


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


@pytest.fixture(scope="module")
def s3_bucket():
    """``(bucket url, storage_options)`` on a moto S3 server (a subprocess); fsspec's I/O
    thread and its executor start here, before any test's thread snapshot (they live for the
    process), as in tests/io/conftest.py."""
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
    server = S3Server(lifetime=600)
    try:
        options = {"endpoint_url": server.endpoint, "key": "testing", "secret": "testing"}
        bucket = f"t-{uuid.uuid4().hex[:12]}"
        s3fs.S3FileSystem(**options).mkdir(bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()


def on(client, chunk_bytes=1500, **kwargs):
    return ClusterOptions(dask=client, chunk_bytes=chunk_bytes, **kwargs)


def damaged(rec, count=30):
    """A .rec/.idx/.sums of ``count`` images with a bad record, a checksum mismatch and an
    undecodable image."""
    offsets = write_images(rec, count)
    patch(rec, offsets[5], b"XXXX")
    blob = bytearray(rec.read_bytes())
    blob[offsets[11] + 8 + 24 + 3] ^= 0xFF
    blob[offsets[22] + 200] ^= 0x55
    rec.write_bytes(bytes(blob))
    return offsets


def tree(folder):
    """``{relative path: bytes}`` of every file under ``folder``."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder)] = open(path, "rb").read()
    return found


def test_verify_on_the_cluster_equals_one_machine(tmp_path, client):
    rec = tmp_path / "data.rec"
    damaged(rec)
    for decoder in (None, get_decoder("auto")):
        one = verify(str(rec), decoder=decoder).to_dict()
        report, run = verify_on_cluster(str(rec), decoder=decoder, cluster=on(client))
        assert report.to_dict() == one
        assert run.cluster["workers"] == 2 and run.chunks > 5 and run.resumed == 0
        assert {r["number"] for r in run.receipts} == set(range(run.chunks))
        assert {"bad-record", "checksum-mismatch"} <= set(one["counts"])


def test_write_sums_on_the_cluster_publishes_the_same_sidecar(tmp_path, client):
    rec = tmp_path / "data.rec"
    write_images(rec, 40)
    sidecar = tmp_path / "data.sums"
    sidecar.unlink()
    one = verify(str(rec), decoder=get_decoder("auto"), write_sums=True).to_dict()
    expected = sidecar.read_bytes()
    sidecar.unlink()
    report, run = verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                                    cluster=on(client))
    assert report.to_dict() == one and sidecar.read_bytes() == expected
    assert not os.path.exists(work_url_for(str(rec), "verify"))


def test_index_on_the_cluster_equals_rebuild_index(tmp_path, client):
    rec = tmp_path / "data.rec"
    damaged(rec)
    one = rebuild_index(str(rec), str(tmp_path / "one.idx"), skip_bad=True)
    two, run = index_on_cluster(str(rec), str(tmp_path / "two.idx"), skip_bad=True,
                                cluster=on(client))
    assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "two.idx").read_bytes()
    assert two._replace(index_url=one.index_url) == one and one.skipped == 1


@pytest.mark.parametrize("fmt", ["folder", "tar"])
def test_extract_on_the_cluster_equals_one_machine(tmp_path, client, fmt):
    rec = str(tmp_path / "data.rec")
    write_labelled(rec, count=40, multi=True)
    one = extract_records(rec, str(tmp_path / "one"), format=fmt, shard_size=3000)
    two, run = extract_on_cluster(rec, str(tmp_path / "two"), format=fmt, shard_size=3000,
                                  cluster=on(client))
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    assert {**two.to_dict(), "out": "", "seconds": 0, "list_file": "", "shards": []} == {
        **one.to_dict(), "out": "", "seconds": 0, "list_file": "", "shards": []}
    assert run.chunks == one.chunks > 3 and len(run.receipts) == run.chunks


def test_over_s3_the_outputs_equal_one_machine(tmp_path, client, s3_bucket):
    base, options = s3_bucket
    fs = fsspec.filesystem("s3", **options)
    local = tmp_path / "data.rec"
    damaged(local)
    for name in ("data.rec", "data.idx", "data.sums"):
        fs.pipe_file(f"{base}/v/{name}", (tmp_path / name).read_bytes())
    url = f"{base}/v/data.rec"
    decoder = get_decoder("auto")
    one = verify(url, decoder=decoder, storage_options=options).to_dict()
    report, run = verify_on_cluster(url, decoder=decoder, storage_options=options,
                                    cluster=on(client))
    assert report.to_dict() == one and run.chunks > 5
    assert {"bad-record", "checksum-mismatch"} <= set(one["counts"])
    one = rebuild_index(url, f"{base}/v/one.idx", skip_bad=True, storage_options=options)
    index_on_cluster(url, f"{base}/v/two.idx", skip_bad=True, storage_options=options,
                     cluster=on(client))
    assert fs.cat_file(f"{base}/v/one.idx") == fs.cat_file(f"{base}/v/two.idx")
    # a clean file: its sidecar, and an extract to S3
    write_images(local, 30)
    (tmp_path / "data.sums").unlink()
    for name in ("data.rec", "data.idx"):
        fs.pipe_file(f"{base}/c/{name}", (tmp_path / name).read_bytes())
    url = f"{base}/c/data.rec"
    verify(str(local), decoder=decoder, write_sums=True)
    verify_on_cluster(url, decoder=decoder, write_sums=True, storage_options=options,
                      cluster=on(client))
    assert fs.cat_file(f"{base}/c/data.sums") == (tmp_path / "data.sums").read_bytes()
    fs.invalidate_cache()
    assert not fs.exists(f"{base}/c/.data.rec.verify-chunks")
    extract_records(str(local), str(tmp_path / "one"), shard_size=3000)
    extract_on_cluster(url, f"{base}/out", shard_size=3000, storage_options=options,
                       cluster=on(client))
    fs.invalidate_cache()
    prefix = f"{base}/out/"[len("s3://"):]
    remote = {path[len(prefix):]: fs.cat_file(path) for path in fs.find(f"{base}/out")}
    assert remote == tree(tmp_path / "one")


def test_a_lost_worker_changes_nothing(tmp_path):
    """A worker killed (SIGKILL) while chunk tasks run: Dask runs its tasks again elsewhere
    (its nanny starts a new one), and the outputs are those of one machine. On a cluster of
    the test's own, closed with the threads the new worker brings."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0") as own:
        with distributed.Client(own) as client:
            _lose_a_worker(tmp_path, client)


def _lose_a_worker(tmp_path, client):
    rec = tmp_path / "data.rec"
    write_images(rec, 60)
    (tmp_path / "data.sums").unlink()
    one = verify(str(rec), decoder=get_decoder("auto"), write_sums=True).to_dict()
    expected = (tmp_path / "data.sums").read_bytes()
    (tmp_path / "data.sums").unlink()
    pids = client.run(os.getpid)
    killed = []

    def kill_one(nbytes):
        if not killed:
            address, pid = sorted(pids.items())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(address)

    report, run = verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                                    cluster=on(client, 1000), progress=kill_one)
    assert killed and run.chunks > 10
    assert report.to_dict() == one and (tmp_path / "data.sums").read_bytes() == expected


class Stop(Exception):
    pass


def wait_idle(client, seconds=60):
    deadline = time.monotonic() + seconds
    while any(client.processing().values()):
        assert time.monotonic() < deadline, "the cluster is still busy"
        time.sleep(0.1)


def test_failed_tasks_publish_nothing_and_the_next_run_continues(tmp_path, client):
    rec = tmp_path / "data.rec"
    write_images(rec, 30)
    (tmp_path / "data.sums").unlink()

    def stop(nbytes):
        raise Stop

    with pytest.raises(Stop):  # interrupted after the first chunk
        verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                          cluster=on(client), progress=stop)
    wait_idle(client)  # the tasks running when it stopped finish (and save their results)
    work = work_url_for(str(rec), "verify")
    done = [n for n in os.listdir(work) if n.startswith("chunk-")]
    assert done and "plan.json" in os.listdir(work)
    blocked = [f"chunk-{n:06d}.npz" for n in (3, 4)]
    for name in blocked:
        if os.path.exists(os.path.join(work, name)):
            os.remove(os.path.join(work, name))
        os.mkdir(os.path.join(work, name))  # the task cannot publish its result there
    with pytest.raises(ChunkTaskError, match="chunk 3 .*chunk 4") as failed:
        verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                          cluster=on(client))
    assert [n for n, _, _ in failed.value.failures] == [3, 4]
    assert not (tmp_path / "data.sums").exists()
    for name in blocked:
        os.rmdir(os.path.join(work, name))
    report, run = verify_on_cluster(str(rec), decoder=get_decoder("auto"), write_sums=True,
                                    cluster=on(client))
    assert run.resumed == run.chunks - 2 and report.sums_written
    expected = (tmp_path / "data.sums").read_bytes()
    (tmp_path / "data.sums").unlink()
    verify(str(rec), decoder=get_decoder("auto"), write_sums=True)
    assert (tmp_path / "data.sums").read_bytes() == expected and not os.path.exists(work)


def test_cli_dask(tmp_path, capsys, address, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths: the workers' working folder is another one
    damaged(tmp_path / "data.rec")
    assert main(["verify", "data.rec", "--decode", "--json"]) == 1
    one = capsys.readouterr().out
    assert main(["verify", "data.rec", "--decode", "--json", "--dask", address,
                 "--chunk-size", "2KB"]) == 1
    captured = capsys.readouterr()
    assert captured.out == one
    assert f"on {address} (2 workers, 2 threads)" in captured.err
    assert main(["index", "data.rec", "-o", "one.idx", "--skip-bad"]) == 0
    assert main(["index", "data.rec", "-o", "two.idx", "--skip-bad", "--dask", address,
                 "--chunk-size", "2KB"]) == 0
    out = capsys.readouterr().out
    assert "wrote two.idx: 29 entries" in out and "dask: " in out
    assert (tmp_path / "one.idx").read_bytes() == (tmp_path / "two.idx").read_bytes()
    assert main(["index", "data.rec", "--chunk-size", "2KB"]) == 1
    assert "--chunk-size go with --dask" in capsys.readouterr().err


def test_cli_extract_and_index_with_a_local_cluster(tmp_path, capsys):
    rec = str(tmp_path / "data.rec")
    write_labelled(rec, count=20)
    assert main(["extract", rec, str(tmp_path / "one"), "--shard-size", "2KB"]) == 0
    capsys.readouterr()
    assert main(["extract", rec, str(tmp_path / "two"), "--shard-size", "2KB", "--dask",
                 "local", "--workers", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["images"] == 20 and tree(tmp_path / "one") == tree(tmp_path / "two")
    os.remove(tmp_path / "data.idx")
    assert main(["extract", rec, str(tmp_path / "three"), "--dask", "local"]) == 1
    assert "needs the .idx" in capsys.readouterr().err


def test_a_local_cluster_keeps_glibc_malloc_settings_and_our_environment(monkeypatch):
    """Dask's nannies give workers MALLOC_TRIM_THRESHOLD_=65536 (every large buffer a fresh
    mmap: +35% CPU for verify's tasks, BENCHMARKS.md) and copy it into the caller's
    environment: the local cluster's workers start without it, and the caller's environment
    is as it was."""
    from recpipe.packing.cluster import dask_client

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    before = dict(os.environ)
    with dask_client("local", 1) as local:
        seen = local.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
        assert list(seen.values()) == [None]
    assert dict(os.environ) == before
