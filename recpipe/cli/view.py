"""``recpipe view FILE [--recipe train|val|faces] [KEY=VALUE ...]``: look at a .rec in the browser.

Starts the viewer's web server (``recpipe.view``) on 127.0.0.1 and a free port (``--port``,
``--host``), prints its address and serves until Ctrl-C (or SIGTERM). The recipe and the loader
keywords are checked before the file is opened, the file before the server starts: a misspelt
keyword, a missing file or a file that is not RecordIO is an error here, not a page.
"""

import argparse
import json
import signal
import sys

from .options import add_storage_options, storage_options

__all__ = ["register", "run", "inspect_text", "loader_options"]

# the loader settings that decide which records a batch holds (given as flags)
_BATCH_FLAGS = ("batch_size", "seed", "shuffle", "part_index", "num_parts")


def register(subparsers):
    p = subparsers.add_parser(
        "view",
        help="look at a .rec in the browser: records, labels, damage, augmentations, batches",
        description="Serve a local web page over FILE (any fsspec URL): pages of thumbnails in "
                    "record order or by label (by identity for InsightFace files), jump to a key "
                    "or position, the label histogram and the `recpipe inspect` summary; the "
                    "records verify, the loaders or the viewer found bad, with their error and "
                    "offset; and what the model gets: a record beside N draws of the recipe, "
                    "and batch K of epoch E exactly as ImageLoader delivers it. Nothing is "
                    "written beside the data.",
        epilog="Loader keywords are ImageLoader's and ImageRecordIter's, as KEY=VALUE after "
               "FILE (VALUE read as JSON when it is JSON): recpipe view train.rec --recipe "
               "train --shuffle true max_rotate_angle=10 brightness=0.4")
    p.__class__ = _Intermixed  # KEY=VALUE keywords may come before or after the flags
    p.add_argument("file", help=".rec file (path or fsspec URL)")
    p.add_argument("keywords", nargs="*", metavar="KEY=VALUE",
                   help="loader keywords on top of the recipe (e.g. rand_mirror=true, "
                        "dtype=float32, mean_r=123.68)")
    p.add_argument("--recipe", default="train", metavar="NAME",
                   help="the augmentation recipe: train, val or faces, as in `recpipe bench` "
                        "(default train)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="samples per batch of the batch view (default 128)")
    p.add_argument("--seed", type=int, default=None,
                   help="the loader's seed: shuffle and augmentation (default 0)")
    p.add_argument("--shuffle", choices=("false", "true", "full", "block"), default=None,
                   help="the loader's shuffle (default false, ImageLoader's)")
    p.add_argument("--part-index", type=int, default=None,
                   help="this rank's part of the epoch (default 0)")
    p.add_argument("--num-parts", type=int, default=None,
                   help="ranks the epoch is split between (default 1)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0,
                   help="port to listen on (default 0: a free port, printed)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    add_storage_options(p)
    p.set_defaults(func=run)


class _Intermixed(argparse.ArgumentParser):
    """A parser that takes positionals between options (``FILE --recipe val KEY=VALUE``):
    ``parse_known_intermixed_args``, which calls ``parse_known_args`` itself."""

    _inside = False

    def parse_known_args(self, args=None, namespace=None):
        if self._inside:
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def _keyword(text):
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise ValueError(f"{text!r}: loader keywords are KEY=VALUE (e.g. rand_mirror=true)")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def loader_options(args):
    """The ``LoaderOptions`` of the recipe, the flags and the KEY=VALUE keywords (checked, no
    I/O)."""
    from ..decode.bench import CONFIGS
    from ..decode.options import LoaderOptions

    if args.recipe not in CONFIGS:
        raise ValueError(f"--recipe {args.recipe!r}: choose from {', '.join(CONFIGS)}")
    settings = dict(CONFIGS[args.recipe])
    given = dict(_keyword(text) for text in args.keywords)
    for name in _BATCH_FLAGS:
        flag = getattr(args, name)
        if flag is None:
            continue
        if name in given:
            raise ValueError(f"{name} given twice: as --{name.replace('_', '-')} and as "
                             f"{name}={given[name]!r}")
        given[name] = {"true": True, "false": False}.get(flag, flag)
    settings.update(given)
    batch_size = settings.pop("batch_size", 128)
    data_shape = settings.pop("data_shape", None)
    if data_shape is None:
        raise ValueError("data_shape is needed (the recipe has none)")
    return LoaderOptions.from_kwargs(batch_size, data_shape, **settings)


def inspect_text(url, storage_options, progress):
    """What ``recpipe inspect URL`` prints (the summary panel; run in the viewer's child
    process, so capturing this process's stdout disturbs nothing)."""
    import contextlib
    import io

    from .inspect import run_inspect

    args = argparse.Namespace(file=url, sample=64, seed=0, json=False, no_progress=True,
                              storage_options=json.dumps(storage_options)
                              if storage_options else None, storage_option=[])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = run_inspect(args)
    return {"text": out.getvalue(), "errors": err.getvalue(), "status": status}


class _Stop(Exception):
    """SIGTERM: stop serving as Ctrl-C does."""


def _stop(signum, frame):
    raise _Stop()


def run(args):
    from ..view import serve_file

    options = loader_options(args)  # a bad keyword: an error before any I/O
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port {args.port}: expected 0..65535")
    viewer = serve_file(args.file, options, storage_options=storage_options(args),
                        host=args.host, port=args.port, summary_target=inspect_text)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        print(f"recpipe view: {args.file} ({len(viewer.app.dataset)} records) at {viewer.url}",
              flush=True)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"recpipe view: listening on {args.host}: anyone who can reach this machine "
                  "can read the file through the page", file=sys.stderr, flush=True)
        print("recpipe view: Ctrl-C stops", flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(viewer.url)
        viewer.serve_forever()
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        viewer.close()
    print("recpipe view: stopped", flush=True)
    return 0
