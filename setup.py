"""Build step for recpipe's C extensions; the metadata lives in pyproject.toml.

Two build states, with libjpeg or without:

- ``recpipe._resize`` (bilinear resize straight into the batch), ``recpipe._colour`` (colour
  jitter straight into the batch), ``recpipe._crc32c`` (record checksums) and ``recpipe._plan``
  (the one planner, which recpipe._batch includes too) need only a C
  compiler and Python's headers. They are required: when one cannot be built, the build fails
  saying what is missing.
- ``recpipe._batch``, the one libjpeg extension (region-of-interest and DCT-scaled JPEG
  decoding, ``decode_region``, and runs of records decoded into batch slots without the GIL,
  ``fill``), needs libjpeg-turbo's headers (``apt-get install libjpeg62-turbo-dev`` or
  ``libjpeg-turbo8-dev``). It is probed for once: without a usable ``jpeglib.h``/``-ljpeg`` it
  is left out with one note saying how to get it (the manylinux wheel carries libjpeg-turbo;
  ``ci/build_wheel.sh`` builds it), and recpipe decodes on its Python path.

``RECPIPE_REQUIRE_EXTENSIONS=1`` turns a left-out ``recpipe._batch`` into a build error (the
wheel build sets it). ``RECPIPE_WITHOUT_LIBJPEG=1`` builds the state without libjpeg even where
libjpeg is usable (tests/test_build_states.py checks that state).
"""

import contextlib
import os
import shlex
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError

JPEG_NOTE = ("note: jpeglib.h (libjpeg-turbo's headers) not found: building recpipe without "
             "{names} (region decoding and GIL-free batch decoding); recpipe falls back to "
             "whole-image decodes in Python. To get them: pip install recpipe from the manylinux "
             "wheel (it carries libjpeg-turbo), or apt-get install libjpeg62-turbo-dev "
             "(libjpeg-turbo8-dev on Ubuntu) and reinstall. `recpipe doctor` shows what is "
             "missing and what it costs.\n")
WITHOUT_NOTE = ("note: RECPIPE_WITHOUT_LIBJPEG is set: building recpipe without {names} "
                "(the state without libjpeg; recpipe decodes on its Python path).\n")
REQUIRED_ERROR = ("recpipe's C extension {name} could not be built ({exc}). recpipe needs a C "
                  "compiler and Python's headers to install from source (apt-get install gcc "
                  "python3-dev, or your platform's equivalent), or install the manylinux wheel.")


class BuildError(BaseError):
    """A build that cannot go on; setup() prints it as one "error: ..." line, no traceback."""


def _flag(name):
    return os.environ.get(name, "") not in ("", "0")


def _require_all():
    return _flag("RECPIPE_REQUIRE_EXTENSIONS")


def _needs_jpeg(ext):
    return "jpeg" in (ext.libraries or [])


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


def _link_numpy_random(ext):
    """Link numpy's own normal sampler (``libnpyrandom.a``, ``random_standard_normal``) into
    ``recpipe._plan`` and ``recpipe._batch`` (csrc/plan/draws.h) for PCA lighting's normals
    (``RECPIPE_NPYRANDOM``); without numpy's random library at build time the Python path
    draws them with numpy and PCA lighting stays on the Python path."""
    try:
        import numpy
    except ImportError:
        return
    root = os.path.dirname(numpy.__file__)
    library = os.path.join(root, "random", "lib", "libnpyrandom.a")
    include = numpy.get_include()
    if os.path.exists(library) and os.path.exists(
            os.path.join(include, "numpy", "random", "distributions.h")):
        ext.include_dirs = list(ext.include_dirs) + [include]
        ext.extra_objects = list(ext.extra_objects) + [library]
        ext.define_macros = list(ext.define_macros) + [("RECPIPE_NPYRANDOM", "1")]
        ext.libraries = list(ext.libraries) + ["m"]


