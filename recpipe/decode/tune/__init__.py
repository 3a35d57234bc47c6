"""The decode-thread autotuner, a room of its own: ``controller`` (pure: measured windows in,
the next threads and prefetch depth out) and ``tuner`` (the loader side: ``AutoTuner`` measures
the windows in the consumer thread and applies the decisions). ``ImageLoader.enable_autotune``
and ``recpipe tune`` use it; docs/autotune.md describes the control law."""

__all__: list = []
