"""The files that describe a ``.rec``: its index (``index``: the ``.idx`` and ``.lst`` text
and the one ``.idx`` parser; ``index_table``: the parsed index as arrays; ``index_cache``: the
memory-mapped cache of a parse), its checksums (``sums``, ``crc32c``), the files its records
were packed from (``record_sources``), its label names (``label_map``), the records found bad in
it (``quarantine``), and an index rebuilt from the records (``rebuild``). ``opening`` opens the
sidecars of a ``.rec`` together, the one way a reader does."""

__all__: list = []
