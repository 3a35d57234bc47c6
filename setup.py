"""Build step for recpipe's one optional C extension; the metadata lives in pyproject.toml.

``recpipe._jpegroi`` (region-of-interest JPEG decoding) needs libjpeg-turbo's headers
(``apt-get install libjpeg62-turbo-dev`` or ``libjpeg-turbo8-dev``). When they or a compiler are
missing, the build only warns and recpipe decodes full images instead.
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
        sys.stderr.write(f"warning: not building {name} ({exc}); recpipe will decode whole JPEGs "
                         "instead of regions. Install libjpeg-turbo headers "
                         "(apt-get install libjpeg62-turbo-dev) to build it.\n")


setup(
    ext_modules=[
        Extension("recpipe._jpegroi", sources=["recpipe/_jpegroi.c"], libraries=["jpeg"],
                  extra_compile_args=["-O2"], optional=True),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
