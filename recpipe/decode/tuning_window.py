"""The old import path of ``recpipe.decode.tune.tuner``, kept for the programs that use it:
this name is bound to that very module (one module object, so names and patches are shared),
not a copy."""

import sys

from .tune import tuner

sys.modules[__name__] = tuner
