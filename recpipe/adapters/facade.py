"""``LoaderFacade``: the tail every framework front over an ``ImageLoader`` (``recpipe.torch``'s
``TorchLoader``, ``recpipe.mx``'s ``ImageRecordIter``) hands to its ``self.loader``: the batch
count, the resumable state, the statistics, ``close`` and the context manager."""

from typing import Any

__all__ = ["LoaderFacade"]


class LoaderFacade:
    """Delegates to ``self.loader`` (an ``ImageLoader``)."""

    loader: Any  # set by the subclass's constructor

    def __len__(self) -> int:
        """Batches per epoch (the same on every rank)."""
        return len(self.loader)

    def state_dict(self) -> dict:
        """Where the loader is (epoch, batch, order settings); plain ints and strings."""
        return self.loader.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """The next epoch's iteration yields exactly what an uninterrupted run would have."""
        self.loader.load_state_dict(state)

    def stats(self):
        """Images/s, consumer wait, per-stage seconds and error counts (``ImageLoader.stats``)."""
        return self.loader.stats()

    def close(self) -> None:
        """Stop and join the decode threads."""
        self.loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
