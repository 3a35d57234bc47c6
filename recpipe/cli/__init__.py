"""The ``recpipe`` command line. Each module in this package adds one or more subcommands.

A command module defines ``register(subparsers)``, which adds its parsers and sets
``func=run`` on them; ``run(args)`` returns the exit status. Only this package prints.
"""

import argparse
import importlib
import logging
import pkgutil
import sys

from ..system.env import configure_logging

__all__ = ["main", "build_parser"]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="recpipe", description="Pack, read and decode MXNet RecordIO image datasets.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log output (-v info, -vv debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)  # helper modules (progress) add nothing
        if register is not None:
            register(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    configure_logging()  # $RECPIPE_LOG_LEVEL
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, ImportError) as e:  # ImportError: names the extra to install
        print(f"recpipe {args.command}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a storage client's error (botocore's NoCredentialsError...)
        if type(e).__module__ == "builtins" or type(e).__module__.startswith("recpipe"):
            raise  # a bug: keep the traceback
        print(f"recpipe {args.command}: error: {type(e).__name__}: {e} "
              f"({' '.join(_urls(args))})", file=sys.stderr)
        logging.getLogger("recpipe.cli").debug("traceback", exc_info=True)
        return 1


def _urls(args):
    """The file or URL arguments of a command, for error messages."""
    return [str(getattr(args, name)) for name in ("file", "src", "out", "url", "prefix")
            if getattr(args, name, None)]


if __name__ == "__main__":
    sys.exit(main())
