"""Run one page's code blocks in order, as a reader would, in the current folder.

Reads a JSON list of blocks (``where``, ``language``, ``code``) on stdin. Python blocks share
one namespace, so a later block may use what an earlier one made (a page reads top to bottom);
bash blocks run with ``bash -eu`` (a pipeline counts by its last command, as in a shell: ``... |
head`` is fine). Stops at the first failing block: prints where it is and exits 1. Run as a script
by tests/docs/test_examples.py (a process of its own per page: loaders, threads and working folder
never touch the test process).
"""

import json
import subprocess
import sys
import time
import traceback

BASH_TIMEOUT = 240


def main():
    blocks = json.load(sys.stdin)
    namespace = {"__name__": "__main__"}
    for block in blocks:
        start = time.monotonic()
        print(f"--- {block['where']} ({block['language']})", flush=True)
        try:
            if block["language"] == "python":
                exec(compile(block["code"], block["where"], "exec"), namespace)
            else:
                subprocess.run(["bash", "-eu", "-c", block["code"]], check=True,
                               timeout=BASH_TIMEOUT, stdin=subprocess.DEVNULL)
        except BaseException:  # noqa: BLE001, B036 - SystemExit from an example fails it too
            sys.stdout.flush()
            traceback.print_exc()
            print(f"FAILED: {block['where']}", flush=True)
            return 1
        print(f"--- {block['where']} ok ({time.monotonic() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
