"""Keywords the MXNet adapter ignores are said in a warning the user sees, not only in a log
record nobody has a handler for (issue 23)."""

import pytest

import recpipe.mx.keywords as mk


def test_mean_values_beside_a_mean_image_warn_that_they_are_ignored():
    with pytest.warns(UserWarning, match="mean_img is set: mean_r/mean_g/mean_b are ignored"):
        mk.translate(dict(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=2,
                          mean_img="mean.nd", mean_r=120.0))