class RecpipeBuildExt(build_ext):
    """build_ext with recpipe's two build states: the compiler-only extensions always (an error
    when one fails), the libjpeg one where libjpeg is usable (a note when it is not)."""

    def build_extensions(self):
        self.check_extensions_list(self.extensions)
        required = [ext for ext in self.extensions if not _needs_jpeg(ext)]
        # the required ones first: a missing compiler is reported as that, not as missing libjpeg
        for ext in required:
            if ext.name == "recpipe._plan":  # the samples' draws (csrc/plan/draws.h)
                _link_numpy_random(ext)
            try:
                self.build_extension(ext)
            except Exception as exc:  # noqa: BLE001 - any toolchain failure
                raise BuildError(REQUIRED_ERROR.format(name=ext.name, exc=exc)) from exc
        needs_jpeg = self._libjpeg_extensions([ext for ext in self.extensions
                                               if _needs_jpeg(ext)])
        self.extensions = required + needs_jpeg  # what --inplace copies and installs list
        for ext in needs_jpeg:
            if ext.name == "recpipe._batch":
                _link_numpy_random(ext)
                self._link_libpng(ext)
            try:
                self.build_extension(ext)
            except Exception as exc:  # noqa: BLE001 - libjpeg was usable, yet it failed
                if _require_all():
                    raise
                sys.stderr.write(f"warning: not building {ext.name} ({exc}); recpipe decodes on "
                                 "its Python path (whole-image decodes).\n")
                self.extensions.remove(ext)

    def _libjpeg_extensions(self, needs_jpeg):
        """``needs_jpeg``, or none of them (with one note) where libjpeg is not usable or
        RECPIPE_WITHOUT_LIBJPEG is set; a build error instead with RECPIPE_REQUIRE_EXTENSIONS."""
        if not needs_jpeg:
            return []
        names = " and ".join(ext.name for ext in needs_jpeg)
        if _flag("RECPIPE_WITHOUT_LIBJPEG"):
            note = WITHOUT_NOTE
        else:
            note = None if self._jpeglib_usable() else JPEG_NOTE
        if note is None:
            return needs_jpeg
        if _require_all():
            raise BuildError(f"RECPIPE_REQUIRE_EXTENSIONS is set but jpeglib.h/libjpeg is not "
                             f"usable (or RECPIPE_WITHOUT_LIBJPEG is set), so {names} cannot be "
                             "built")
        sys.stderr.write(note.format(names=names))
        return []

    def _link_libpng(self, ext):
        """PNG records in native runs (csrc/png/png.h) where libpng's headers and library are
        usable (RECPIPE_PNG); without them PNGs are decoded on the Python path, as before."""
        if _flag("RECPIPE_WITHOUT_LIBPNG") or not self._links("png.h", "png", "png_structp p = "
                                                                 "png_create_read_struct("
                                                                 "PNG_LIBPNG_VER_STRING, 0, 0, 0);"
                                                                 " (void)p;"):
            return
        ext.libraries = list(ext.libraries) + ["png"]
        ext.define_macros = list(ext.define_macros) + [("RECPIPE_PNG", "1")]

    def _links(self, header, library, body):
        """Whether a program including ``header`` and running ``body`` compiles and links
        against -l``library`` here."""
        with tempfile.TemporaryDirectory(prefix="recpipe-probe-") as folder:
            source = os.path.join(folder, "probe.c")
            with open(source, "w") as f:
                f.write(f"#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\n"
                        f"int main(void) {{ {body} return 0; }}\n")
            with _quiet_stderr(os.path.join(folder, "probe.log")):
                try:
                    objects = self.compiler.compile([source], output_dir=folder,
                                                    include_dirs=self.include_dirs)
                    self.compiler.link_executable(objects, "probe", output_dir=folder,
                                                  libraries=[library],
                                                  library_dirs=self.library_dirs,
                                                  extra_postargs=shlex.split(
                                                      os.environ.get("LDFLAGS", "")))
                except Exception:  # noqa: BLE001 - CompileError/LinkError: not usable
                    return False
        return True

    def _jpeglib_usable(self):
        """Whether a program including jpeglib.h compiles and links against -ljpeg here."""
        return self._links("jpeglib.h", "jpeg", "struct jpeg_decompress_struct d; "
                           "jpeg_create_decompress(&d); jpeg_destroy_decompress(&d);")


# The C sources live under csrc/, one folder a family (csrc/README.md); headers are included
# by their path from csrc/ ("kernels/interp.h").
CSRC = "csrc"


def _headers(*folders):
    """Every header of ``folders`` (under csrc/): what an extension's sources may include."""
    return sorted(os.path.join(CSRC, folder, name) for folder in folders
                  for name in os.listdir(os.path.join(CSRC, folder)) if name.endswith(".h"))


def _extension(name, source, folders, **keywords):
    keywords.setdefault("extra_compile_args", ["-O3"])
    return Extension(f"recpipe.{name}", sources=[os.path.join(CSRC, source)],
                     include_dirs=[CSRC], depends=_headers(*folders), **keywords)


setup(
    ext_modules=[
        # recpipe's pixels for the Python path: the renderer recpipe._batch uses too
        _extension("_kernels", "kernels/kernels_module.c",
                   ["common", "index", "kernels", "plan", "record"],
                   extra_compile_args=["-O3"]),
        _extension("_resize", "kernels/resize_module.c", ["common", "kernels"]),
        _extension("_colour", "kernels/colour_module.c", ["common", "kernels"]),
        _extension("_crc32c", "common/crc32c_module.c", ["common"]),
        # the one planner: no fused multiply-adds, or a matrix or factor would differ in its
        # last bit from Python's arithmetic (csrc/plan/plan.h also says so for recpipe._batch)
        _extension("_plan", "plan/plan_module.c", ["common", "plan"],
                   extra_compile_args=["-O3", "-ffp-contract=off"]),
        _extension("_batch", "batch/batch.c",
                   ["batch", "common", "jpeg", "kernels", "plan", "png", "record"],
                   libraries=["jpeg"]),
    ],
    cmdclass={"build_ext": RecpipeBuildExt},
)
