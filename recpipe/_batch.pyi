"""Type stubs of recpipe's native run decoder (recpipe/_batch.c)."""

from typing import List, Sequence, Tuple

from typing_extensions import Buffer

def fill(fd: int, file_size: int, starts: Buffer, ends: Buffer, samples: Buffer, slots: Buffer,
         images: Buffer, labels: Buffer, status: Buffer, key_lo: int, key_hi: int, epoch: int,
         options: Tuple[int, int, bool, bool, bool, bool, Sequence[float], Sequence[float], int,
                        bool, bool, bool, int, int],
         sums: Buffer = b"") -> int: ...
def uniforms(key_lo: int, key_hi: int, sample: int, epoch: int, count: int) -> List[float]: ...
