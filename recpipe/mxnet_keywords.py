"""The old import path of ``recpipe.mx.keywords``, kept for the programs that use it: this name is
bound to that very module (one module object, so names and patches are shared), not a copy."""

import sys

from .mx import keywords

sys.modules[__name__] = keywords
