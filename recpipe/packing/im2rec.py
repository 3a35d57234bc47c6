"""The old import path of ``recpipe.mx.im2rec`` (im2rec's packing mode, a preset of the pack
engine), kept for the programs that use it: this name is bound to that very module (one module
object, so names and patches are shared), not a copy."""

import sys

from ..mx import im2rec

sys.modules[__name__] = im2rec
