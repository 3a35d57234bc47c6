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
#include "png/png.h" /* PNG records (with libpng) */
#include "record/record.h" /* framing, image header, labels */
#include "jpeg/region.h" /* decode_region: one JPEG region, in the method table */
#include "jpeg/restart_methods.h" /* add_restarts, restart_layout: in the method table */
#include "kernels/warp.h"

#include <math.h>

#define MAX_RECORD (256u << 20) /* larger records go to the Python path */


#include "plan/draws.h"    /* the samples' random draws */
#include "batch/options.h" /* the run contract: run_options, parsed from RunOptions */

/* Per-thread buffers, kept between calls (a fresh 150 KB planes buffer per call is mapped and
 * zeroed by the kernel every time) and freed when the thread ends. */
typedef struct {
    unsigned char *record; /* the record's bytes */
    size_t record_cap;
    unsigned char *pixels; /* the decoded window */
    size_t pixels_cap;
    JSAMPROW *rows;
    size_t rows_cap;
    render_scratch render; /* rendering's own (kernels/render.h) */
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
    render_scratch_free(&mem->render);
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
    render_scratch_trim(&mem->render, KEEP_BYTES);
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

/* --- one sample ---------------------------------------------------------------------------- */

typedef struct {
    const run_options *opt;
    scratch *mem;
    const uint64_t *key;
    uint64_t epoch;
    roi_job job;
} sample_ctx;

/* The sample's plan for a ``rows`` x ``cols`` image: its draws (the Philox stream, numpy's
 * normals) planned by plan/plan.h; 0, or -1 when it cannot be planned (Python raises). */
static int plan_sample(sample_ctx *ctx, uint64_t sample, long rows, long cols, full_plan *fp)
{
    double u[N_UNIFORM], normals[3] = {0.0, 0.0, 0.0};
    sample_draws(ctx->key, sample, ctx->epoch, u, ctx->opt->plan.pca_noise > 0 ? normals : NULL);
    return plan_full(&ctx->opt->plan, u, normals, rows, cols, fp) == PLAN_OK ? 0 : -1;
}

/* A PNG record (png/png.h) decoded whole at full size, as the Python path's OpenCV decode
 * gives it, then rendered; -1 to leave it to Python. */
static int png_into(sample_ctx *ctx, const unsigned char *data, size_t size, uint64_t sample,
                    void *dst)
{
    const run_options *opt = ctx->opt;
    scratch *mem = ctx->mem;
    long rows, cols;
    full_plan fp;
    if (png_decode(data, size, opt->render.channels, opt->max_pixels, &mem->pixels,
                   &mem->pixels_cap, &rows, &cols) != 0
        || plan_sample(ctx, sample, rows, cols, &fp) != 0)
        return -1;
    render_image image = {mem->pixels, (size_t)(cols * opt->render.channels), rows, cols,
                          {0, 0, rows, cols, 1}};
    return render_sample(&opt->render, &fp, &image, &mem->render, dst) == RENDER_DONE ? 0 : -1;
}

/* Decode ``data`` into ``dst`` (one slot): the plan (plan/plan.h), its geometry
 * (plan/geometry.h: the DCT scale and the box to decode), the region decode (jpeg/roi.h), then
 * rendering (kernels/render.h). 0 when done, -1 to leave it to Python. */
static int decode_into(sample_ctx *ctx, const unsigned char *data, size_t size, uint64_t sample,
                       void *dst)
{
    const run_options *opt = ctx->opt;
    scratch *mem = ctx->mem;
    roi_job *job = &ctx->job;
    int status = -1;
    full_plan fp;

    if (png_is_png(data, size))
        return png_into(ctx, data, size, sample, dst);
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
    job->channels = (int)opt->render.channels;
    if (roi_guarded(job, roi_header) != 0 || job->depth != opt->render.channels)
        goto done;
    long rows = (long)job->cinfo.image_height, cols = (long)job->cinfo.image_width;
    if (rows <= 0 || cols <= 0)
        goto done;
    if (opt->max_pixels && (unsigned long long)rows * (unsigned long long)cols > opt->max_pixels)
        goto done;
    if (plan_sample(ctx, sample, rows, cols, &fp) != 0)
        goto done; /* the Python path raises its error */
    geo_config g = render_geometry(&opt->render);
    g.scales = opt->scales;
    unsigned den = geo_decode_scale(&g, &fp);
    long box[4] = {0, 0, -1, -1};
    int windowed = geo_decode_box(&g, &fp, den, box);
    job->scale_num = 1;
    job->scale_den = den;
    job->x0 = box[0];
    job->y0 = box[1];
    job->x1 = box[2];
    job->y1 = box[3];
    if (roi_guarded(job, roi_begin) != 0 || (long)job->full_h != geo_ceil_div(rows, (long)den)
        || (long)job->full_w != geo_ceil_div(cols, (long)den))
        goto done;
    size_t stride = (size_t)job->out_w * (size_t)opt->render.channels;
    if (grow((void **)&mem->pixels, &mem->pixels_cap, stride * job->out_h)
        || grow((void **)&mem->rows, &mem->rows_cap, sizeof(JSAMPROW) * job->out_h))
        goto done;
    job->pixels = mem->pixels;
    job->rows = mem->rows;
    job->borrowed_rows = 1;
    if (roi_guarded(job, roi_read) != 0)
        goto done;
    render_image image = {mem->pixels, stride, (long)job->out_h, (long)job->out_w,
                          {(long)job->out_x, (long)job->out_y, (long)job->full_h,
                           (long)job->full_w, !windowed}};
    status = render_sample(&opt->render, &fp, &image, &mem->render, dst) == RENDER_DONE ? 0 : -1;
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
    return record_id_labels(payload, length, req->label_ids, req->label_values, req->n_labels,
                            req->opt.label_width, out, image_at);
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
    sample_ctx ctx = {&req->opt, mem, req->key, req->epoch};
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
            payload = record_payload(held->bytes + (start - held->base), span, &length);
        } else { /* a large record: only what its head announces, not the whole index span */
            size_t wanted = record_extent(req->fd, start, span);
            if (wanted == 0 || grow((void **)&mem->record, &mem->record_cap, wanted)
                || read_span(req->fd, mem->record, wanted, start))
                continue;
            payload = record_payload(mem->record, span, &length);
        }
        float *labels = req->labels + req->slots[i] * req->opt.label_width;
        if (payload == NULL || !sum_matches(req, i, payload, length)
            || (req->opt.id_labels
                    ? id_labels_of(req, payload, length, labels, &image_at)
                    : record_labels(payload, length, req->opt.label_width, labels, &image_at))
                   != 0)
            continue;
        void *dst = req->images + (size_t)req->slots[i] * req->slot_bytes;
        if (decode_into(&ctx, payload + image_at, length - image_at, (uint64_t)req->samples[i],
                        dst) == 0) {
            req->status[i] = 1;
            done++;
        }
    }
    return done;
}

