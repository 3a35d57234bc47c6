"""Where the sidecars of a ``.rec`` lie, beside it: ``x.rec`` -> ``x.idx`` (its index),
``x.sums`` (its checksums), ``x.sources.jsonl`` (the files its records were packed from). A
name without the ``.rec`` ending gets the sidecar's ending added (``x`` -> ``x.idx``)."""

__all__ = ["SOURCES_SUFFIX", "index_url_for", "sources_url_for", "stem_of", "sums_url_for"]

SOURCES_SUFFIX = ".sources.jsonl"


def stem_of(rec_url) -> str:
    """``rec_url`` without its ``.rec`` ending."""
    rec_url = str(rec_url)
    return rec_url[:-4] if rec_url.endswith(".rec") else rec_url


def index_url_for(rec_url) -> str:
    """The conventional ``.idx`` beside a ``.rec`` (``x.rec`` -> ``x.idx``, else ``x`` +
    ``.idx``)."""
    return stem_of(rec_url) + ".idx"


def sums_url_for(rec_url) -> str:
    """The checksum sidecar beside a ``.rec``: ``x.rec`` -> ``x.sums`` (else ``x`` + ``.sums``)."""
    return stem_of(rec_url) + ".sums"


def sources_url_for(rec_url) -> str:
    """The sources sidecar beside a ``.rec``: ``x.rec`` -> ``x.sources.jsonl``."""
    return stem_of(rec_url) + SOURCES_SUFFIX
