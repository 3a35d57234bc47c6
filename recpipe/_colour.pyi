"""Type stubs of recpipe's fused colour jitter (csrc/kernels/colour_module.c)."""

from typing import Optional, Sequence, Tuple

from typing_extensions import Buffer

def jitter(src: Buffer, height: int, width: int, dst: Buffer,
           ops: Sequence[Tuple[int, float]], pca: Optional[Sequence[float]], mirror: bool,
           nchw: bool, gains: Optional[Sequence[float]], offsets: Optional[Sequence[float]],
           scratch: Buffer) -> None:
    """Colour jitter (``ops``: ``(op, alpha)``, op 0 brightness, 1 contrast, 2 saturation),
    PCA lighting (``pca``: three RGB offsets or None), mirror and normalisation of ``src``
    (uint8 ``(height, width, 3)``) into ``dst``; ``scratch``: float32, at least 3 x height x
    width values. The GIL is released."""
