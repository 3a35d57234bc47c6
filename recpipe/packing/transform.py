"""One item -> one record payload: read the file, sniff it, and pass it through or re-encode it.

This is the per-image work the packer runs in worker processes. Re-encoding follows im2rec
(``cv2`` decode, optional central square crop, shorter side resized to ``resize`` with the other
``long * resize // short``, bilinear, ``cv2.imencode``), with one speed-up: when the target is at
most half the source's shorter side, libjpeg decodes at 1/2, 1/4 or 1/8 scale (DCT scaling,
``cv2.IMREAD_REDUCED_*``) and the result is resized to exactly the size im2rec would produce.
``exact=True`` turns that off for pixel-identical im2rec output. Plain full-size JPEG decodes go
through simplejpeg when it is installed (the same libjpeg-turbo pixels as cv2, with less
overhead), except with ``exact=True``, where OpenCV decodes as im2rec's ``cv2.imread`` does;
anything simplejpeg declines falls back to cv2. Pass-through never imports cv2.

``keep_jpeg``: a JPEG that any decoder reads as it is (not CMYK, no EXIF rotation to apply)
keeps its bytes (no lossy generation); the rest is re-encoded (a JPEG) or transcoded (another
format). ``restart`` (``image.restart``): the JPEGs written get restart markers, losslessly (a
kept JPEG's coefficients are read and written back: same pixels), so that a crop decodes only
the intervals it touches. Each ``ItemResult`` says which in ``action``: ``kept``,
``restarted`` (kept pixels, restart markers added), ``re-encoded`` or ``transcoded``.
"""

import hashlib
import logging
import posixpath
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

from fsspec.implementations.local import LocalFileSystem

from ..image.info import sniff, unusual_reasons
from ..image.opencv import imdecode, load_cv2
from ..image.restart import RestartPolicy, add_restarts, restarts_available
from ..io.format.header import pack
from ..io.sources import url_to_fs
from .encode import center_crop, crop_resize_encode, encode_with_restarts, make_header
from .inputs import InputLimits, check_inside, read_input, remote_size_ok
from .items import join_url

__all__ = ["ACTIONS", "ImageOptions", "ItemResult", "ItemProcessor", "asks_for_change", "keepable",
           "reduced_scale",
           "target_size"]

log = logging.getLogger(__name__)

_REDUCED_SCALES = (8, 4, 2)
# what became of an image's bytes: stored as they were, a JPEG's coefficients written back with
# restart markers (same pixels), a JPEG decoded and encoded again, another format (PNG, BMP, ...)
# encoded
ACTIONS = ("kept", "restarted", "re-encoded", "transcoded")


@dataclass(frozen=True)
class ImageOptions:
    """How images become payloads (all of it part of the pack plan)."""

    pass_through: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    encoding: str = ".jpg"
    color: int = 1
    pack_label: bool = False
    exact: bool = False
    keep_jpeg: bool = False  # keep the bytes of JPEGs that need no change (``keepable``)
    restart: str = "off"  # restart markers in the JPEGs written: "off", "auto" or MCU rows

    def __post_init__(self):
        if self.color not in (-1, 0, 1):
            raise ValueError(f"color must be -1, 0 or 1, got {self.color}")
        if self.encoding not in (".jpg", ".png"):
            raise ValueError(f"encoding must be .jpg or .png, got {self.encoding!r}")
        if self.resize < 0:
            raise ValueError(f"resize must be 0 (off) or positive, got {self.resize}")
        if RestartPolicy.name(self.restart) != self.restart:
            raise ValueError(f"restart must be spelt 'off', 'auto' or a number of rows, got "
                             f"{self.restart!r}")


class ItemResult(NamedTuple):
    """What became of one item: ``payload`` (None on error), unusual ``reasons`` and ``error``."""

    payload: Optional[bytes]
    reasons: Tuple[str, ...]
    error: Optional[str]
    input_bytes: int
    action: Optional[str] = None  # one of ACTIONS (None on error)
    source_sha256: str = ""  # of the file's bytes as read (for the sources sidecar)


def asks_for_change(resize=0, center_crop=False, quality=None, encoding=None, color=1):
    """True when an option asks for different pixels or bytes (a resize, a crop, a quality,
    PNG output, grayscale): every image is then re-encoded. Otherwise JPEGs keep their bytes."""
    return bool(resize or center_crop or quality is not None
                or encoding not in (None, ".jpg", ".jpeg") or color == 0)


def keepable(info):
    """True for JPEG bytes every decoder reads to the pixels a re-encode would start from:
    a parsed baseline or progressive JPEG, not CMYK, without an EXIF rotation to apply."""
    return (info.format == "jpeg" and bool(info.width) and not info.cmyk
            and info.exif_orientation in (None, 1))


def target_size(height, width, resize, crop):
    """``(width, height)`` im2rec produces from a ``height`` x ``width`` image."""
    if crop:
        height = width = min(height, width)
    if not resize:
        return width, height
    if height > width:
        return resize, height * resize // width
    return width * resize // height, resize


