"""The old import path of ``recpipe.system.distributed``, kept for the programs that use it: this name
is bound to that very module (one module object, so names and patches are shared), not a copy."""

import sys

from .system import distributed

sys.modules[__name__] = distributed
