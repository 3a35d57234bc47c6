/*
 * recpipe._batch: a run of records of a local .rec file (or of the file's bytes the caller
 * fetched from any other source) decoded into batch slots in one call, without the GIL: read,
 * record and image header, label, plan, region decode at a DCT scale,
 * bilinear resize, mirror and normalisation, for the configurations recpipe's Augmenter renders
 * with its C kernels alone: an optional shorter-edge resize, then an output-sized crop (centre
 * or random) or a random-resized crop, brightness/contrast/saturation jitter, mirror and
 * normalisation (faces: a 112x112 record into a 112x112 slot; ImageNet's train and val). Every
 * sample is planned by csrc/plan/plan.h's plan_full, the one planner, which the Python path calls
 * too (recpipe._plan, from Planner.plan): this file derives what it needs from that plan and
 * has no planning of its own. decode_scale, decode_box and geometry.linear_axes are followed
 * step by step (same arithmetic), and the pixels are written by the same code as
 * recpipe._colour and recpipe._resize.
 *
 * fill(source, file_size, starts, ends, samples, slots, images, labels, status, key_lo, key_hi,
 *      epoch, options, sums=b"", label_ids=b"", label_values=b"") -> number of samples done
 *
 * ``source``: the file descriptor of a local .rec, whose records ``pread`` here, or a list of
 * ``(window, base)`` pairs, each a buffer holding the file's bytes from offset ``base`` on (a
 * remote file's prefetched requests, or records the caller read one by one): records are framed
 * as in the file and read as from the descriptor, each from the first window holding its whole
 * span; a record no window holds is left to the caller.
 * ``starts``/``ends`` (int64): the byte span of each record in the file (``file_size`` bytes);
 * ``samples`` (int64): each sample's index in the sampling order, which keys its random draws;
 * ``slots`` (int64): the batch slot each one fills in ``images`` (C-contiguous uint8 or float32
 * batch of slots of out_h x out_w x 3 values, (C, H, W) when nchw) and ``labels`` (float32,
 * label_width values a slot). ``status`` (uint8) receives 1 for each sample done and 0 for each
 * left to the caller: anything unusual (a multi-part or malformed record, a record the index
 * does not match, a non-JPEG or CMYK image, an image smaller than the output, over max_pixels,
 * any libjpeg error or warning in strict mode) is left to the Python path, which decodes it or
 * raises its precise error; nothing is reported from here. ``sums`` (uint32, empty: no check):
 * the expected CRC32C of each record's payload (recpipe.io.sums); a record whose payload does
 * not match is left to the Python path too, which raises its checksum error (``sum_matches``).
 *
 * ``options``: a recpipe.decode.native.RunOptions (a tuple; names in order in OPTION_FIELDS):
 * first the planner's options (Planner.options, parsed by csrc/plan/plan.h's PLAN_FIELDS: out_h,
 * out_w, resize, rand_crop, mirror, rand_mirror, rrc, min_area, max_area, aspect_low,
 * aspect_high, brightness, contrast, saturation, ...), then the run's, parsed by OPTION_TABLE
 * below (nchw, gains, offsets, label_width, fast_dct, fast_upsample, strict, max_pixels,
 * max_bytes, check_rest, max_scans, scales, ...), as recpipe's Augmenter and Decoder have them
 * (check_rest, max_scans: as
 * decode_region's; resize -1: none; rrc: random-resized crop with that area and aspect
 * range; colour jitter limits, 0: off; scales: bits 1, 2, 4 for the DCT scales 1/2,
 * 1/4, 1/8 the decoder offers). The random draws are those of numpy's
 * Philox(key=(key_hi << 64) | key_lo, counter=[0, 0, sample, epoch]) -> Generator.random(64)
 * (then standard_normal(3) with PCA lighting), read by the planner at its slots (DRAW_SLOTS,
 * csrc/plan/plan.h), so that pixels equal the Python path's.
 * With ``affine`` or ``pad`` (MXNet's affine step and pad: shear, angle, scale,
 * aspect and rotate_list index in slots 3..7) the image is decoded whole, warped and padded by
 * csrc/kernels/warp.h (geometric_into), then cropped and written as the Python path writes it.
 *
 * options.inter_method (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos-4, 9
 * auto, 10 drawn per resize from slots 0..2) picks how a resize the Python path hands to
 * cv2.resize is made: by csrc/kernels/interp.h (OpenCV's arithmetic, our code; bicubic as with
 * IPP off, as the Python path makes it); options.min_crop_size/max_crop_size (-1: off) draw a
 * random-size square crop (its side from slot 48); options.id_labels takes each sample's labels
 * from ``label_ids`` (ascending uint64 image ids) and ``label_values`` (label_width float32 a
 * row), looked up by the record header's id (an imglist's), an id not listed left to Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/chw_rows.h"
#include "common/crc32c.h"
#include "common/philox.h"
#include "common/pyargs.h"
#include "kernels/interp.h"
#include "plan/plan.h" /* the one planner: plan_full, the draw slots, the planning options */
#include "kernels/planes.h"
#include "kernels/resize.h"
#include "jpeg/roi.h"
#include "jpeg/region.h" /* decode_region: one JPEG region, in the method table */
#include "jpeg/restart_methods.h" /* add_restarts, restart_layout: in the method table */
#include "kernels/warp.h"

#include <math.h>

#define RECORD_MAGIC 0xced7230aU
#define IMAGE_HEADER 24        /* IRHeader: flag u32, label f32, id u64, id2 u64 */
#define MAX_RECORD (256u << 20) /* larger records go to the Python path */


#include "batch/options.h" /* the run contract: run_options, parsed from RunOptions */
#include "batch/staging.h"
#include "batch/colour_steps.h"

/* Per-thread buffers, kept between calls (a fresh 150 KB planes buffer per call is mapped and
 * zeroed by the kernel every time) and freed when the thread ends. */
typedef struct {
    unsigned char *record; /* the record's bytes */
    size_t record_cap;
    unsigned char *pixels; /* the decoded window */
    size_t pixels_cap;
    JSAMPROW *rows;
    size_t rows_cap;
    float *planes;         /* 3 x out_h x out_w */
    size_t planes_cap;
    unsigned char *region; /* out_h x out_w x 3: the resized crop before colour jitter */
    size_t region_cap;
    uint8_t *staged; /* a float16 sample's pixel values before conversion */
    size_t staged_cap;
    uint8_t *crop; /* the crop of the warped/padded image, out_h x out_w x 3 */
    size_t crop_cap;
} scratch;

#define KEEP_BYTES (4u << 20) /* a thread keeps at most this much of a buffer between calls */

static pthread_key_t scratch_key;

static void scratch_free(void *p)
{
    scratch *mem = p;
    if (mem == NULL)
        return;
    free(mem->record);
    free(mem->pixels);
    free(mem->rows);
    free(mem->planes);
    free(mem->region);
    free(mem->staged);
    free(mem->crop);
    free(mem);
}

static scratch *thread_scratch(void)
{
    scratch *mem = pthread_getspecific(scratch_key);
    if (mem == NULL) {
        mem = calloc(1, sizeof *mem);
        if (mem != NULL && pthread_setspecific(scratch_key, mem) != 0) {
            free(mem);
            mem = NULL;
        }
    }
    return mem;
}

/* Drop buffers an unusual sample made big, so that every thread stays small. */
static void scratch_trim(scratch *mem)
{
    if (mem->record_cap > KEEP_BYTES) {
        free(mem->record);
        mem->record = NULL;
        mem->record_cap = 0;
    }
    if (mem->pixels_cap > KEEP_BYTES) {
        free(mem->pixels);
        mem->pixels = NULL;
        mem->pixels_cap = 0;
    }
}

