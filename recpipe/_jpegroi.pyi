"""Type stubs of recpipe's libjpeg region decoder (recpipe/_jpegroi.c)."""

from typing import Tuple

from typing_extensions import Buffer

LIBJPEG_TURBO_VERSION: int
JPEG_LIB_VERSION: int

def decode(data: Buffer, scale_num: int, scale_den: int, x0: int, y0: int, x1: int, y1: int,
           channels: int, fast_dct: bool, fast_upsample: bool, strict: bool,
           max_bytes: int, check_rest: bool = ...,
           max_scans: int = ...) -> Tuple[bytearray, int, int, int, int, int, int, int]: ...
