import threading

import pytest


@pytest.fixture(autouse=True)
def thread_police():
    """Fail a test that leaves threads running: every thread has an owner that joins it."""
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for t in leftover:
        t.join(timeout=5)
    leftover = [t for t in leftover if t.is_alive()]
    assert not leftover, f"threads left running: {[t.name for t in leftover]}"


@pytest.fixture(autouse=True)
def private_quarantine(tmp_path_factory, monkeypatch):
    """Each test gets its own quarantine folder (never the user's cache)."""
    monkeypatch.setenv("RECPIPE_QUARANTINE_DIR", str(tmp_path_factory.mktemp("quarantine")))