/* --- reading ------------------------------------------------------------------------------- */

static int grow(void **buffer, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    void *bigger = realloc(*buffer, need);
    if (bigger == NULL)
        return -1;
    *buffer = bigger;
    *cap = need;
    return 0;
}

static int read_span(int fd, unsigned char *into, size_t length, int64_t offset)
{
    size_t got = 0;
    while (got < length) {
        ssize_t n = pread(fd, into + got, length - got, (off_t)(offset + (int64_t)got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float le_float(const unsigned char *p)
{
    uint32_t bits = le32(p);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* The payload of the single-part record filling ``span`` bytes (a following record head may
 * end it); NULL for anything the Python path must look at. */
static const unsigned char *payload_of(const unsigned char *record, size_t span, size_t *length)
{
    if (span < 8)
        return NULL;
    uint32_t magic = le32(record), word = le32(record + 4);
    uint32_t cflag = word >> 29, size = word & ((1u << 29) - 1);
    size_t next = 8 + (((size_t)size + 3) & ~(size_t)3);
    if (magic != RECORD_MAGIC || cflag != 0 || next > span)
        return NULL;
    if (next < span) { /* the index's next offset is further: a record head must follow */
        if (next + 8 > span || le32(record + next) != RECORD_MAGIC
            || (le32(record + next + 4) >> 29) > 1)
            return NULL;
    }
    *length = size;
    return record + 8;
}

/* How many bytes of the ``span`` at ``start`` ``payload_of`` looks at: the record its head
 * announces and the head after it, not the whole span (unindexed records may follow the record
 * up to the next indexed offset). Small spans are read whole in one call; 0 on a read error. */
static size_t record_extent(int fd, int64_t start, size_t span)
{
    unsigned char head[8];
    if (span <= (64u << 10))
        return span;
    if (read_span(fd, head, sizeof head, start))
        return 0;
    size_t size = le32(head + 4) & ((1u << 29) - 1);
    size_t extent = 8 + ((size + 3) & ~(size_t)3) + 8;
    return extent < span ? extent : span;
}

/* Labels into ``out`` (label_width floats) by ImageRecordIter's rules; -1: Python's to say. */
static int labels_of(const unsigned char *payload, size_t length, long label_width, float *out,
                     size_t *image_at)
{
    if (length < IMAGE_HEADER)
        return -1;
    uint32_t flag = le32(payload);
    if (flag == 0) {
        if (label_width != 1)
            return -1;
        out[0] = le_float(payload + 4);
        *image_at = IMAGE_HEADER;
        return 0;
    }
    if ((size_t)flag > (length - IMAGE_HEADER) / 4 || (long)flag < label_width)
        return -1;
    for (long i = 0; i < label_width; i++)
        out[i] = le_float(payload + IMAGE_HEADER + 4 * i);
    *image_at = IMAGE_HEADER + 4 * (size_t)flag;
    return 0;
}

/* --- writing a slot ------------------------------------------------------------------------- */

/* The out_h x out_w crop starting ``left`` pixels into each decoded row, into the slot. */
static void write_crop(const run_options *opt, scratch *mem, const unsigned char *pixels,
                       size_t stride, size_t left, int mirror, void *dst)
{
    Py_ssize_t h = opt->out_h, w = opt->out_w, n = h * w;
    if (opt->nchw && opt->is_float) { /* the common case (faces): one pass, mirror fused */
        chw_rows rows = {dst, (size_t)n, (long)w, mirror,
                         {opt->gains[0], opt->gains[1], opt->gains[2]},
                         {opt->offsets[0], opt->offsets[1], opt->offsets[2]}};
        chw_float_rows(&rows, pixels + 3 * left, stride, (long)h);
        return;
    }
    for (Py_ssize_t y = 0; y < h; y++)
        to_planes(pixels + stride * (size_t)y + 3 * left, mem->planes + y * w,
                  mem->planes + n + y * w, mem->planes + 2 * n + y * w, w);
    plane_target target = {h, w, dst, opt->is_float, mirror, opt->nchw, {0}, {0}};
    memcpy(target.gains, opt->gains, sizeof target.gains);
    memcpy(target.offsets, opt->offsets, sizeof target.offsets);
    write_planes(mem->planes, &target);
}

/* --- one sample ---------------------------------------------------------------------------- */

/* --- planning: csrc/plan/plan.h's plan, then geometry step by step --------------------------- */

typedef struct {
    long src_h, src_w, res_h, res_w; /* the image, and after the resize step */
    long x, y, w, h;                 /* the crop, in the resized image */
    int resize_crop, mirror;         /* the crop is resized to the output (random-resized) */
    int inter[3];                    /* resize step, affine, crop: 0-4 or 9 (auto) */
    unsigned den;                    /* DCT scale 1/den */
    long full_h, full_w;             /* the image decoded at that scale */
} sample_plan;

/* The sample_plan of a sample planned without affine step or pad (the crop is in the resized
 * image); -1 when the plan upscales the image (the Python path's). */
static int sample_plan_of(const full_plan *fp, sample_plan *p)
{
    if (fp->upscale)
        return -1;
    p->src_h = fp->src_h;
    p->src_w = fp->src_w;
    p->res_h = fp->res_h;
    p->res_w = fp->res_w;
    p->x = fp->x;
    p->y = fp->y;
    p->w = fp->w;
    p->h = fp->h;
    p->resize_crop = fp->resize_crop;
    p->mirror = fp->mirror;
    memcpy(p->inter, fp->inter, sizeof p->inter);
    return 0;
}

static long ceil_div(long a, long b)
{
    return (a + b - 1) / b;
}

/* geometry.decode_scale: the smallest offered scale keeping the crop at output resolution. */
static unsigned dct_scale(const run_options *opt, const sample_plan *p)
{
    double sx = (double)p->res_w / (double)p->src_w, sy = (double)p->res_h / (double)p->src_h;
    double x0 = (double)p->x / sx, y0 = (double)p->y / sy;
    double x1 = (double)(p->x + p->w) / sx, y1 = (double)(p->y + p->h) / sy;
    double need_w = (double)opt->out_w / (x1 - x0), need_h = (double)opt->out_h / (y1 - y0);
    static const unsigned dens[3] = {8, 4, 2};
    static const int bits[3] = {4, 2, 1};
    for (int i = 0; i < 3; i++) {
        if (!(opt->scales & bits[i]))
            continue;
        double f_w = (double)ceil_div(p->src_w, dens[i]) / (double)p->src_w;
        double f_h = (double)ceil_div(p->src_h, dens[i]) / (double)p->src_h;
        if (f_w >= need_w && f_h >= need_h)
            return dens[i];
    }
    return 1;
}

/* geometry.mapped_box: the crop's source box on a full_h x full_w decode, whole pixels. */
static void mapped_box(const sample_plan *p, long full_h, long full_w, long box[4])
{
    double sx = (double)p->res_w / (double)p->src_w, sy = (double)p->res_h / (double)p->src_h;
    double x0 = (double)p->x / sx, y0 = (double)p->y / sy;
    double x1 = (double)(p->x + p->w) / sx, y1 = (double)(p->y + p->h) / sy;
    double fy = (double)full_h / (double)p->src_h, fx = (double)full_w / (double)p->src_w;
    long left = (long)nearbyint(x0 * fx), top = (long)nearbyint(y0 * fy);
    left = left < 0 ? 0 : (left > full_w - 1 ? full_w - 1 : left);
    top = top < 0 ? 0 : (top > full_h - 1 ? full_h - 1 : top);
    long right = (long)nearbyint(x1 * fx), bottom = (long)nearbyint(y1 * fy);
    right = right < full_w ? right : full_w;
    bottom = bottom < full_h ? bottom : full_h;
    box[0] = left;
    box[1] = top;
    box[2] = right > left + 1 ? right : left + 1;
    box[3] = bottom > top + 1 ? bottom : top + 1;
}

/* resize.taps_span: the source pixels [first, end) that ``size`` outputs read. */
static void taps_span(long size, long shift, double scale, long length, long *first, long *end)
{
    long a = (long)floor(((double)shift + 0.5) * scale - 0.5);
    long b = (long)floor(((double)(size - 1 + shift) + 0.5) * scale - 0.5) + 1;
    *first = a - 1 > 0 ? a - 1 : 0;
    *end = b + 2 < length ? b + 2 : length;
}

/* geometry.decode_box with the resize kernel on: the pixels of the decode rendering reads. */
static void decode_box(const sample_plan *p, long box[4])
{
    if (p->den == 1 && p->res_h == p->src_h && p->res_w == p->src_w) {
        box[0] = p->x;
        box[1] = p->y;
        box[2] = p->x + p->w;
        box[3] = p->y + p->h;
    } else if (!p->resize_crop) {
        taps_span(p->h, p->y, (double)p->full_h / (double)p->res_h, p->full_h, &box[1], &box[3]);
        taps_span(p->w, p->x, (double)p->full_w / (double)p->res_w, p->full_w, &box[0], &box[2]);
    } else {
        mapped_box(p, p->full_h, p->full_w, box);
    }
}

/* geometry.linear_axes for a window starting at (wx, wy) of the decode. */
static void linear_axes(const run_options *opt, const sample_plan *p, long wx, long wy,
                        axis_spec *ya, axis_spec *xa)
{
    int resized = p->res_h != p->src_h || p->res_w != p->src_w;
    int full_is_source = p->full_h == p->src_h && p->full_w == p->src_w;
    if (!p->resize_crop && (resized || !full_is_source)) {
        *ya = (axis_spec){-wy, p->full_h, (double)p->y, (double)p->full_h / (double)p->res_h};
        *xa = (axis_spec){-wx, p->full_w, (double)p->x, (double)p->full_w / (double)p->res_w};
    } else if (p->resize_crop && (!full_is_source || resized)) {
        long box[4];
        mapped_box(p, p->full_h, p->full_w, box);
        long bh = box[3] - box[1], bw = box[2] - box[0];
        *ya = (axis_spec){box[1] - wy, bh, 0.0, (double)bh / (double)opt->out_h};
        *xa = (axis_spec){box[0] - wx, bw, 0.0, (double)bw / (double)opt->out_w};
    } else {
        *ya = (axis_spec){p->y - wy, p->h, 0.0, (double)p->h / (double)opt->out_h};
        *xa = (axis_spec){p->x - wx, p->w, 0.0, (double)p->w / (double)opt->out_w};
    }
}

/* Augmenter's unscaled region: the axes copy an output-sized part of the window one to one. */
static int one_to_one(const run_options *opt, const axis_spec *ya, const axis_spec *xa,
                      long win_h, long win_w)
{
    return opt->channels == 3 && ya->scale == 1.0 && xa->scale == 1.0 && ya->shift == 0.0
           && xa->shift == 0.0
           && ya->length == opt->out_h && xa->length == opt->out_w && ya->offset >= 0
           && xa->offset >= 0 && ya->offset + opt->out_h <= win_h
           && xa->offset + opt->out_w <= win_w;
}

/* The bilinear resize of the window into an out_h x out_w ``dst`` (recpipe._resize's code):
 * a batch slot (``to_slot``: the slot's layout, type, mirror and normalisation) or a plain
 * uint8 (H, W, C) region; -1 when a tap falls outside the window (Python raises its error). */
static int resize_into(const run_options *opt, const unsigned char *pixels, long win_h,
                       long win_w, const axis_spec *ya, const axis_spec *xa, int mirror,
                       void *dst, int to_slot)
{
    resize_job j = {0};
    j.src = pixels;
    j.height = win_h;
    j.width = win_w;
    j.channels = opt->channels;
    j.dst = dst;
    j.out_h = opt->out_h;
    j.out_w = opt->out_w;
    if (to_slot) {
        j.is_float = opt->is_float;
        j.mirror = mirror;
        j.nchw = opt->nchw;
        memcpy(j.gains, opt->gains, sizeof j.gains);
        memcpy(j.offsets, opt->offsets, sizeof j.offsets);
    } else {
        for (int c = 0; c < 3; c++)
            j.gains[c] = 1.f;
    }
    int status = resize_prepare(&j, ya, xa);
    if (status == 0)
        resize_run(&j);
    resize_release(&j);
    return status == 0 ? 0 : -1;
}

/* The plan's colour jitter as the colour kernel's ops (factors in float32). Returns how many. */
static int colour_ops_of(const full_plan *fp, colour_op ops[3])
{
    for (int i = 0; i < fp->n_colour; i++) {
        ops[i].op = fp->colour_op[i];
        ops[i].alpha = (float)fp->colour_alpha[i];
    }
    return fp->n_colour;
}

static int colour_region(const run_options *opt, scratch *mem, const sample_plan *plan,
                         const full_plan *fp, const float *pca, void *dst);

/* Renderer's region path: the crop resized into a uint8 region, then colour_region. */
static int jitter_into(const run_options *opt, scratch *mem, const unsigned char *pixels,
                       long win_h, long win_w, const axis_spec *ya, const axis_spec *xa,
                       const sample_plan *plan, const full_plan *fp, const float *pca,
                       void *dst)
{
    Py_ssize_t n = (Py_ssize_t)opt->out_h * opt->out_w;
    if (grow((void **)&mem->region, &mem->region_cap, (size_t)n * 3)
        || resize_into(opt, pixels, win_h, win_w, ya, xa, 0, mem->region, 0))
        return -1;
    return colour_region(opt, mem, plan, fp, pca, dst);
}

/* mem->region (out_h x out_w x 3) HLS-shifted, then either written as it is (uint8 values: HLS
 * alone) or colour-jittered and PCA-lit as planes, then mirrored, normalised and written
 * (recpipe._colour's code). ``pca``: NULL for none. */
static int colour_region(const run_options *opt, scratch *mem, const sample_plan *plan,
                         const full_plan *fp, const float *pca, void *dst)
{
    Py_ssize_t n = (Py_ssize_t)opt->out_h * opt->out_w;
    if (fp->has_hls)
        shift_hls(mem->region, opt->out_h, opt->out_w, fp->hls[0], fp->hls[1], fp->hls[2]);
    colour_op ops[3];
    int n_ops = colour_ops_of(fp, ops);
    if (n_ops == 0 && pca == NULL) { /* HLS alone: the uint8 values (Renderer._write) */
        write_crop(opt, mem, mem->region, (size_t)opt->out_w * 3, 0, plan->mirror, dst);
        return 0;
    }
    to_planes(mem->region, mem->planes, mem->planes + n, mem->planes + 2 * n, n);
    colour_planes(mem->planes, n, ops, n_ops, pca);
    if (opt->is_half) { /* float16: the jittered values through OpenCV's arithmetic */
        write_half_planes(mem->planes, opt, plan->mirror, dst);
        return 0;
    }
    plane_target target = {opt->out_h, opt->out_w, dst, opt->is_float, plan->mirror, opt->nchw,
                           {0}, {0}};
    memcpy(target.gains, opt->gains, sizeof target.gains);
    memcpy(target.offsets, opt->offsets, sizeof target.offsets);
    write_planes(mem->planes, &target);
    return 0;
}

/* --- the resizes the Python path hands to cv2.resize (kernels/interp.h) ---------------------- */

/* geometry.resolve_inter: MXNet's automatic choice (9) by the sizes; the others as they are. */
static int resolve_inter(int method, long old_h, long old_w, long new_h, long new_w)
{
    if (method != 9)
        return method;
    if (new_h > old_h && new_w > old_w)
        return INTERP_CUBIC;
    if (new_h < old_h && new_w < old_w)
        return INTERP_AREA;
    return INTERP_LINEAR;
}

/* geometry.aligned_axis (budget 48): the part [first, end) of a ``full`` axis a crop of
 * [start, start + length) of its ``resized`` resize needs, starting at resized pixel k. */
static void aligned_axis(long start, long length, long full, long resized, long *first,
                         long *end, long *k)
{
    double step = (double)full / (double)resized, best = 1.0;
    long at = 0, best_k = 0;
    long low = start - 3 - (long)(48.0 / step);
    low = low > 0 ? low : 0;
    for (long cand = start - 3; cand >= low; cand--) {
        double pos = (double)cand * step, rounded = nearbyint(pos); /* Python's round */
        double err = fabs(rounded - pos);
        if (err < best) {
            at = (long)rounded;
            best_k = cand;
            best = err;
            if (err < 0.01)
                break;
        }
    }
    long last = at + (long)ceil((double)(start - best_k + length) * step) + 3;
    *first = at;
    *k = best_k;
    *end = last < full ? last : full;
}

/* Which cv2.resize Renderer._region gives the sample: kind 0 none (the bilinear C kernel or a
 * plain copy), 1 the resize step then the crop (_aligned_region: box is the part of the decode
 * it resizes, kx/ky where that part starts in the resized image), 2 the crop's box resized to
 * the output (_scaled_region / _exact_region). ``method``: resolved (0-4). */
typedef struct {
    int kind, method;
    long box[4]; /* x0, y0, x1, y1 in the full_h x full_w decode */
    long kx, ky;
} interp_plan;

static void plan_interp(const run_options *opt, const sample_plan *p, interp_plan *ip)
{
    int resized = p->res_h != p->src_h || p->res_w != p->src_w;
    int full_is_source = p->full_h == p->src_h && p->full_w == p->src_w;
    ip->kind = 0;
    if (!p->resize_crop && (resized || !full_is_source)) {
        ip->method = resolve_inter(p->inter[0], p->full_h, p->full_w, p->res_h, p->res_w);
        if (ip->method == INTERP_LINEAR)
            return;
        ip->kind = 1;
        aligned_axis(p->x, p->w, p->full_w, p->res_w, &ip->box[0], &ip->box[2], &ip->kx);
        aligned_axis(p->y, p->h, p->full_h, p->res_h, &ip->box[1], &ip->box[3], &ip->ky);
    } else if (p->resize_crop) {
        if (!full_is_source || resized) {
            mapped_box(p, p->full_h, p->full_w, ip->box);
        } else {
            ip->box[0] = p->x;
            ip->box[1] = p->y;
            ip->box[2] = p->x + p->w;
            ip->box[3] = p->y + p->h;
        }
        ip->method = resolve_inter(p->inter[2], ip->box[3] - ip->box[1], ip->box[2] - ip->box[0],
                                   opt->out_h, opt->out_w);
        ip->kind = ip->method == INTERP_LINEAR ? 0 : 2;
    }
}

/* Renderer._scaled_region: ``box`` (full decode coordinates) of the window resized to the
 * output into mem->region with ``method`` (unresolved); -1 to leave it to Python. */
static int scaled_region(const run_options *opt, scratch *mem, const long box[4], int method,
                         const unsigned char *pixels, size_t stride, long wx, long wy,
                         long win_h, long win_w)
{
    long left = box[0] - wx, top = box[1] - wy, right = box[2] - wx, bottom = box[3] - wy;
    if (left < 0 || top < 0 || right > win_w || bottom > win_h)
        return -1;
    long bh = bottom - top, bw = right - left;
    method = resolve_inter(method, bh, bw, opt->out_h, opt->out_w);
    return interp_resize(pixels + stride * (size_t)top + 3 * (size_t)left, stride, (int)bw,
                         (int)bh, 3, mem->region, 3 * (size_t)opt->out_w, (int)opt->out_w,
                         (int)opt->out_h, (double)opt->out_w / (double)bw,
                         (double)opt->out_h / (double)bh, method);
}

/* Renderer._aligned_region into mem->region: 0 done, 1 not aligned (the scaled region then), -1
 * left to Python. */
static int aligned_region(const run_options *opt, scratch *mem, const sample_plan *p,
                          const interp_plan *ip, const unsigned char *pixels, size_t stride,
                          long wx, long wy, long win_h, long win_w)
{
    long left = ip->box[0] - wx, top = ip->box[1] - wy, right = ip->box[2] - wx,
         bottom = ip->box[3] - wy;
    if (left < 0 || top < 0 || right > win_w || bottom > win_h)
        return 1;
    double fx = (double)p->res_w / (double)p->full_w, fy = (double)p->res_h / (double)p->full_h;
    long pw = right - left, ph = bottom - top;
    int dw = interp_size_by((int)pw, fx), dh = interp_size_by((int)ph, fy);
    if (dw < 1 || dh < 1)
        return -1; /* cv2.resize refuses an empty size */
    long x = p->x - ip->kx, y = p->y - ip->ky;
    if (x < 0 || y < 0 || x + opt->out_w > dw || y + opt->out_h > dh)
        return 1;
    unsigned char *part = malloc((size_t)dw * (size_t)dh * 3);
    if (part == NULL)
        return -1;
    int status = interp_resize(pixels + stride * (size_t)top + 3 * (size_t)left, stride, (int)pw,
                               (int)ph, 3, part, 3 * (size_t)dw, dw, dh, fx, fy, ip->method);
    for (long row = 0; status == 0 && row < opt->out_h; row++)
        memcpy(mem->region + 3 * (size_t)(row * opt->out_w),
               part + 3 * ((size_t)(y + row) * (size_t)dw + (size_t)x), 3 * (size_t)opt->out_w);
    free(part);
    return status;
}

/* mem->region written into the slot as Renderer._write or _write_float_path does. */
static int write_region(const run_options *opt, scratch *mem, const sample_plan *plan,
                        const full_plan *fp, void *dst)
{
    size_t stride = 3 * (size_t)opt->out_w, n = (size_t)opt->out_h * (size_t)opt->out_w;
    if (fp->n_colour > 0) {
        return colour_region(opt, mem, plan, fp, NULL, dst);
    }
    if (!opt->is_float) { /* uint8 (and float16's staged values): mirrored, laid out */
        write_crop(opt, mem, mem->region, stride, 0, plan->mirror, dst);
        return 0;
    }
    /* float32: cv2's writers (Renderer._write) through csrc/kernels/warp.h's per-value tables */
    run_options unit = half_staging(opt);
    float table[3][256], tail[3][256];
    if (grow((void **)&mem->staged, &mem->staged_cap, 3 * n))
        return -1;
    write_crop(&unit, mem, mem->region, stride, 0, plan->mirror, mem->staged);
    float_table(opt->gains, opt->offsets, opt->exact_gains, opt->nchw, table, tail);
    floats_of(mem->staged, dst, (long)n, opt->nchw, opt->channels,
              (const float(*)[256])table, (const float(*)[256])tail);
    return 0;
}

/* The sample's cv2.resize (``ip``, kind 1 or 2) and the rest of its rendering; -1: Python's. */
static int interp_into(const run_options *opt, scratch *mem, const sample_plan *p,
                       const interp_plan *ip, const full_plan *fp, const unsigned char *pixels,
                       size_t stride, long wx, long wy, long win_h, long win_w, void *dst)
{
    if (grow((void **)&mem->region, &mem->region_cap,
             3 * (size_t)opt->out_h * (size_t)opt->out_w))
        return -1;
    int status;
    if (ip->kind == 2) {
        status = scaled_region(opt, mem, ip->box, p->inter[2], pixels, stride, wx, wy, win_h,
                               win_w);
    } else {
        status = aligned_region(opt, mem, p, ip, pixels, stride, wx, wy, win_h, win_w);
        if (status == 1) {
            long box[4];
            mapped_box(p, p->full_h, p->full_w, box);
            status = scaled_region(opt, mem, box, p->inter[0], pixels, stride, wx, wy, win_h,
                                   win_w);
        }
    }
    return status == 0 ? write_region(opt, mem, p, fp, dst) : -1;
}

/* --- one sample ---------------------------------------------------------------------------- */

typedef struct {
    const run_options *opt;
    scratch *mem;
    const uint64_t *key;
    uint64_t epoch;
    roi_job job;
    double contrast, illumination; /* the last sample's plan: MXNet's normalisation jitter */
} sample_ctx;

/* Renderer._full_image_crop for MXNet's affine step and pad (no resize step, no
 * upscaling, a plain output-sized crop), then mirror, colour jitter and normalisation as the
 * Python path writes them (Renderer._write / _write_float_path). The image is decoded whole
 * (geometry.decode_box: None). 0 when done, -1 to leave the sample to Python. */
static int geometric_into(sample_ctx *ctx, const full_plan *fp, long rows, long cols, void *dst)
{
    const run_options *opt = ctx->opt;
    scratch *mem = ctx->mem;
    roi_job *job = &ctx->job;
    double forward[6];
    long work_h = rows, work_w = cols;
    if (fp->affine) {
        warp_forward(fp->matrix, forward);
        work_h = fp->affine_h;
        work_w = fp->affine_w;
    }
    if (work_h > 65535 || work_w > 65535 || fp->upscale || fp->resize_crop)
        return -1; /* upscaling (or a warp OpenCV refuses, or a resized crop): Python's */
    long x = fp->x, y = fp->y;
    int mirror = fp->mirror;
    job->scale_num = 1;
    job->scale_den = 1;
    job->x0 = 0;
    job->y0 = 0;
    job->x1 = cols;
    job->y1 = rows;
    if (roi_guarded(job, roi_begin) != 0 || job->out_x != 0 || job->out_y != 0
        || (long)job->out_w != cols || (long)job->out_h != rows)
        return -1;
    size_t stride = (size_t)cols * 3, n = (size_t)opt->out_h * (size_t)opt->out_w;
    if (grow((void **)&mem->pixels, &mem->pixels_cap, stride * (size_t)rows)
        || grow((void **)&mem->rows, &mem->rows_cap, sizeof(JSAMPROW) * (size_t)rows)
        || grow((void **)&mem->crop, &mem->crop_cap, n * 3)
        || grow((void **)&mem->staged, &mem->staged_cap, n * 3))
        return -1;
    job->pixels = mem->pixels;
    job->rows = mem->rows;
    job->borrowed_rows = 1;
    if (roi_guarded(job, roi_read) != 0)
        return -1;
    work_crop(mem->pixels, rows, cols, fp->affine ? forward : NULL, work_h, work_w,
              opt->plan.pad, x, y, opt->out_h, opt->out_w, (uint8_t)opt->fill, opt->warp_lanes,
              mem->crop);
    size_t crop_stride = (size_t)opt->out_w * 3;
    if (fp->has_hls) /* Renderer.apply: the region HLS-shifted before jitter and writing */
        shift_hls(mem->crop, opt->out_h, opt->out_w, fp->hls[0], fp->hls[1], fp->hls[2]);
    if (fp->n_colour > 0) {
        colour_op ops[3];
        int n_ops = colour_ops_of(fp, ops);
        to_planes(mem->crop, mem->planes, mem->planes + n, mem->planes + 2 * n, (Py_ssize_t)n);
        colour_planes(mem->planes, (Py_ssize_t)n, ops, n_ops, NULL);
        plane_target target = {opt->out_h, opt->out_w, dst, opt->is_float, mirror, opt->nchw,
                               {0}, {0}};
        memcpy(target.gains, opt->gains, sizeof target.gains);
        memcpy(target.offsets, opt->offsets, sizeof target.offsets);
        write_planes(mem->planes, &target);
    } else if (opt->is_float) { /* cv2's float32 writers: uint8, then their values */
        run_options unit = half_staging(opt);
        float table[3][256], tail[3][256];
        write_crop(&unit, mem, mem->crop, crop_stride, 0, mirror, mem->staged);
        float_table(opt->gains, opt->offsets, opt->exact_gains, opt->nchw, table, tail);
        floats_of(mem->staged, dst, (long)n, opt->nchw, opt->channels,
                  (const float(*)[256])table, (const float(*)[256])tail);
    } else {
        write_crop(opt, mem, mem->crop, crop_stride, 0, mirror, dst);
    }
    return 0;
}

/* Decode ``data`` into ``dst`` (one slot); 0 when done, -1 to leave it to Python. */
static int decode_into(sample_ctx *ctx, const unsigned char *data, size_t size, uint64_t sample,
                       void *dst)
{
    const run_options *opt = ctx->opt;
    scratch *mem = ctx->mem;
    roi_job *job = &ctx->job;
    int status = -1;
    double u[N_UNIFORM], normals[3] = {0.0, 0.0, 0.0};
    full_plan fp;
    sample_plan plan;

    if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF)
        return -1;
    memset(job, 0, sizeof *job);
    roi_init_errors(job);
    job->data = data;
    job->size = size;
    job->fast_dct = opt->fast_dct;
    job->fast_upsample = opt->fast_upsample;
    job->strict = job->err.strict = opt->strict;
    job->check_rest = opt->check_rest;
    job->max_scans = (unsigned)opt->max_scans;
    job->max_bytes = opt->max_bytes;
    job->channels = (int)opt->channels;
    if (roi_guarded(job, roi_header) != 0 || job->depth != opt->channels)
        goto done;
    long rows = (long)job->cinfo.image_height, cols = (long)job->cinfo.image_width;
    if (rows <= 0 || cols <= 0)
        goto done;
    if (opt->max_pixels && (unsigned long long)rows * (unsigned long long)cols > opt->max_pixels)
        goto done;
    philox_uniforms(ctx->key, sample, ctx->epoch, u, N_UNIFORM);
    if (opt->plan.pca_noise > 0)
        pca_normals(ctx->key, sample, ctx->epoch, normals);
    if (plan_full(&opt->plan, u, normals, rows, cols, &fp) != PLAN_OK)
        goto done; /* the Python path raises its error */
    ctx->contrast = fp.contrast;
    ctx->illumination = fp.illumination;
    run_options local; /* the sample's own gains and offsets (MXNet's contrast/illumination) */
    if (has_norm_jitter(opt)) {
        local = *opt;
        norm_terms(opt, fp.contrast, fp.illumination, &local);
        opt = &local;
    }
    if (opt->plan.affine || opt->plan.pad) { /* MXNet's affine step and pad: warped and/or padded */
        status = geometric_into(ctx, &fp, rows, cols, dst);
        goto done;
    }
    if (sample_plan_of(&fp, &plan) != 0)
        goto done; /* upscaling: the Python path's */
    plan.den = dct_scale(opt, &plan);
    plan.full_h = ceil_div(rows, plan.den);
    plan.full_w = ceil_div(cols, plan.den);
    long box[4];
    interp_plan ip;
    decode_box(&plan, box);
    plan_interp(opt, &plan, &ip);
    if (ip.kind == 1)
        memcpy(box, ip.box, sizeof box);
    job->scale_num = 1;
    job->scale_den = plan.den;
    job->x0 = box[0];
    job->y0 = box[1];
    job->x1 = box[2];
    job->y1 = box[3];
    if (roi_guarded(job, roi_begin) != 0 || (long)job->full_h != plan.full_h
        || (long)job->full_w != plan.full_w)
        goto done;
    size_t stride = (size_t)job->out_w * (size_t)opt->channels;
    if (grow((void **)&mem->pixels, &mem->pixels_cap, stride * job->out_h)
        || grow((void **)&mem->rows, &mem->rows_cap, sizeof(JSAMPROW) * job->out_h))
        goto done;
    job->pixels = mem->pixels;
    job->rows = mem->rows;
    job->borrowed_rows = 1;
    if (roi_guarded(job, roi_read) != 0)
        goto done;
    axis_spec ya, xa;
    long win_h = (long)job->out_h, win_w = (long)job->out_w;
    if (ip.kind != 0) {
        status = interp_into(opt, mem, &plan, &ip, &fp, mem->pixels, stride, (long)job->out_x,
                             (long)job->out_y, win_h, win_w, dst);
        goto done;
    }
    linear_axes(opt, &plan, (long)job->out_x, (long)job->out_y, &ya, &xa);
    if (fp.n_colour > 0 || fp.has_pca || fp.has_hls) {
        status = jitter_into(opt, mem, mem->pixels, win_h, win_w, &ya, &xa, &plan, &fp,
                             fp.has_pca ? fp.pca : NULL, dst);
    } else if (one_to_one(opt, &ya, &xa, win_h, win_w)) {
        write_crop(opt, mem, mem->pixels + stride * (size_t)ya.offset, stride,
                   (size_t)xa.offset, plan.mirror, dst);
        status = 0;
    } else {
        status = resize_into(opt, mem->pixels, win_h, win_w, &ya, &xa, plan.mirror, dst, 1);
    }
done:
    roi_free(job);
    return status;
}

typedef struct { /* bytes of the file in memory: [base, end) */
    const unsigned char *bytes;
    int64_t base, end;
} window;

typedef struct {
    int fd;
    const window *windows; /* n_windows > 0: the records come from these, not the fd */
    Py_ssize_t n_windows;
    int64_t file_size;
    Py_ssize_t count;
    const int64_t *starts, *ends, *samples, *slots;
    const uint32_t *sums; /* NULL: no checksums to check */
    unsigned char *images;
    size_t slot_bytes;
    float *labels;
    unsigned char *status;
    uint64_t key[2], epoch;
    run_options opt;
    const uint64_t *label_ids; /* id_labels: the ids, ascending, and their label rows */
    const float *label_values;
    Py_ssize_t n_labels;
} run_request;

/* Labels looked up by the image id of the record header (an imglist's, options.id_labels):
 * the row of ``id`` into ``out``; -1 when the id is not listed or the header is malformed
 * (the Python path raises its error). */
static int id_labels_of(const run_request *req, const unsigned char *payload, size_t length,
                        float *out, size_t *image_at)
{
    if (length < IMAGE_HEADER)
        return -1;
    uint32_t flag = le32(payload);
    uint64_t id = (uint64_t)le32(payload + 8) | (uint64_t)le32(payload + 12) << 32;
    if ((size_t)flag > (length - IMAGE_HEADER) / 4)
        return -1;
    Py_ssize_t low = 0, high = req->n_labels;
    while (low < high) { /* the first id >= id */
        Py_ssize_t mid = low + (high - low) / 2;
        if (req->label_ids[mid] < id)
            low = mid + 1;
        else
            high = mid;
    }
    if (low == req->n_labels || req->label_ids[low] != id)
        return -1;
    long width = req->opt.label_width;
    memcpy(out, req->label_values + (size_t)low * (size_t)width, sizeof(float) * (size_t)width);
    *image_at = IMAGE_HEADER + 4 * (size_t)flag;
    return 0;
}

/* 1 when sample ``i``'s record payload has the CRC32C the sidecar expects (or there are no
 * sums); 0 leaves the sample to the Python path, which reports the mismatch. */
static int sum_matches(const run_request *req, Py_ssize_t i, const unsigned char *payload,
                       size_t length)
{
    return req->sums == NULL || crc32c_extend(0, payload, length) == req->sums[i];
}

/* The first of the request's windows holding all of ``[start, end)``, or NULL. */
static const window *window_holding(const run_request *req, int64_t start, int64_t end)
{
    for (Py_ssize_t i = 0; i < req->n_windows; i++) {
        const window *w = &req->windows[i];
        if (w->base <= start && end <= w->end)
            return w;
    }
    return NULL;
}

static Py_ssize_t run_samples(run_request *req, scratch *mem)
{
    run_options unit = half_staging(&req->opt); /* float16: render the pixel values first */
    int staged = stages_values(&req->opt);
    value_tables tables;
    if (staged)
        make_tables(&req->opt, &tables);
    sample_ctx ctx = {staged ? &unit : &req->opt, mem, req->key, req->epoch};
    Py_ssize_t done = 0;
    for (Py_ssize_t i = 0; i < req->count; i++) {
        int64_t start = req->starts[i], end = req->ends[i];
        size_t span = (size_t)(end - start), length = 0, image_at = 0;
        req->status[i] = 0;
        const unsigned char *payload;
        if (start < 0 || end <= start || end > req->file_size || span > MAX_RECORD)
            continue;
        if (req->n_windows > 0) { /* the file's bytes in memory (a remote file) */
            const window *held = window_holding(req, start, end);
            if (held == NULL)
                continue;
            payload = payload_of(held->bytes + (start - held->base), span, &length);
        } else { /* a large record: only what its head announces, not the whole index span */
            size_t wanted = record_extent(req->fd, start, span);
            if (wanted == 0 || grow((void **)&mem->record, &mem->record_cap, wanted)
                || read_span(req->fd, mem->record, wanted, start))
                continue;
            payload = payload_of(mem->record, span, &length);
        }
        float *labels = req->labels + req->slots[i] * req->opt.label_width;
        if (payload == NULL || !sum_matches(req, i, payload, length)
            || (req->opt.id_labels
                    ? id_labels_of(req, payload, length, labels, &image_at)
                    : labels_of(payload, length, req->opt.label_width, labels, &image_at))
                   != 0)
            continue;
        void *dst = req->images + (size_t)req->slots[i] * req->slot_bytes;
        void *target = staged ? (void *)mem->staged : dst;
        if (decode_into(&ctx, payload + image_at, length - image_at, (uint64_t)req->samples[i],
                        target) == 0) {
            if (staged)
                unstage(&req->opt, &tables, ctx.contrast, ctx.illumination, mem->staged, dst);
            req->status[i] = 1;
            done++;
        }
    }
    return done;
}

/* --- arguments ------------------------------------------------------------------------------ */

/* OPTION_FIELDS, DRAW_SLOTS (batch/options.h) and PCA_NATIVE. */
static int add_contract(PyObject *module)
{
    if (run_add_contract(module) < 0)
        return -1;
    return PyModule_AddIntConstant(module, "PCA_NATIVE", PCA_NATIVE);
}

static int check_column(Py_buffer *view, Py_ssize_t count, Py_ssize_t itemsize,
                        const char *name)
{
    if (view->len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd values of %zd bytes", name, count,
                     itemsize);
        return -1;
    }
    return 0;
}

static int check_request(run_request *req, Py_buffer *images, Py_buffer *labels)
{
    Py_ssize_t plane, sample_values, slots_in_images, label_bytes;
    if (checked_size(&plane, req->opt.out_h, req->opt.out_w, 1, "images")
        || checked_size(&sample_values, plane, req->opt.channels, 1, "images"))
        return -1;
    if (images->itemsize != 1 && images->itemsize != 2 && images->itemsize != 4) {
        PyErr_SetString(PyExc_ValueError, "images must be uint8, float16 or float32");
        return -1;
    }
    req->opt.is_float = images->itemsize != 1;
    req->opt.is_half = images->itemsize == 2;
    if (colour_options_invalid(&req->opt))
        return -1;
    req->slot_bytes = (size_t)sample_values * (size_t)images->itemsize;
    slots_in_images = images->len / (Py_ssize_t)req->slot_bytes;
    if (checked_size(&label_bytes, req->opt.label_width, 4, 1, "labels"))
        return -1;
    for (Py_ssize_t i = 0; i < req->count; i++) {
        int64_t slot = req->slots[i];
        if (slot < 0 || slot >= slots_in_images || (slot + 1) * label_bytes > labels->len
            || req->samples[i] < 0) {
            PyErr_Format(PyExc_ValueError, "slot %lld or sample %lld out of range",
                         (long long)slot, (long long)req->samples[i]);
            return -1;
        }
    }
    return 0;
}

/* The buffers of fill's ``(window, base)`` pairs, held while the run decodes. */
typedef struct {
    Py_ssize_t count;
    Py_buffer *views;
    window *windows;
} held_windows;

static void release_windows(held_windows *held)
{
    if (held == NULL)
        return;
    for (Py_ssize_t i = 0; i < held->count; i++)
        PyBuffer_Release(&held->views[i]);
    PyMem_Free(held->views);
    PyMem_Free(held->windows);
    PyMem_Free(held);
}

/* Parses ``source`` (a list or tuple of ``(window, base)`` pairs) into ``req``'s windows. */
static held_windows *hold_windows(PyObject *source, long long file_size, run_request *req)
{
    PyObject *pairs = PySequence_Fast(source, "fill's source must be a file descriptor or a "
                                              "list of (window, base) pairs");
    if (pairs == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs);
    held_windows *held = PyMem_Calloc(1, sizeof *held);
    if (held == NULL || n < 1 || (held->views = PyMem_Calloc((size_t)n, sizeof(Py_buffer))) == NULL
        || (held->windows = PyMem_Calloc((size_t)n, sizeof(window))) == NULL) {
        if (n < 1)
            PyErr_SetString(PyExc_ValueError, "fill's source holds no window");
        else
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long base;
        PyObject *pair = PySequence_Fast_GET_ITEM(pairs, i);
        if (!PyTuple_Check(pair)) {
            PyErr_Format(PyExc_TypeError, "fill's source: item %zd is not a (window, base) pair",
                         i);
            goto fail;
        }
        if (!PyArg_ParseTuple(pair, "y*L:(window, base)", &held->views[i], &base))
            goto fail;
        held->count = i + 1;
        if (base < 0 || base > file_size || (long long)held->views[i].len > file_size - base) {
            PyErr_Format(PyExc_ValueError, "window %zd lies outside the file", i);
            goto fail;
        }
        held->windows[i] = (window){held->views[i].buf, base, base + held->views[i].len};
    }
    Py_DECREF(pairs);
    req->windows = held->windows;
    req->n_windows = n;
    return held;
fail:
    Py_DECREF(pairs);
    release_windows(held);
    return NULL;
}

static PyObject *batch_fill(PyObject *self, PyObject *args)
{
    Py_buffer starts = {0}, ends = {0}, samples = {0}, slots = {0}, images = {0}, labels = {0},
              status = {0}, sums = {0}, label_ids = {0}, label_values = {0};
    held_windows *held = NULL;
    PyObject *source, *options, *result = NULL;
    unsigned long long key_lo, key_hi, epoch;
    long long file_size;
    run_request req = {0};
    scratch *mem;
    (void)self;

    if (!PyArg_ParseTuple(args, "OLy*y*y*y*w*w*w*KKKO|y*y*y*:fill", &source, &file_size, &starts,
                          &ends, &samples, &slots, &images, &labels, &status, &key_lo, &key_hi,
                          &epoch, &options, &sums, &label_ids, &label_values))
        return NULL;
    req.count = status.len;
    req.fd = -1;
    if (PyLong_Check(source)) { /* a file descriptor */
        long fd = PyLong_AsLong(source);
        if (fd == -1 && PyErr_Occurred())
            goto done;
        if (fd < 0 || fd > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "fd is out of range");
            goto done;
        }
        req.fd = (int)fd;
    } else if ((held = hold_windows(source, file_size, &req)) == NULL) {
        goto done;
    }
    if (sums.buf != NULL && sums.len > 0
        && (check_column(&sums, req.count, 4, "sums") || ((uintptr_t)sums.buf & 3) != 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "sums must be aligned uint32");
        goto done;
    }
    req.sums = sums.len > 0 ? sums.buf : NULL;
    if (check_column(&starts, req.count, 8, "starts") || check_column(&ends, req.count, 8, "ends")
        || check_column(&samples, req.count, 8, "samples")
        || check_column(&slots, req.count, 8, "slots") || run_parse(options, &req.opt))
        goto done;
    req.file_size = file_size;
    req.starts = starts.buf;
    req.ends = ends.buf;
    req.samples = samples.buf;
    req.slots = slots.buf;
    req.images = images.buf;
    req.labels = labels.buf;
    req.status = status.buf;
    req.key[0] = key_lo;
    req.key[1] = key_hi;
    req.epoch = epoch;
    if (check_request(&req, &images, &labels))
        goto done;
    if (req.opt.id_labels) { /* the imglist's table: ids ascending, label_width floats each */
        Py_ssize_t n = label_ids.len / 8;
        if (label_ids.len % 8 != 0 || ((uintptr_t)label_ids.buf & 7) != 0
            || ((uintptr_t)label_values.buf & 3) != 0
            || label_values.len != n * (Py_ssize_t)req.opt.label_width * 4) {
            PyErr_SetString(PyExc_ValueError, "label_ids must be aligned uint64 and label_values "
                            "label_width aligned float32 for each");
            goto done;
        }
        req.label_ids = label_ids.buf;
        req.label_values = label_values.buf;
        req.n_labels = n;
    }
    mem = thread_scratch();
    if (mem == NULL
        || grow((void **)&mem->planes, &mem->planes_cap,
                sizeof(float) * 3 * (size_t)req.opt.out_h * (size_t)req.opt.out_w)
        || (stages_values(&req.opt)
            && grow((void **)&mem->staged, &mem->staged_cap,
                    3 * (size_t)req.opt.out_h * (size_t)req.opt.out_w))) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t done_count;
    Py_BEGIN_ALLOW_THREADS
    done_count = run_samples(&req, mem);
    scratch_trim(mem);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(done_count);
done:
    run_release(&req.opt);
    release_windows(held);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&samples);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&images);
    PyBuffer_Release(&labels);
    PyBuffer_Release(&status);
    if (sums.obj != NULL)
        PyBuffer_Release(&sums);
    if (label_ids.obj != NULL)
        PyBuffer_Release(&label_ids);
    if (label_values.obj != NULL)
        PyBuffer_Release(&label_values);
    return result;
}

