"""Type stubs of recpipe's fused bilinear resize (csrc/kernels/resize_module.c)."""

from typing import Optional, Sequence, Tuple

from typing_extensions import Buffer

AxisSpec = Tuple[int, int, float, float]  # (offset, length, shift, scale)

def linear(src: Buffer, height: int, width: int, channels: int, dst: Buffer, out_h: int,
           out_w: int, y_axis: AxisSpec, x_axis: AxisSpec, mirror: bool, nchw: bool,
           gains: Optional[Sequence[float]], offsets: Optional[Sequence[float]]) -> None: ...
