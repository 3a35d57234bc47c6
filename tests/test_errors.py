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


def test_errors_keep_the_key_source_and_hint_through_pickle():
    """What an error that stops a run says survives a DataLoader worker's pickling."""
    import pickle

    from recpipe.errors import DecodeError, LabelError, RecordFormatError

    errors = [RecordFormatError("bad", path="a.rec", offset=3, record=1, key=7,
                                source="src/cat/1.jpg", hint="to go on: ..."),
              LabelError("no label", path="a.rec", record=2, key="k"),
              DecodeError("broken", path="a.rec", record=4, key=9, source="src/x.jpg")]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert copy.details() == error.details()
    assert str(errors[0]) == ("a.rec: bad (record 1, byte offset 3, key 7); packed from "
                              "src/cat/1.jpg\n  to go on: ...")
