"""``--dask`` for the commands that walk a whole ``.rec`` (verify, index, extract): the options,
and the call that runs the command's job on a Dask cluster (``recpipe.packing.wholefile``)."""

import sys

__all__ = ["WholeFileJob", "add_dask_options"]


def add_dask_options(parser, what, *, workers=True, chunks=True):
    """``--dask``, and (``workers``) ``--workers``, (``chunks``) ``--chunk-size`` and
    ``--work-dir``; ``what``: what the tasks do, for the help."""
    parser.add_argument("--dask", metavar="ADDRESS", default=None,
                        help=f"{what} in byte-range chunks (starting at record boundaries) as "
                             "tasks on a Dask cluster (pip install 'recpipe[dask]'), with the "
                             "same output as on one machine: 'local' starts a cluster here, else "
                             "a scheduler address such as tcp://host:8786; the files must be "
                             "reachable from every worker. An interrupted run continues when "
                             "run again")
    if workers:
        parser.add_argument("--workers", type=int, default=None,
                            help="with --dask local: worker processes (default: one per core)")
    if chunks:
        parser.add_argument("--chunk-size", default=None, metavar="SIZE",
                            help="with --dask: bytes of the file per chunk task, e.g. 64MB "
                                 "(default: up to 256MB, at least 2 chunks per worker thread)")
        parser.add_argument("--work-dir", default=None, metavar="URL",
                            help="with --dask: the folder in which the chunk results wait (in "
                                 "a hidden folder of their own) until every chunk is done "
                                 "(default: beside the output)")


def _cluster_options(args):
    given = [flag for flag, name in (("--chunk-size", "chunk_size"), ("--work-dir", "work_dir"))
             if getattr(args, name, None)]
    if not args.dask:
        if given:
            raise ValueError(f"{' and '.join(given)} go with --dask")
        return None
    from ..packing.packer import parse_size
    from ..packing.wholefile import ClusterOptions

    chunk_size = getattr(args, "chunk_size", None)
    return ClusterOptions(args.dask, getattr(args, "workers", None),
                          parse_size(chunk_size) if chunk_size else None,
                          getattr(args, "work_dir", None))


class WholeFileJob:
    """Runs a command's job here, or with ``--dask`` its cluster version (made by
    ``packing.wholefile``, same arguments plus ``cluster=``), keeping the ``ClusterRun``."""

    def __init__(self, args):
        self.options = _cluster_options(args)  # a bad option raises before any I/O
        self.run = None

    def call(self, function, cluster_function_name, *args, **kwargs):
        if self.options is None:
            return function(*args, **kwargs)
        from ..packing import wholefile

        result, self.run = getattr(wholefile, cluster_function_name)(
            *args, cluster=self.options, **kwargs)
        return result

    def print_run(self, to_stderr=False):
        """One line on the cluster run (stderr with ``to_stderr``: --json owns stdout)."""
        run = self.run
        if run is None:
            return
        cluster = run.cluster or {}
        where = (f"{cluster.get('scheduler')} ({cluster.get('workers')} workers, "
                 f"{cluster.get('threads')} threads)")
        size = f" of up to {run.chunk_bytes / 1e6:.1f} MB" if run.chunk_bytes else ""
        notes = [f"{run.resumed} kept from an interrupted run" if run.resumed else "",
                 f"{run.repaired} walked again from a corrected start" if run.repaired else ""]
        notes = "; ".join(n for n in notes if n)
        print(f"  dask: {run.chunks} chunk task(s){size} on {where}"
              f"{f' ({notes})' if notes else ''}", file=sys.stderr if to_stderr else sys.stdout)
