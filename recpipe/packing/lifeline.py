"""Worker processes die with the process that started them.

``tie_to_parent(pid)`` runs in a worker's initializer: on Linux the kernel sends SIGKILL when
the worker's parent exits (``PR_SET_PDEATHSIG``; with the forkserver start method the parent is
the fork server, which exits when the main process is gone), and on every platform a daemon
thread checks once a second that ``pid`` (the main process) is still alive and ends the worker
with ``os._exit`` otherwise. So a ``recpipe pack`` killed with SIGKILL or SIGTERM leaves no
worker blocked forever holding the caller's pipes.
"""

import ctypes
import ctypes.util
import logging
import os
import signal
import threading
from ..image.opencv import load_cv2

__all__ = ["init_worker", "parent_alive", "single_thread_opencv", "tie_to_parent"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_POLL_SECONDS = 1.0


def parent_alive(pid):
    """True while process ``pid`` exists (and is not a zombie we could detect)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True


def _set_parent_death_signal():
    if not os.uname().sysname == "Linux":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(pid):
    stop = threading.Event()
    while not stop.wait(_POLL_SECONDS):
        if not parent_alive(pid):
            os._exit(1)  # the main process is gone: nobody will read our results


def tie_to_parent(pid):
    """Make this (worker) process end when process ``pid`` ends."""
    _set_parent_death_signal()
    if not parent_alive(pid):  # it died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(pid,), name="recpipe-lifeline", daemon=True).start()


def init_worker(parent_pid, opencv_threads=True):
    """A pack worker's start: tied to ``parent_pid``, Ctrl-C left to the parent, and OpenCV on
    one thread (the pool's processes are the parallelism)."""
    tie_to_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    if opencv_threads:
        single_thread_opencv()


def single_thread_opencv():
    """One OpenCV thread in this process: the pool's processes are the parallelism."""
    cv2 = load_cv2()
    cv2.setNumThreads(1)