def reduced_scale(height, width, resize, crop):
    """The largest DCT scale divisor (1, 2, 4, 8) that keeps the shorter side >= ``resize``."""
    if not resize:
        return 1
    shorter = min(height, width)
    for scale in _REDUCED_SCALES:
        if -(-shorter // scale) >= resize:
            return scale
    return 1


_REDUCED_FLAGS = {1: {1: 1, 0: 0}, 2: {1: 17, 0: 16}, 4: {1: 33, 0: 32}, 8: {1: 65, 0: 64}}


def _decode_simplejpeg(data, color):
    """Full-size decode with simplejpeg (same libjpeg-turbo output as cv2, less overhead), or
    None when simplejpeg is missing or declines the file (then cv2 decodes it)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    try:
        if color == 0:
            return simplejpeg.decode_jpeg(data, "GRAY")[:, :, 0]
        return simplejpeg.decode_jpeg(data, "BGR")
    except ValueError:
        return None


class ItemProcessor:
    """Callable turning a ``PackItem`` into an ``ItemResult``; picklable for worker processes.
    ``digests``: also the SHA-256 of each file read (for the sources sidecar)."""

    def __init__(self, root, options, storage_options=None, limits=InputLimits(), *,
                 digests=False):
        self.root = str(root)
        self.options = options
        self.storage_options = storage_options
        self.limits = limits
        self.digests = digests
        self._restart = RestartPolicy.parse(options.restart)
        self._fs = None
        self._base = None

    def __getstate__(self):
        return {"root": self.root, "options": self.options, "storage_options": self.storage_options,
                "limits": self.limits, "digests": self.digests}

    def __setstate__(self, state):
        ItemProcessor.__init__(self, state["root"], state["options"], state["storage_options"],
                               state["limits"], digests=state.get("digests", False))

    def read(self, relpath):
        """The bytes of ``relpath``: inside the root, a regular file, within the size limit
        (``inputs.InputLimits``); UnsafeInput (an OSError) otherwise."""
        if self._fs is None:
            self._fs, self._base = url_to_fs(self.root, self.storage_options)
            self._local = isinstance(self._fs, LocalFileSystem)
        if not self.limits.allow_outside_root:
            check_inside(self._base, relpath, local=self._local)
        path = join_url(self._base, relpath)
        if self._local:
            return read_input(path, self.limits)
        remote_size_ok(self._fs, path, self.limits)
        return self._fs.cat_file(path)

    def __call__(self, item):
        try:
            data = self.read(item.path)
        except OSError as e:
            return ItemResult(None, ("unreadable",), f"cannot read: {type(e).__name__}: {e}", 0)
        info = sniff(data)
        reasons = tuple(unusual_reasons(info, posixpath.splitext(item.path)[1]))
        header = make_header(item.index, item.labels, self.options.pack_label)
        digest = hashlib.sha256(data).hexdigest() if self.digests else ""
        if self.options.pass_through:
            return ItemResult(pack(header, data), reasons, None, len(data), "kept", digest)
        if self.options.keep_jpeg and keepable(info):
            restarted = self.with_restarts(data)
            if restarted is None:
                return ItemResult(pack(header, data), reasons, None, len(data), "kept", digest)
            return ItemResult(pack(header, restarted), reasons, None, len(data), "restarted",
                              digest)
        try:
            payload = pack(header, self.reencode(data, info))
        except Exception as e:  # noqa: BLE001 - any codec failure is reported per item
            return ItemResult(None, reasons, f"{type(e).__name__}: {e}", len(data))
        action = "re-encoded" if info.format == "jpeg" else "transcoded"
        return ItemResult(payload, reasons, None, len(data), action, digest)

    def with_restarts(self, jpeg):
        """``jpeg`` with restart markers (lossless), or None: no policy, or a JPEG that cannot
        take them (progressive, or libjpeg reads it with warnings: kept as it is)."""
        return None if self._restart is None else add_restarts(jpeg, self._restart)

    def reencode(self, data, info):
        cv2 = load_cv2()
        opts = self.options
        plain_jpeg = (info.format == "jpeg" and info.width and opts.color in (0, 1)
                      and not info.cmyk and info.exif_orientation in (None, 1))
        scale = 1
        if plain_jpeg and not opts.exact:
            scale = reduced_scale(info.height, info.width, opts.resize, opts.center_crop)
        if scale == 1:
            # exact: OpenCV's own decode, the pixels im2rec's cv2.imread gets
            img = (_decode_simplejpeg(data, opts.color) if plain_jpeg and not opts.exact
                   else None)
            if img is None:
                img = imdecode(data, opts.color, what="file")
            return crop_resize_encode(img, center=opts.center_crop, resize=opts.resize,
                                      quality=opts.quality, encoding=opts.encoding,
                                      restart=self.encoder_restarts())
        img = imdecode(data, _REDUCED_FLAGS[scale][opts.color], what="file")
        width, height = target_size(info.height, info.width, opts.resize, opts.center_crop)
        if opts.center_crop:
            img = center_crop(img)
        img = cv2.resize(img, (width, height), interpolation=cv2.INTER_LINEAR)
        return encode_with_restarts(img, opts.quality, opts.encoding, self.encoder_restarts())

    def encoder_restarts(self):
        """The restart policy a re-encoding writes in the same pass (the markers cost nothing
        there, where adding them afterwards is a second, lossless transcoding), or None: no
        policy, or no libjpeg extension to say the intervals (as ``with_restarts`` then adds
        none)."""
        return self._restart if self._restart is not None and restarts_available() else None