static PyObject *batch_uniforms(PyObject *self, PyObject *args)
{
    unsigned long long key_lo, key_hi, sample, epoch;
    unsigned int count;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKKI:uniforms", &key_lo, &key_hi, &sample, &epoch, &count))
        return NULL;
    uint64_t key[2] = {key_lo, key_hi};
    PyObject *list = PyList_New(count);
    for (unsigned int i = 0; list != NULL && i < count; i++) {
        PyObject *value = PyFloat_FromDouble(philox_uniform(key, sample, epoch, i));
        if (value == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, value);
    }
    return list;
}

static PyObject *batch_colour_convert(PyObject *self, PyObject *args)
{
    int code;
    Py_buffer pixels = {0};
    Py_ssize_t width;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*n:colour_convert", &code, &pixels, &width))
        return NULL;
    PyObject *result = NULL;
    if ((code != 0 && code != 1) || width < 1 || width > PY_SSIZE_T_MAX / 3
        || pixels.len % (3 * width) != 0) {
        PyErr_SetString(PyExc_ValueError, "code must be 0 or 1, pixels whole rows of width");
    } else if ((result = PyBytes_FromStringAndSize(NULL, pixels.len)) != NULL) {
        const uint8_t *src = pixels.buf;
        uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t at = 0; at < pixels.len; at += 3 * width)
            convert_row(code, src + at, dst + at, (long)width);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&pixels);
    return result;
}

