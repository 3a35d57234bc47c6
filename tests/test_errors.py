"""recpipe.errors: the on_error vocabulary the loaders and the packer share."""

import pytest


def test_loaders_and_packer_share_one_on_error_vocabulary():
    """"raise" and "skip" mean the same to both; "replace" (loaders only) is named, not unknown."""
    from recpipe.decode.options import LoaderOptions
    from recpipe.errors import ON_ERROR
    from recpipe.packing.options import PACK_ON_ERROR, PackOptions

    assert set(PACK_ON_ERROR) < set(ON_ERROR)
    for policy in PACK_ON_ERROR:
        PackOptions(on_error=policy)
    for policy in ON_ERROR:
        LoaderOptions.from_kwargs(1, (3, 8, 8), on_error=policy)
    with pytest.raises(ValueError, match=r"on_error='replace'.*not available here"):
        PackOptions(on_error="replace")
    for make in (lambda: PackOptions(on_error="ignore"),
                 lambda: LoaderOptions.from_kwargs(1, (3, 8, 8), on_error="ignore")):
        with pytest.raises(ValueError, match=r"on_error='ignore': expected one of \("):
            make()
