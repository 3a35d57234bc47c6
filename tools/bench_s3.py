"""``tools/bench_stores.py`` for S3 alone (SeaweedFS; ``--moto`` adds moto's server), with the
flags of the runs on record in BENCHMARKS.md (``--s3-ranges`` for ``--ranges``; default cases
``photos:block,photos:none``). Its names (``pack_photos``, ``start_weed``, ``upload``, ``RECIPES``
...) are re-exported for tools/remote_cpu.py.

    python tools/bench_s3.py --repeats 5 --epochs 5 [--moto] [--auth] [--s3-ranges auto,fsspec]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_stores import *  # noqa: E402,F401,F403  (tools/ is this script's folder)
from bench_stores import KEY, RECIPES, SECRET, main, pack_photos, start_weed, stop, upload  # noqa: E402,F401

if __name__ == "__main__":
    main()
