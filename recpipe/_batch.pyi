"""Type stubs of recpipe's libjpeg extension (csrc/batch/batch.c): the native run decoder
(``fill``) and the region decoder (``decode_region``, csrc/jpeg/region.h).

``fill``'s ``options`` is a ``recpipe.decode.native.RunOptions``: the renderer's options first
(``recpipe._kernels.OPTION_FIELDS``: the planner's, then the renderer's), then the run's
(csrc/batch/options.h); ``OPTION_FIELDS`` is its field names in order (tests/decode/test_native.py
checks the two against each other). The pixels are rendered by csrc/kernels/render.h, the
renderer the Python path calls through ``recpipe._kernels``.
"""

from typing import Dict, List, Optional, Sequence, Tuple, Union

from typing_extensions import Buffer

from recpipe.decode.native import RunOptions

OPTION_FIELDS: Tuple[str, ...]
DRAW_SLOTS: Dict[str, int]
LIBJPEG_TURBO_VERSION: int  # where the headers were libjpeg-turbo's
JPEG_LIB_VERSION: int
PCA_NATIVE: int  # 1 when built with numpy's normal sampler (PCA lighting without the GIL)
PNG_NATIVE: int  # 1 when built with libpng (PNG records decoded in the run, csrc/png/png.h)

def fill(source: Union[int, Sequence[Tuple[Buffer, int]]], file_size: int, starts: Buffer,
         ends: Buffer, samples: Buffer, slots: Buffer, images: Buffer, labels: Buffer,
         status: Buffer, key_lo: int, key_hi: int, epoch: int, options: RunOptions,
         sums: Buffer = b"", label_ids: Buffer = b"", label_values: Buffer = b"") -> int:
    """Decode and render a run of records into batch slots without the GIL; returns how many
    samples were done.

    ``source``: a local .rec's file descriptor (records are ``pread``), or ``(window, base)``
    pairs, each a buffer of the file's bytes from offset ``base`` on. ``starts``/``ends``
    (int64): each record's byte span in the file of ``file_size`` bytes; ``samples`` (int64):
    each sample's index in the sampling order (it keys the random draws: numpy's
    ``Philox(key=(key_hi << 64) | key_lo, counter=[0, 0, sample, epoch])``); ``slots`` (int64):
    the slot each fills in ``images`` (uint8, float16 or float32, ``(C, H, W)`` when
    ``options.nchw``) and ``labels`` (float32, ``label_width`` a slot). ``status`` (uint8): 1
    for each sample done, 0 for each left to the caller (anything unusual; the Python path then
    decodes it or raises its precise error). ``sums`` (uint32, empty: none): each record's
    expected CRC32C; a record that does not match is left to the caller. ``label_ids`` (sorted
    uint64) and ``label_values`` (``label_width`` float32 a row): labels by the record's image
    id, with ``options.id_labels``.
    """

def uniforms(key_lo: int, key_hi: int, sample: int, epoch: int, count: int) -> List[float]:
    """The first ``count`` uniforms of the sample's random stream (for tests)."""

def decode_region(data: Buffer, scale_num: int, scale_den: int, x0: int, y0: int, x1: int,
                  y1: int, channels: int, fast_dct: bool, fast_upsample: bool, strict: bool,
                  max_bytes: int, check_rest: bool = ..., max_scans: int = ...,
                  restarts: bool = ...) -> Tuple[bytearray, int, int, int, int, int, int, int]:
    """``(pixels, height, width, depth, x, y, full_height, full_width)``: the part of a JPEG
    decoded at ``scale_num/scale_den`` that covers ``(x0, y0, x1, y1)`` (scaled coordinates;
    ``x1``/``y1`` < 0: to the edge), starting at scaled ``(x, y)``; only that part is decoded.
    ValueError with libjpeg's message on an error (and, with ``strict``, on a warning);
    ``check_rest`` reads the rest of the scan so that what a full decode would warn about
    raises too; ``max_scans`` (0: none) refuses streams with more scans; ``restarts`` (default
    True): a stream with restart intervals is decoded from the intervals the rectangle touches
    (same pixels). The GIL is released while libjpeg runs."""

def add_restarts(data: Buffer, rows: int = ..., mcus: int = ...,
                 optimize: bool = ...) -> Optional[bytes]:
    """``data`` (a JPEG) with restart intervals, losslessly: the DCT coefficients written back
    (and read back and compared), ``rows`` > 0 one interval every ``rows`` MCU rows, else the
    divisor of a row's MCU count nearest ``mcus`` (default 4); ``optimize`` (default True):
    optimal Huffman tables. None when the stream cannot take them (progressive, arithmetic,
    lossless, not 8-bit); ValueError on a libjpeg error or corrupt-data warning. The GIL is
    released while libjpeg runs."""

def restart_interval(width: int, components: int, max_h_samp: int, rows: int = ...,
                     mcus: int = ...) -> int:
    """The restart interval (MCUs) ``add_restarts`` gives an image ``width`` pixels wide with
    ``components`` components, the widest sampled ``max_h_samp`` times: 0 for none, -1 when a
    row is longer than a restart interval can count. ValueError for sizes no JPEG has."""

def restart_layout(data: Buffer) -> Optional[Tuple[int, int, int, int, int, int, int]]:
    """``(interval, mcus_per_row, mcu_rows, row_group, col_mcus, mcu_width, mcu_height)``: the
    restart intervals a region decode can use, or None."""

def normals(key_lo: int, key_hi: int, sample: int, epoch: int) -> Tuple[float, float, float]:
    """The 3 standard normals PCA lighting draws after the sample's uniforms (for tests; zeros
    when ``PCA_NATIVE`` is 0)."""
