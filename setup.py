"""Build step for recpipe's optional C extensions; the metadata lives in pyproject.toml.

``recpipe._jpegroi`` (region-of-interest JPEG decoding) and ``recpipe._batch`` (runs of records
decoded into batch slots) need libjpeg-turbo's headers (``apt-get install libjpeg62-turbo-dev``
or ``libjpeg-turbo8-dev``); ``recpipe._resize``
(bilinear resize straight into the batch) and ``recpipe._colour`` (colour jitter straight into
the batch) and ``recpipe._crc32c`` (record checksums) need only a C compiler. When one cannot be built, the
build only warns and recpipe uses its OpenCV/whole-image paths instead.

The extensions that link libjpeg (``libraries=["jpeg"]``) are probed for once: without
``jpeglib.h`` they are left out with one note saying how to get them (the manylinux wheel
carries libjpeg-turbo; ``tools/build_wheel.sh`` builds it). ``RECPIPE_REQUIRE_EXTENSIONS=1``
turns every left-out extension into a build error (the wheel build sets it).
"""

import contextlib
import os
import shlex
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

JPEG_NOTE = ("note: jpeglib.h (libjpeg-turbo's headers) not found: building recpipe without "
             "{names} (region decoding and GIL-free batch decoding); recpipe falls back to "
             "whole-image decodes in Python. To get them: pip install recpipe from the manylinux "
             "wheel (it carries libjpeg-turbo), or apt-get install libjpeg62-turbo-dev "
             "(libjpeg-turbo8-dev on Ubuntu) and reinstall. `recpipe doctor` shows what is "
             "missing and what it costs.\n")


def _require_all():
    return os.environ.get("RECPIPE_REQUIRE_EXTENSIONS", "") not in ("", "0")


@contextlib.contextmanager
def _quiet_stderr(log_path):
    """Send the compiler's stderr (fd 2, written by child processes) to ``log_path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log_path, "w") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile or link into a warning."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any toolchain failure: skip the extension
            self._skipped(exc)

    def build_extensions(self):
        if _require_all():  # optional=True would otherwise turn failures into warnings
            for ext in self.extensions:
                ext.optional = False
        needs_jpeg = [ext for ext in self.extensions if "jpeg" in (ext.libraries or [])]
        if needs_jpeg and not self._jpeglib_usable():
            names = " and ".join(ext.name for ext in needs_jpeg)
            if _require_all():
                raise RuntimeError(f"RECPIPE_REQUIRE_EXTENSIONS is set but jpeglib.h/libjpeg "
                                   f"is not usable, so {names} cannot be built")
            sys.stderr.write(JPEG_NOTE.format(names=names))
            self.extensions = [ext for ext in self.extensions if ext not in needs_jpeg]
        super().build_extensions()

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skipped(exc, ext.name)

    def _jpeglib_usable(self):
        """Whether a program including jpeglib.h compiles and links against -ljpeg here."""
        with tempfile.TemporaryDirectory(prefix="recpipe-jpeg-probe-") as folder:
            source = os.path.join(folder, "probe.c")
            with open(source, "w") as f:
                f.write("#include <stddef.h>\n#include <stdio.h>\n#include <jpeglib.h>\n"
                        "int main(void) { struct jpeg_decompress_struct d; "
                        "jpeg_create_decompress(&d); jpeg_destroy_decompress(&d); return 0; }\n")
            with _quiet_stderr(os.path.join(folder, "probe.log")):
                try:
                    objects = self.compiler.compile([source], output_dir=folder,
                                                    include_dirs=self.include_dirs)
                    # LDFLAGS too: a sanitizer build (tools/sanitize.sh) compiles with
                    # -fsanitize, whose runtime the probe's link then needs
                    self.compiler.link_executable(objects, "probe", output_dir=folder,
                                                  libraries=["jpeg"],
                                                  library_dirs=self.library_dirs,
                                                  extra_postargs=shlex.split(
                                                      os.environ.get("LDFLAGS", "")))
                except Exception:  # noqa: BLE001 - CompileError/LinkError: no usable libjpeg
                    return False
        return True

    @staticmethod
    def _skipped(exc, name="C extensions"):
        if _require_all():
            raise exc
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
        Extension("recpipe._crc32c", sources=["recpipe/_crc32c.c"], depends=["recpipe/_crc32c.h"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("recpipe._batch", sources=["recpipe/_batch.c"], libraries=["jpeg"],
                  depends=["recpipe/_augment_kernels.h", "recpipe/_crc32c.h", "recpipe/_floats.h",
                           "recpipe/_planes.h", "recpipe/_resize_core.h", "recpipe/_roi_core.h",
                           "recpipe/_warp.h"],
                  extra_compile_args=["-O3"], optional=True),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
