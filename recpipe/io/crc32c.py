"""CRC32C (Castagnoli) of bytes: ``crc32c(data, value=0)``, continuing ``value``.

Uses recpipe's C extension ``recpipe._crc32c`` (SSE4.2 CRC32 instruction, or a slicing-by-8
table); without it, the ``google_crc32c`` or ``crc32c`` package when importable; else a pure
Python table walk (correct but slow: a warning is logged once).
"""

import functools
import importlib
import logging

from .._optional import extension

__all__ = ["crc32c", "crc32c_python", "implementation"]

log = logging.getLogger(__name__)

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


def _google(module):
    return lambda data, value=0: module.extend(value, bytes(data))


def _package(module):
    return lambda data, value=0: module.crc32c(bytes(data), value)


@functools.lru_cache(maxsize=None)
def _chosen():
    """``(name, function)`` of the fastest CRC32C available here."""
    native = extension("_crc32c")
    if native is not None:
        return "recpipe._crc32c", native.crc32c
    for name, wrap in (("google_crc32c", _google), ("crc32c", _package)):
        try:
            return name, wrap(importlib.import_module(name))
        except ImportError:
            continue
    log.warning("recpipe._crc32c is not built and neither google_crc32c nor crc32c is "
                "installed: record checksums use a slow pure Python CRC32C (build the C "
                "extensions or pip install google-crc32c)")
    return "python", crc32c_python


def implementation():
    """The name of the CRC32C implementation in use."""
    return _chosen()[0]


def crc32c(data, value=0):
    """The CRC32C of ``data`` (bytes-like), continuing ``value`` (the CRC of what came before)."""
    return _chosen()[1](data, value)
