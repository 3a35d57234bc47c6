"""Run a step in a forked child and bring back what happened there (for fork-safety tests)."""

import os


def outcome_in_child(step):
    """``(status, message)``: the child's exit status and ``"ExcType: message"`` of what
    ``step()`` raised there (``"no error"`` when it returned)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, then leave without running the parent's exit handlers
        try:
            step()
            message = b"no error"
        except BaseException as exc:  # noqa: BLE001 - whatever it was is the answer
            message = f"{type(exc).__name__}: {exc}".encode()[:500]
        os.write(write, message)
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 1000).decode()
    os.close(read)
    return status, message
