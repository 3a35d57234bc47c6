"""Type stubs of recpipe's fused colour jitter (csrc/kernels/colour_module.c)."""

from typing import Optional, Sequence, Tuple

from typing_extensions import Buffer

def jitter(src: Buffer, height: int, width: int, dst: Buffer,
           ops: Sequence[Tuple[int, float]], pca: Optional[Sequence[float]], mirror: bool,
           nchw: bool, gains: Optional[Sequence[float]], offsets: Optional[Sequence[float]],
           scratch: Buffer) -> None: ...
