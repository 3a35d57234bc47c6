"""The old import path of ``recpipe.system.env``, kept for the programs that use it: this name
is bound to that very module (one module object, so names and patches are shared), not a copy."""

import sys

from .system import env

sys.modules[__name__] = env
