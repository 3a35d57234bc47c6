"""Issue 19's experiment: how many damaged JPEG records does the loader deliver as pixels?

300 of ``../shared/data/photos`` are packed with ``recpipe pack --pass-through`` (``clean``),
the pack is copied (``damaged``) and 120 of its records are damaged in place, seeded: half with
one flipped bit, half with 16 zeroed bytes, at a uniform place inside the entropy-coded data
(after the first SOS, before EOI; lengths unchanged). Both copies are read by
``ImageLoader(..., on_error="skip", dtype="uint8")`` with the same seed, in the validation
configuration (``resize=256``, centre crop 224) and the train configuration
(``random_resized_crop``, ``rand_mirror``), once per ``integrity`` mode. A damaged record counts
as *delivered* when it comes out with pixels that differ from the clean copy's. ``detectable``
are the damaged records a strict full decode rejects (libjpeg's warnings over the whole image).

Without ``--drop-sums`` a checksum sidecar beside the pack (``PREFIX.sums``, when this recpipe
writes one) stays, and checks every read; ``--drop-sums`` deletes it to measure what the
decoder alone catches (a file made elsewhere).

    python experiments/2026-11-25-integrity-experiment/integrity_experiment.py --drop-sums [--json]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # experiments/<note>/ -> the repository
sys.path.insert(0, REPO)

PHOTOS = os.path.join(REPO, "..", "shared", "data", "photos")
CONFIGS = {
    "val": dict(resize=256),
    "train": dict(random_resized_crop=True, rand_mirror=True),
}
MODES = ("off", "auto", "strict")


def pack(photos, count, folder):
    """``folder/clean.rec``: the first ``count`` photos (sorted, classes in turn), pass-through."""
    paths = sorted(glob.glob(os.path.join(photos, "*", "*.jpg")))
    by_class = {}
    for path in paths:
        by_class.setdefault(os.path.basename(os.path.dirname(path)), []).append(path)
    chosen = [p for group in zip(*by_class.values()) for p in group][:count]
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} photos under {photos}")
    src = os.path.join(folder, "src")
    for path in chosen:
        target = os.path.join(src, os.path.basename(os.path.dirname(path)))
        os.makedirs(target, exist_ok=True)
        shutil.copyfile(path, os.path.join(target, os.path.basename(path)))
    prefix = os.path.join(folder, "clean")
    env = dict(os.environ, PYTHONPATH=REPO)
    subprocess.run([sys.executable, "-m", "recpipe", "pack", src, prefix, "--pass-through",
                    "--no-shuffle", "--no-progress"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return prefix


def copy_pack(prefix, to):
    for path in glob.glob(prefix + ".*"):
        shutil.copyfile(path, to + path[len(prefix):])
    return to


def image_span(reader, position):
    """``(offset, image bytes)``: where the record's image starts in the file, and the image."""
    from recpipe.io.format.header import unpack_header

    start, _ = reader.span(position)
    payload = reader[position]
    _, image_at = unpack_header(payload)
    return start + 8 + image_at, payload[image_at:]


def entropy_range(image):
    """``(start, end)`` of the entropy-coded data: after the first SOS segment, before EOI."""
    from recpipe.image.jpeg import SOS, segments

    start = next(end for marker, _, end in segments(image) if marker == SOS)
    return start, image.rindex(b"\xff\xd9")


def damage(prefix, count, seed):
    """Damage ``count`` records of ``prefix.rec`` in place; returns {position: kind}."""
    from recpipe.io.reader import RecordReader

    rng = np.random.default_rng(seed)
    with RecordReader(prefix + ".rec", integrity="off") as reader:
        positions = sorted(rng.choice(len(reader), size=count, replace=False).tolist())
        spans = {p: image_span(reader, p) for p in positions}
    kinds = {}
    with open(prefix + ".rec", "r+b") as f:
        for i, position in enumerate(positions):
            offset, image = spans[position]
            start, end = entropy_range(image)
            at = int(rng.integers(start, end - 16))
            if i % 2 == 0:
                f.seek(offset + at)
                byte = f.read(1)[0]
                f.seek(offset + at)
                f.write(bytes([byte ^ (1 << int(rng.integers(8)))]))
                kinds[position] = "flip"
            else:
                f.seek(offset + at)
                f.write(bytes(16))
                kinds[position] = "zero16"
    return kinds