/* --- arguments ------------------------------------------------------------------------------ */

/* OPTION_FIELDS, DRAW_SLOTS (batch/options.h), PCA_NATIVE and PNG_NATIVE. */
static int add_contract(PyObject *module)
{
    if (run_add_contract(module) < 0 || PyModule_AddIntConstant(module, "PNG_NATIVE", PNG_NATIVE))
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
    if (checked_size(&plane, req->opt.render.out_h, req->opt.render.out_w, 1, "images")
        || checked_size(&sample_values, plane, req->opt.render.channels, 1, "images"))
        return -1;
    if (images->itemsize != 1 && images->itemsize != 2 && images->itemsize != 4) {
        PyErr_SetString(PyExc_ValueError, "images must be uint8, float16 or float32");
        return -1;
    }
    req->opt.render.itemsize = (int)images->itemsize;
    if (req->opt.plan.pca_noise > 0 && !PCA_NATIVE) {
        PyErr_SetString(PyExc_ValueError, "PCA lighting needs recpipe._batch built with numpy's "
                                          "normal sampler (PCA_NATIVE)");
        return -1;
    }
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
    if (mem == NULL) {
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

static PyMethodDef batch_methods[] = {
    {"fill", batch_fill, METH_VARARGS,
     "fill(source, file_size, starts, ends, samples, slots, images, labels, status, key_lo, "
     "key_hi, epoch, options, sums=b'', label_ids=b'', label_values=b'') -> samples done: a "
     "run of records decoded and rendered into batch slots without the GIL, as the Python path "
     "renders them (options: a recpipe.decode.native.RunOptions; recpipe/_batch.pyi says "
     "more)."},
    {"normals", batch_normals, METH_VARARGS,
     "normals(key_lo, key_hi, sample, epoch) -> the 3 standard normals PCA lighting draws after "
     "the sample's uniforms (for tests; zeros when PCA_NATIVE is 0)."},
    {"uniforms", batch_uniforms, METH_VARARGS,
     "uniforms(key_lo, key_hi, sample, epoch, count) -> the first count uniforms of the "
     "sample's random stream (for tests)."},
    JPEGROI_METHODS
    RESTART_METHODS
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
