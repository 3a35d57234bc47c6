"""Build step for recpipe's optional C extensions; the metadata lives in pyproject.toml.

``recpipe._jpegroi`` (region-of-interest JPEG decoding) and ``recpipe._batch`` (runs of records
decoded into batch slots) need libjpeg-turbo's headers (``apt-get install libjpeg62-turbo-dev``
or ``libjpeg-turbo8-dev``); ``recpipe._resize``
(bilinear resize straight into the batch) and ``recpipe._colour`` (colour jitter straight into
the batch) need only a C compiler. When one cannot be built, the
build only warns and recpipe uses its OpenCV/whole-image paths instead.
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile or link into a warning."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any toolchain failure: skip the extension
            self._skipped(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skipped(exc, ext.name)

    @staticmethod
    def _skipped(exc, name="C extensions"):
        sys.stderr.write(f"warning: not building {name} ({exc}); recpipe falls back to slower "
                         "paths (whole-image decodes for _jpegroi: install libjpeg-turbo headers, "
                         "apt-get install libjpeg62-turbo-dev; OpenCV/NumPy for _resize/_colour).\n")


setup(
    ext_modules=[
        Extension("recpipe._jpegroi", sources=["recpipe/_jpegroi.c"], libraries=["jpeg"],
                  depends=["recpipe/_roi_core.h"], extra_compile_args=["-O2"], optional=True),
        Extension("recpipe._resize", sources=["recpipe/_resize.c"],
                  depends=["recpipe/_floats.h", "recpipe/_resize_core.h"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("recpipe._colour", sources=["recpipe/_colour.c"],
                  depends=["recpipe/_floats.h", "recpipe/_planes.h"], extra_compile_args=["-O3"],
                  optional=True),
        Extension("recpipe._batch", sources=["recpipe/_batch.c"], libraries=["jpeg"],
                  depends=["recpipe/_augment_kernels.h", "recpipe/_floats.h", "recpipe/_planes.h",
                           "recpipe/_resize_core.h",
                           "recpipe/_roi_core.h"],
                  extra_compile_args=["-O3"], optional=True),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
