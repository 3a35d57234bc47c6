"""Type stubs of recpipe's kernel library (csrc/kernels/kernels_module.c): the renderer both
decode paths use (csrc/kernels/render.h), for the Python path, and the probes the tests compare
with OpenCV; RecordIO's framing, image header and label rules (csrc/record/record.h, which
recpipe._batch reads records with), for recpipe/io/format/framing.py, io/format/header.py and
decode/labels.py.

``prepare``'s ``options`` is a ``recpipe.decode.augment.render.RenderOptions``: the planner's
options, then the renderer's (csrc/kernels/render_fields.h); ``OPTION_FIELDS`` is its field
names in order.
"""

from typing import Dict, Tuple

from typing_extensions import Buffer

from recpipe.decode.augment.render import RenderOptions

OPTION_FIELDS: Tuple[str, ...]
DRAW_SLOTS: Dict[str, int]
RECORD_MAGIC: int
RECORD_HEAD: int
MAX_RECORD_SIZE: int
IMAGE_HEADER: int
HEADER_SHORT: int
HEADER_LABELS_PAST_END: int
LABELS_SCALAR: int
LABELS_PACKED: int
LABELS_NOT_SCALAR: int
LABELS_TOO_FEW: int

class Prepared:
    """A renderer prepared by ``prepare`` (a capsule: opaque)."""

def prepare(options: RenderOptions) -> Prepared:
    """``options`` parsed and validated once (TypeError/ValueError naming the field)."""

def render(prepared: Prepared, plan: bytes, pixels: Buffer, x: int, y: int, full_height: int,
           full_width: int, out: Buffer) -> bool:
    """One sample planned as ``plan`` (the C plan: ``SamplePlan.native``) rendered from
    ``pixels`` (uint8 ``(H, W)`` or ``(H, W, C)``, rows of any stride) into ``out`` (one
    C-contiguous slot of uint8, float16 or float32); the pixels are the window at (x, y) of a
    ``full_height x full_width`` decode, or the whole decode when ``full_height`` < 0. False:
    a combination rendered elsewhere (an affine warp with another interpolation than bilinear,
    an upscale past 16 Mpixels); ValueError when the pixels do not cover what the plan needs.
    The GIL is released while it renders."""

def finish(prepared: Prepared, plan: bytes, region: Buffer, out: Buffer) -> None:
    """The steps after the region (HLS shift, colour jitter, mirror, normalisation, layout) for
    an output-sized uint8 region made elsewhere, into ``out``; the GIL is released."""

def idx_lines(data: Buffer) -> int:
    """The lines of ``.idx`` bytes (its newlines, plus a last line without one): the length of
    the arrays ``parse_idx`` fills."""

def parse_idx(data: Buffer, keys: Buffer, offsets: Buffer, first: int = ...) -> int:
    """Plain ``key<TAB>offset`` lines of ``.idx`` bytes (lines ``first``.. of the file: a file
    may come in chunks cut at line ends) into the int64 buffers ``keys`` and ``offsets``
    (``idx_lines`` items each), without the GIL (csrc/index/idx_parse.h): 1 when every key is
    its line's number, 0 when not, -1 when the bytes are not exactly such lines (the text parse
    then names the bad line)."""

def colour_convert(code: int, pixels: Buffer, width: int) -> bytes:
    """Rows of ``width`` uint8 pixels converted as cv2.cvtColor does (code 0: RGB2HLS, 1:
    HLS2RGB; for tests)."""

def warp_affine(src: Buffer, height: int, width: int, channels: int,
                forward: Tuple[float, float, float, float, float, float], out_h: int, out_w: int,
                fill: int, lanes: int) -> bytes:
    """cv2.warpAffine (INTER_LINEAR, BORDER_CONSTANT) as recpipe computes it, in blocks of
    ``lanes`` columns (8, 16 or 32; recpipe's own: 16; for tests)."""

def interp(src_shape: Tuple[int, int, int], src: Buffer, dst_shape: Tuple[int, int], dst: Buffer,
           inv_x: float, inv_y: float, method: int, simd: bool = ...) -> bool:
    """True when ``src`` was resized into ``dst`` with cv2.resize's arithmetic
    (csrc/kernels/interp.h; ``simd`` False: its scalar loops only; for tests)."""

def decode_head(data: Buffer, pos: int) -> Tuple[int, int, int]:
    """``(magic, cflag, length)`` of the RecordIO part head at ``data[pos:pos + 8]`` (``pos`` < 0
    counts from the end); struct.error when ``data`` ends before the head."""

def padded(length: int) -> int:
    """``length`` rounded up to a multiple of 4: a part's bytes after its head."""

def image_header(payload: Buffer) -> Tuple[int, float, int, int, int]:
    """``(flag, label, id, id2, labels_end)``: the IRHeader at the start of ``payload``; the image
    starts at ``labels_end``. ``labels_end`` is ``HEADER_SHORT`` (the other fields zero) when the
    payload is shorter than the header, ``HEADER_LABELS_PAST_END`` when its flag announces more
    labels than it has."""

def label_rule(flag: int, label_width: int) -> int:
    """ImageRecordIter's labels of a header with ``flag``: ``LABELS_SCALAR`` (its one label),
    ``LABELS_PACKED`` (the first ``label_width`` packed labels), or ``LABELS_NOT_SCALAR`` /
    ``LABELS_TOO_FEW`` when the setting does not fit the record."""

def id_row(ids: Buffer, id: object) -> int:
    """The row of image id ``id`` in ``ids`` (an aligned, ascending uint64 buffer), or -1 when
    it is not there (also for an ``id`` that is no uint64)."""
