"""Turning one image file into a record payload with im2rec's exact image semantics.

im2rec (``mxnet/tools/im2rec.py``) reads with ``cv2.imread(path, color)``, optionally crops the
central square, resizes the shorter edge to ``resize`` (other edge ``long*resize//short``,
bilinear) and re-encodes with ``cv2.imencode`` (JPEG quality, or PNG compression clamped to 9).
"""


from ..errors import DecodeError
from ..image.opencv import imdecode, load_cv2
from ..image.restart import encoder_interval
from ..io.format.header import IRHeader, pack

__all__ = ["center_crop", "crop_resize_encode", "decode_image", "encode_image",
           "encode_with_restarts", "make_header", "resize_shorter", "transcode"]


def make_header(index, labels, pack_label=False):
    """im2rec's header: all labels when ``pack_label`` and there are several, else the first."""
    if pack_label and len(labels) > 1:
        return IRHeader(0, list(labels), index, 0)
    return IRHeader(0, labels[0], index, 0)


def decode_image(data, color=1, *, path=None):
    """Decode file bytes like ``cv2.imread(path, color)``: BGR (or gray) uint8 array."""
    return imdecode(data, color, what="file", path=path)


def center_crop(img):
    """The central square of side ``min(h, w)``."""
    h, w = img.shape[:2]
    if h > w:
        margin = (h - w) // 2
        return img[margin:margin + w]
    margin = (w - h) // 2
    return img[:, margin:margin + h]


def resize_shorter(img, size, interpolation=None):
    """Resize so the shorter edge is ``size``; the other is ``long * size // short``."""
    cv2 = load_cv2()
    h, w = img.shape[:2]
    new_size = (size, h * size // w) if h > w else (w * size // h, size)
    return cv2.resize(img, new_size, interpolation=cv2.INTER_LINEAR if interpolation is None
                      else interpolation)


def encode_image(img, quality=95, encoding=".jpg", restart_interval=0, optimize=False):
    """Encode like ``mx.recordio.pack_img``: JPEG quality, or PNG compression clamped to 0..9.

    ``restart_interval`` > 0 (JPEG only): restart markers every that many MCUs, written by the
    encoder at 4:2:0 (OpenCV's default sampling, named so a build with another default cannot
    move the intervals), and ``optimize``: optimal Huffman tables - the JPEG
    ``image.restart.add_restarts`` makes of the plain encoding, in one pass."""
    cv2 = load_cv2()
    if encoding in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
        if restart_interval > 0:
            params += [cv2.IMWRITE_JPEG_RST_INTERVAL, restart_interval,
                       cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
        if optimize:
            params += [cv2.IMWRITE_JPEG_OPTIMIZE, 1]
    elif encoding == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, min(max(quality, 0), 9)]
    else:
        raise ValueError(f"unsupported encoding {encoding!r}: use .jpg or .png")
    ok, buf = cv2.imencode(encoding, img, params)
    if not ok:
        raise DecodeError(f"OpenCV could not encode the image as {encoding}")
    return buf.tobytes()


def crop_resize_encode(img, *, center=False, resize=0, quality=95, encoding=".jpg",
                       restart=None):
    """im2rec's steps on a decoded image: central square, shorter edge to ``resize``, encode;
    ``restart`` (a ``RestartPolicy``, JPEG only): its restart markers written by the encoder."""
    if center:
        img = center_crop(img)
    if resize:
        img = resize_shorter(img, resize)
    return encode_with_restarts(img, quality, encoding, restart)


def encode_with_restarts(img, quality, encoding, restart):
    """``encode_image`` with ``restart``'s intervals and Huffman choice (None: neither)."""
    if restart is None or encoding not in (".jpg", ".jpeg"):
        return encode_image(img, quality, encoding)
    components = 1 if img.ndim == 2 or img.shape[2] == 1 else 3
    interval = encoder_interval(restart, img.shape[1], components)
    return encode_image(img, quality, encoding, restart_interval=interval,
                        optimize=restart.optimize)


def transcode(data, header, *, color=1, center=False, resize=0, quality=95, encoding=".jpg",
              path=None):
    """File bytes -> record payload, re-encoded with im2rec's semantics."""
    img = decode_image(data, color, path=path)
    return pack(header, crop_resize_encode(img, center=center, resize=resize, quality=quality,
                                           encoding=encoding))
