"""A byte progress bar on stderr for the commands that scan a whole file (tqdm, lazily)."""

import contextlib
import sys

__all__ = ["byte_progress"]


@contextlib.contextmanager
def byte_progress(enabled, description):
    """A ``progress(bytes)`` callable drawing a tqdm bar when ``enabled`` and stderr is a
    terminal (else None); the bar is closed on exit."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    import tqdm

    tqdm.tqdm.monitor_interval = 0  # no monitor thread
    bar = tqdm.tqdm(unit="B", unit_scale=True, file=sys.stderr, leave=False, desc=description,
                    dynamic_ncols=True, mininterval=0.2)
    try:
        yield bar.update
    finally:
        bar.close()
