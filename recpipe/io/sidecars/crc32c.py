"""CRC32C (Castagnoli) of bytes: ``crc32c(data, value=0)``, continuing ``value``.

Uses recpipe's C extension ``recpipe._crc32c`` (SSE4.2 CRC32 instruction, or a slicing-by-8
table), which every build of recpipe has (it needs only a C compiler); ``crc32c_python`` is the
pure Python reference it is tested against.
"""

from ..._optional import native

__all__ = ["crc32c", "crc32c_python", "implementation"]

_POLY = 0x82F63B78


def _table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _table()


def crc32c_python(data, value=0):
    """The pure Python CRC32C (the reference the fast ones are tested against)."""
    table = _TABLE
    crc = value ^ 0xFFFFFFFF
    for byte in memoryview(data).cast("B"):
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def implementation():
    """The name of the CRC32C implementation in use."""
    return "recpipe._crc32c"


def crc32c(data, value=0):
    """The CRC32C of ``data`` (bytes-like), continuing ``value`` (the CRC of what came before)."""
    return native("_crc32c").crc32c(data, value)
