"""The old import path of ``recpipe.capacity`` (the capacity model behind ``recpipe plan``),
kept for the programs that use it: this name is bound to that very module (one module object,
so names and patches are shared), not a copy."""

import sys

from . import capacity

sys.modules[__name__] = capacity
