"""recpipe.system.fork: one os.register_at_fork for the process; objects register what they let
go of in a forked child."""

import gc
import os
import threading

from recpipe.system.fork import after_fork_in_child

from .._fork import outcome_in_child


class Holder:
    def __init__(self):
        self.pid_seen = None
        self.lock = threading.Lock()

    def forget(self):
        self.pid_seen = os.getpid()
        self.lock = threading.Lock()


def test_forget_runs_in_the_child_only_and_replaces_held_state():
    holder = Holder()
    after_fork_in_child(holder, Holder.forget)
    holder.lock.acquire()  # as if another thread of the parent held it at the fork

    def step():
        assert holder.pid_seen == os.getpid(), "forget did not run in the child"
        assert holder.lock.acquire(timeout=1), "the child inherited a held lock"

    assert outcome_in_child(step) == (0, "no error")
    assert holder.pid_seen is None  # nothing ran in the parent


def test_an_owner_is_held_weakly_and_a_failing_forget_does_not_stop_the_others():
    dead, alive, failing = Holder(), Holder(), Holder()
    after_fork_in_child(failing, lambda owner: 1 / 0)
    after_fork_in_child(dead, Holder.forget)
    after_fork_in_child(alive, Holder.forget)
    del dead
    gc.collect()

    def step():
        assert alive.pid_seen == os.getpid()

    assert outcome_in_child(step) == (0, "no error")


def test_a_local_source_reads_through_its_own_descriptor_in_a_child(tmp_path):
    from recpipe.io.sources import LocalSource

    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)))
    source = LocalSource(str(path))
    parent_fd = source.descriptor()

    def step():
        assert source.read(10, 4) == bytes([10, 11, 12, 13])
        assert source.descriptor() != parent_fd

    assert outcome_in_child(step) == (0, "no error")
    assert source.descriptor() == parent_fd and source.read(0, 2) == b"\x00\x01"
    source.close()
