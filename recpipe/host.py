"""The old import path of ``recpipe.system.host``, kept for the programs that use it: this name
is bound to that very module (one module object, so names and patches are shared), not a copy."""

import sys

from .system import host

sys.modules[__name__] = host
