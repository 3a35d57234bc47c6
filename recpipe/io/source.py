"""``Source``: random-access bytes of one file, the interface every byte source implements."""

__all__ = ["Source"]


class Source:
    """Random-access bytes of one file. Subclasses implement ``_read``."""

    url = None
    size = 0

    def read(self, offset, length):
        """Return up to ``length`` bytes at ``offset`` (fewer only at the end of the file)."""
        if length <= 0 or offset >= self.size:
            return b""
        return self._read(offset, min(length, self.size - offset))

    def _read(self, offset, length):
        raise NotImplementedError

    @property
    def identity(self):
        """A string naming this version of the file (its URL and size here; a local file's
        adds its modification time and inode): a rewritten file gets another identity."""
        return f"{self.url}|{self.size}"

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
