"""Runner: recpipe's faces recipe (``ImageLoader``: 112x112 float32 NCHW, random mirror,
``(x - 127.5) / 127.5``, shuffled) on a .rec, timed like every runner (``_common.measure``:
untimed batches until a fetch waits, then ``--batches`` batches); one JSON line on stdout."""

from _common import measure, parse_args, touch

FACE_NORM = dict(mean_r=127.5, mean_g=127.5, mean_b=127.5, std_r=127.5, std_g=127.5,
                 std_b=127.5)


def main():
    args = parse_args("recpipe's faces recipe")
    from recpipe.decode.loader import ImageLoader

    loader = ImageLoader(args.rec, args.batch, (3, 112, 112), threads=int(args.threads),
                         shuffle=True, rand_mirror=True, dtype="float32", **FACE_NORM)
    state = {"it": iter(loader)}

    def fetch():
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    with loader:
        measure(args, fetch, lambda batch: (batch[0].shape[0], touch(batch[0])),
                contender="recpipe-faces", used={"threads": loader.threads},
                threads_used=loader.threads)


if __name__ == "__main__":
    main()
