"""What recpipe tells its user about the installation and its runs, above the library's layers:
``doctor`` (what this installation can do, ``recpipe doctor``), ``plots`` (charts of ``recpipe
bench`` and ``recpipe tune``) and ``sample`` (the built-in sample images doctor and ``recpipe
demo`` measure with)."""
