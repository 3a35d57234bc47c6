"""The old import path of ``recpipe.mx.recordio``, kept for the programs that use it: this name is
bound to that very module (one module object, so names and patches are shared), not a copy."""

import sys

from .mx import recordio

sys.modules[__name__] = recordio
