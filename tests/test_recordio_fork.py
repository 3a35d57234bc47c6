"""A ``recordio`` writer inherited by a forked child stays the parent's (issue 20, item 8)."""

import os
import subprocess
import sys
import textwrap

import pytest

import recpipe
from recpipe import recordio

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD_EXITS = textwrap.dedent("""
    import os, sys
    from recpipe import recordio
    rec, idx, how = sys.argv[1:]
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(5):
        writer.write_idx(i, b"record %d" % i)
    pid = os.fork()
    if pid == 0:  # the child ends as a script does: the writer is dropped at exit
        if how == "close":
            writer.close()
        elif how == "write":
            try:
                writer.write_idx(9, b"child")
            except RuntimeError:
                pass
        sys.exit(0)
    os.waitpid(pid, 0)
    writer.write_idx(5, b"record 5")
    writer.close()
    print("parent ok")
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("how", ["exit", "close", "write"])
def test_a_forked_child_does_not_publish_the_parents_writer(tmp_path, how):
    rec, idx = str(tmp_path / "w.rec"), str(tmp_path / "w.idx")
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    done = subprocess.run([sys.executable, "-c", CHILD_EXITS, rec, idx, how], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "parent ok", done.stderr
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == list(range(6))
    assert [reader.read_idx(i) for i in range(6)] == [b"record %d" % i for i in range(6)]
    reader.close()
    plain = recordio.MXRecordIO(rec, "r")
    records = []
    while (record := plain.read()) is not None:
        records.append(record)
    assert len(records) == 6  # no record written twice
    assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == []
    assert recpipe.RecordReader(rec).read_key(5) == b"record 5"