static PyObject *batch_normals(PyObject *self, PyObject *args)
{
    unsigned long long key_lo, key_hi, sample, epoch;
    (void)self;
    if (!PyArg_ParseTuple(args, "KKKK:normals", &key_lo, &key_hi, &sample, &epoch))
        return NULL;
    uint64_t key[2] = {key_lo, key_hi};
    double out[3];
    pca_normals(key, sample, epoch, out);
    return Py_BuildValue("(ddd)", out[0], out[1], out[2]);
}

/* warp_affine(src, forward, out_h, out_w, fill, lanes) -> bytes: cv2.warpAffine of a
 * C-contiguous uint8 (H, W, channels) image (channels 1 or 3) by the forward 2x3 matrix (six
 * floats, float32 values) with INTER_LINEAR and BORDER_CONSTANT fill, as recpipe._batch computes
 * it (out_h x out_w x channels bytes); for tests and the gate's check of ``lanes``. */
static PyObject *batch_warp_affine(PyObject *self, PyObject *args)
{
    Py_buffer src = {0};
    long height, width, channels, out_h, out_w;
    int fill, lanes;
    double forward[6];
    (void)self;
    if (!PyArg_ParseTuple(args, "y*lll(dddddd)llii:warp_affine", &src, &height, &width,
                          &channels, &forward[0], &forward[1], &forward[2], &forward[3],
                          &forward[4], &forward[5], &out_h, &out_w, &fill, &lanes))
        return NULL;
    PyObject *result = NULL;
    if ((channels != 1 && channels != 3) || height < 1 || width < 1 || out_h < 1 || out_w < 1
        || out_h > 65535 || out_w > 65535 || height > 65535 || width > 65535
        || src.len != height * width * channels || fill < 0 || fill > 255
        || (lanes != 8 && lanes != 16 && lanes != 32)) {
        PyErr_SetString(PyExc_ValueError, "warp_affine: bad sizes, fill or lanes");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(out_h * out_w * channels));
    if (result == NULL)
        goto done;
    warp_job j = {src.buf, height, width, (size_t)(width * channels), (int)channels, out_w,
                  0, 0, out_w, out_h, (uint8_t *)PyBytes_AS_STRING(result),
                  (size_t)(out_w * channels), {0}, (uint8_t)fill, lanes};
    warp_invert(forward, j.inverse);
    Py_BEGIN_ALLOW_THREADS
    warp_affine_linear(&j);
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&src);
    return result;
}

