"""Type stubs of recpipe's fused bilinear resize (csrc/kernels/resize_module.c)."""

from typing import Optional, Sequence, Tuple

from typing_extensions import Buffer

AxisSpec = Tuple[int, int, float, float]  # (offset, length, shift, scale)

def linear(src: Buffer, height: int, width: int, channels: int, dst: Buffer, out_h: int,
           out_w: int, y_axis: AxisSpec, x_axis: AxisSpec, mirror: bool, nchw: bool,
           gains: Optional[Sequence[float]], offsets: Optional[Sequence[float]]) -> None:
    """Bilinear resize of part of ``src`` (uint8 ``(height, width, channels)``) into ``dst``
    (uint8 or float32, ``(C, out_h, out_w)`` when ``nchw``), mirrored when asked; float32 is
    ``value * gains[c] + offsets[c]``. An axis is ``(offset, length, shift, scale)``: output
    ``i`` samples ``(i + shift + 0.5) * scale - 0.5``. The GIL is released."""