def detectable(prefix, positions):
    """The damaged records a strict full decode rejects."""
    from recpipe.decode.decoders import get_decoder
    from recpipe.errors import DecodeError
    from recpipe.io.reader import RecordReader

    decoder = get_decoder("libjpeg" if "libjpeg" in _available() else "turbojpeg")
    found = set()
    with RecordReader(prefix + ".rec", integrity="off") as reader:
        for position in positions:
            _, image = image_span(reader, position)
            try:
                decoder.decode(image)
            except DecodeError:
                found.add(position)
    return found


def _available():
    from recpipe.decode.decoders import available_decoders

    return available_decoders()


def read_all(prefix, config, mode, seed, threads):
    """{position: uint8 image} of one epoch, damaged records skipped as the loader decides."""
    from recpipe import ImageLoader

    out = {}
    with ImageLoader(prefix + ".rec", 25, (3, 224, 224), on_error="skip", seed=seed,
                     dtype="uint8", integrity=mode, threads=threads, **CONFIGS[config]) as loader:
        for batch in loader:
            for image, position in zip(batch.images, batch.positions):
                out[int(position)] = image.copy()
    return out


def run(args):
    folder = args.dir or tempfile.mkdtemp(prefix="recpipe-integrity-")
    os.makedirs(folder, exist_ok=True)
    try:
        return _experiment(args, folder)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(folder)


def _experiment(args, folder):
    clean = pack(args.photos, args.records, folder)
    damaged = copy_pack(clean, os.path.join(folder, "damaged"))
    kinds = damage(damaged, args.damaged, args.seed)
    sums = sorted(glob.glob(os.path.join(folder, "*.sums")))
    if args.drop_sums:
        for path in sums:
            os.remove(path)
    found = detectable(damaged, kinds)
    result = {"records": args.records, "damaged": len(kinds),
              "flip": sum(k == "flip" for k in kinds.values()),
              "zero16": sum(k == "zero16" for k in kinds.values()),
              "detectable_by_full_decode": len(found),
              "sums": bool(sums) and not args.drop_sums, "runs": []}
    for config in args.configs:
        for mode in MODES:
            # each run its own quarantine: what one run found bad must not hide it from the next
            os.environ["RECPIPE_QUARANTINE_DIR"] = os.path.join(folder,
                                                                f"quarantine-{config}-{mode}")
            reference = read_all(clean, config, mode, args.seed, args.threads)
            got = read_all(damaged, config, mode, args.seed, args.threads)
            delivered = {p for p in kinds if p in got
                         and not np.array_equal(got[p], reference.get(p))}
            result["runs"].append({
                "config": config, "integrity": mode,
                "clean_delivered": len(reference),
                "damaged_delivered_changed": len(delivered),
                "damaged_delivered_same": sum(p in got for p in kinds) - len(delivered),
                "detectable_delivered": len(delivered & found),
                "clean_records_lost": len(set(reference) - set(got) - set(kinds))})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", default=PHOTOS)
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--damaged", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--drop-sums", action="store_true",
                        help="delete the checksum sidecars (*.sums): the decoder alone")
    parser.add_argument("--dir", help="work folder (kept; default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['damaged']} of {result['records']} records damaged ({result['flip']} one "
          f"flipped bit, {result['zero16']} 16 zeroed bytes); "
          f"{result['detectable_by_full_decode']} detectable by a strict full decode; "
          f"checksum sidecar: {'used' if result['sums'] else 'none'}")
    print(f"{'config':7} {'integrity':9} {'delivered changed':>17} {'of detectable':>13} "
          f"{'clean lost':>10}")
    for r in result["runs"]:
        print(f"{r['config']:7} {r['integrity']:9} {r['damaged_delivered_changed']:>17} "
              f"{r['detectable_delivered']:>13} {r['clean_records_lost']:>10}")


if __name__ == "__main__":
    main()