/* interp(src, dst, inv_x, inv_y, method, simd=True): csrc/kernels/interp.h's resize of a
 * C-contiguous uint8 (H, W, C) ``src`` into ``dst`` (H', W', C) as cv::hal::resize with those
 * inverse scales (for the tests that compare it with cv2.resize; simd False: scalar loops). */
static PyObject *batch_interp(PyObject *self, PyObject *args)
{
    Py_buffer src = {0}, dst = {0};
    long sh, sw, dh, dw, cn;
    double inv_x, inv_y;
    int method, simd = 1, status = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "(lll)y*(ll)w*ddi|p:interp", &sh, &sw, &cn, &src, &dh, &dw, &dst,
                          &inv_x, &inv_y, &method, &simd))
        return NULL;
    if (sh < 1 || sw < 1 || cn < 1 || cn > 4 || dh < 1 || dw < 1 || sh > 65535 || sw > 65535
        || dh > 65535 || dw > 65535 || src.len != sh * sw * cn || dst.len != dh * dw * cn) {
        PyErr_SetString(PyExc_ValueError, "interp: sizes do not match the buffers");
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = interp_resize_simd(src.buf, (size_t)(sw * cn), (int)sw, (int)sh, (int)cn,
                                    dst.buf, (size_t)(dw * cn), (int)dw, (int)dh, inv_x, inv_y,
                                    method, simd);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(status == 0);
}

