"""Type stubs of recpipe's native run decoder (recpipe/_batch.c).

``options`` is a ``recpipe.decode.native.RunOptions``: the tuple below lists its fields' types
in ``OPTION_FIELDS`` order (tests/decode/test_native.py checks the two against each other)."""

from typing import Dict, List, Tuple, Union

from typing_extensions import Buffer

OPTION_FIELDS: Tuple[str, ...]
DRAW_SLOTS: Dict[str, int]

def fill(source: Union[int, Buffer], file_size: int, starts: Buffer, ends: Buffer,
         samples: Buffer, slots: Buffer, images: Buffer, labels: Buffer, status: Buffer,
         key_lo: int, key_hi: int, epoch: int,
         options: Tuple[int, int, bool, bool, bool, bool, Tuple[float, float, float],
                        Tuple[float, float, float], int, bool, bool, bool, int, int, bool, int,
                        int, bool, float, float, float, float, float, float, float, int, float,
                        float, float, int, int, int, bool],
         sums: Buffer = b"", label_ids: Buffer = b"", label_values: Buffer = b"") -> int: ...
def interp(src_shape: Tuple[int, int, int], src: Buffer, dst_shape: Tuple[int, int], dst: Buffer,
           inv_x: float, inv_y: float, method: int) -> bool: ...
def uniforms(key_lo: int, key_hi: int, sample: int, epoch: int, count: int) -> List[float]: ...
