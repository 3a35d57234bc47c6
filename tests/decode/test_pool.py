import threading
import time

import pytest

from recpipe.decode.pool import WorkerPool


def _collecting_pool(threads):
    done = []
    lock = threading.Lock()

    def work(task, clock):
        with lock:
            done.append((task, threading.current_thread().name))

    return WorkerPool(work, threads), done


def _wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_every_task_runs_once_and_close_joins_all_threads():
    pool, done = _collecting_pool(3)
    for i in range(200):
        pool.submit(i)
    _wait_for(lambda: len(done) == 200)
    pool.close()
    assert sorted(t for t, _ in done) == list(range(200))
    assert not [t for t in threading.enumerate() if t.name.startswith("recpipe-decode")]


def test_resize_grows_and_shrinks():
    pool, done = _collecting_pool(1)
    try:
        pool.resize(4)
        assert pool.threads == 4
        _wait_for(lambda: len([t for t in threading.enumerate()
                               if t.name.startswith("recpipe-decode")]) == 4)
        pool.resize(2)
        for i in range(50):
            pool.submit(i)
        _wait_for(lambda: len(done) == 50)
        _wait_for(lambda: len([t for t in threading.enumerate()
                               if t.name.startswith("recpipe-decode")]) == 2)
    finally:
        pool.close()


def test_a_crashing_work_function_is_reported():
    def work(task, clock):
        raise KeyError(task)

    pool = WorkerPool(work, 1)
    try:
        pool.submit("x")
        _wait_for(lambda: pool.error is not None)
        assert isinstance(pool.error, KeyError)
    finally:
        pool.close()


def test_invalid_thread_counts():
    with pytest.raises(ValueError):
        WorkerPool(lambda t, c: None, 0)
    pool, _ = _collecting_pool(1)
    pool.close()
    with pytest.raises(RuntimeError):
        pool.resize(2)