static PyMethodDef batch_methods[] = {
    {"fill", batch_fill, METH_VARARGS,
     "fill(source, file_size, starts, ends, samples, slots, images, labels, status, key_lo, "
     "key_hi, epoch, options, sums=b'', label_ids=b'', label_values=b'') -> samples done: a "
     "run of records decoded and rendered into batch slots without the GIL, as the Python path "
     "renders them (options: a recpipe.decode.native.RunOptions; recpipe/_batch.pyi says "
     "more)."},
    {"colour_convert", batch_colour_convert, METH_VARARGS,
     "colour_convert(code, pixels, width) -> bytes: rows of ``width`` uint8 pixels converted as "
     "cv2.cvtColor does (code 0: RGB2HLS, 1: HLS2RGB; for tests)."},
    {"normals", batch_normals, METH_VARARGS,
     "normals(key_lo, key_hi, sample, epoch) -> the 3 standard normals PCA lighting draws after "
     "the sample's uniforms (for tests; zeros when PCA_NATIVE is 0)."},
    {"uniforms", batch_uniforms, METH_VARARGS,
     "uniforms(key_lo, key_hi, sample, epoch, count) -> the first count uniforms of the "
     "sample's random stream (for tests)."},
    JPEGROI_METHODS
    RESTART_METHODS
    {"warp_affine", batch_warp_affine, METH_VARARGS,
     "warp_affine(src, height, width, channels, forward, out_h, out_w, fill, lanes) -> bytes: "
     "cv2.warpAffine (INTER_LINEAR, BORDER_CONSTANT) as recpipe._batch computes it."},
    {"interp", batch_interp, METH_VARARGS,
     "interp(src_shape, src, dst_shape, dst, inv_x, inv_y, method, simd=True) -> True when "
     "resized (src_shape: (h, w, c), dst_shape: (h2, w2); for tests: csrc/kernels/interp.h against "
     "cv2.resize; simd False: its scalar loops only)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef batch_module = {
    PyModuleDef_HEAD_INIT, "recpipe._batch",
    "A run of records decoded straight into batch slots, without the GIL.", -1, batch_methods,
};

PyMODINIT_FUNC PyInit__batch(void)
{
    static int key_made = 0;
    crc32c_init();
    if (!key_made) {
        if (pthread_key_create(&scratch_key, scratch_free) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "recpipe._batch: no thread-specific key");
            return NULL;
        }
        key_made = 1;
    }
    PyObject *module = PyModule_Create(&batch_module);
    if (module != NULL && (add_contract(module) < 0 || jpegroi_add_constants(module) < 0))
        Py_CLEAR(module);
    return module;
}
