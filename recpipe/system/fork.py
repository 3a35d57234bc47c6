"""After ``os.fork``, in the child: what recpipe's objects must let go of, in one place.

A forked child inherits its parent's descriptors, sockets, thread pools (without their threads)
and event loops; sharing them with the parent corrupts both. Objects holding such state call
``after_fork_in_child(owner, forget)``: in every child forked later, ``forget(owner)`` runs once
(``os.register_at_fork``, registered once for the process by this module), while ``owner`` is
alive; the hook holds it weakly. ``forget`` must be quick and must not block: mark the state
as inherited (drop a reference, replace a lock) and let the next use build it afresh. An
exception in one ``forget`` is logged and does not stop the others.
"""

import logging
import os
import threading
import weakref
from typing import Any, Callable, List, Tuple

__all__ = ["after_fork_in_child"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_hooks: List[Tuple["weakref.ref[Any]", Callable[[Any], None]]] = []
_installed = False
_pruned_at = 0  # hooks after the last pruning of dead owners


def after_fork_in_child(owner: Any, forget: Callable[[Any], None]) -> None:
    """Run ``forget(owner)`` in every child this process forks from now on, while ``owner``
    lives."""
    global _installed, _pruned_at
    with _lock:
        if not _installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_run_in_child)
            _installed = True
        if len(_hooks) >= 2 * _pruned_at + 64:  # amortised: dead owners go, O(1) per call
            _hooks[:] = [(ref, hook) for ref, hook in _hooks if ref() is not None]
            _pruned_at = len(_hooks)
        _hooks.append((weakref.ref(owner), forget))


def _run_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    for ref, forget in list(_hooks):
        owner = ref()
        if owner is None:
            continue
        try:
            forget(owner)
        except Exception:  # noqa: BLE001 - one object's failure must not leave the others shared
            log.exception("after fork: %r could not let go of its parent's state", owner)
