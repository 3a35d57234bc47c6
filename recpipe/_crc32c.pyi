def crc32c(data: bytes, value: int = 0) -> int:
    """The CRC32C of ``data``, continuing ``value``."""
def software(data: bytes, value: int = 0) -> int:
    """``crc32c`` by the table, whatever the CPU (for tests)."""
def hardware() -> bool:
    """True when the SSE4.2 CRC32 instruction is used."""
