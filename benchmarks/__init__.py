"""recpipe's benchmarks as code.

- ``harness.py``: the one harness (parameter grid, untimed preparation, warm-up, contenders
  alternated in one run, median of N with spread, the machine, data, options, commit and date
  recorded, results written as JSON), on ``recpipe.decode.timing`` and ``cpu_meter``: the
  timing core of ``recpipe bench``, so that both agree;
- ``suites/<topic>.py``: one suite per topic, ``peers/``: the runners of other loaders (each
  under its own interpreter), ``data.py``: the data sets the suites share;
- ``results/<suite>/<date>-<commit>.json``: every full run;
- ``render.py``: BENCHMARKS.md and the docs' benchmark page from the newest results.

    python -m benchmarks --list
    python -m benchmarks SUITE [--set NAME=VALUE ...] [--repeats N]
    python -m benchmarks --quick        # every suite at smoke size (CI)
    python -m benchmarks.render
"""
