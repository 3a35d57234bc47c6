/*
 * recpipe._batch: a run of records of a local .rec file decoded into batch slots in one call,
 * without the GIL: read, record and image header, label, plan, region decode, mirror and
 * normalisation, for the configurations whose pixels need no resampling (the output is a crop
 * of the image at full scale: a 112x112 face into a 112x112 slot, a centre or random crop).
 *
 * fill(fd, file_size, starts, ends, samples, slots, images, labels, status, key_lo, key_hi,
 *      epoch, options) -> number of samples done
 *
 * ``starts``/``ends`` (int64): the byte span of each record in the file open as ``fd``;
 * ``samples`` (int64): each sample's index in the sampling order, which keys its random draws;
 * ``slots`` (int64): the batch slot each one fills in ``images`` (C-contiguous uint8 or float32
 * batch of slots of out_h x out_w x 3 values, (C, H, W) when nchw) and ``labels`` (float32,
 * label_width values a slot). ``status`` (uint8) receives 1 for each sample done and 0 for each
 * left to the caller: anything unusual (a multi-part or malformed record, a record the index
 * does not match, a non-JPEG or CMYK image, an image smaller than the output, over max_pixels,
 * any libjpeg error or warning in strict mode) is left to the Python path, which decodes it or
 * raises its precise error; nothing is reported from here.
 *
 * ``options``: (out_h, out_w, nchw, rand_crop, mirror, rand_mirror, gains, offsets,
 * label_width, fast_dct, fast_upsample, strict, max_pixels, max_bytes), as recpipe's Augmenter
 * and Decoder have them. The random draws are those of numpy's Philox(key=(key_hi << 64) |
 * key_lo, counter=[0, 0, sample, epoch]) -> Generator.random(64), as Augmenter.plan takes them
 * (crop x and y: uniforms 49 and 50; mirror: 51), so that pixels equal the Python path's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "_floats.h"
#include "_planes.h"
#include "_roi_core.h"

#define RECORD_MAGIC 0xced7230aU
#define IMAGE_HEADER 24        /* IRHeader: flag u32, label f32, id u64, id2 u64 */
#define MAX_RECORD (256u << 20) /* larger records go to the Python path */
#define U_CROP_X 49
#define U_CROP_Y 50
#define U_MIRROR 51

typedef struct {
    long out_h, out_w;
    int nchw, rand_crop, mirror, rand_mirror, is_float;
    float gains[3], offsets[3];
    long label_width;
    int fast_dct, fast_upsample, strict;
    unsigned long long max_pixels, max_bytes;
} run_options;

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

/* --- numpy's Philox4x64-10 ------------------------------------------------------------------ */

static inline uint64_t mulhilo(uint64_t a, uint64_t b, uint64_t *hi)
{
    __uint128_t product = (__uint128_t)a * b;
    *hi = (uint64_t)(product >> 64);
    return (uint64_t)product;
}

static void philox_block(const uint64_t counter[4], const uint64_t key_in[2], uint64_t out[4])
{
    uint64_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
    uint64_t key[2] = {key_in[0], key_in[1]};
    for (int round = 0; round < 10; round++) {
        uint64_t hi0, hi1;
        uint64_t lo0 = mulhilo(0xD2E7470EE14C6C93ULL, c[0], &hi0);
        uint64_t lo1 = mulhilo(0xCA5A826395121157ULL, c[2], &hi1);
        uint64_t next[4] = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
        memcpy(c, next, sizeof c);
        key[0] += 0x9E3779B97F4A7C15ULL;
        key[1] += 0xBB67AE8584CAA73BULL;
    }
    memcpy(out, c, sizeof c);
}

/* Uniform ``which`` of Generator(Philox(key, counter=[0, 0, sample, epoch])).random(n): a new
 * Philox increments the counter before each block of four 64-bit outputs. */
static double uniform(const uint64_t key[2], uint64_t sample, uint64_t epoch, unsigned which)
{
    uint64_t counter[4] = {0, 0, sample, epoch}, block[4];
    uint64_t step = which / 4 + 1;
    counter[0] = step; /* no carry: which < 2**64 - 1 */
    philox_block(counter, key, block);
    return (double)(block[which % 4] >> 11) * (1.0 / 9007199254740992.0);
}

/* Augmenter's _randint: an integer in [low, high] from a uniform in [0, 1). */
static long randint(double u, long low, long high)
{
    long value = low + (long)(u * (double)(high - low + 1));
    return value < high ? value : high;
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

/* One row of RGB pixels into the three planes of a (C, H, W) float32 slot: the values of
 * to_planes + write_planes ((float)p * gains[c] + offsets[c]) in one pass. */
HOT static void row_chw_float(const uint8_t *restrict s, float *restrict r, float *restrict g,
                              float *restrict b, Py_ssize_t w, const float *gains,
                              const float *offsets)
{
    float k0 = gains[0], k1 = gains[1], k2 = gains[2];
    float o0 = offsets[0], o1 = offsets[1], o2 = offsets[2];
    for (Py_ssize_t x = 0; x < w; x++) {
        r[x] = (float)s[3 * x] * k0 + o0;
        g[x] = (float)s[3 * x + 1] * k1 + o1;
        b[x] = (float)s[3 * x + 2] * k2 + o2;
    }
}

HOT static void reversed(const float *restrict from, float *restrict to, Py_ssize_t w)
{
    for (Py_ssize_t x = 0; x < w; x++)
        to[x] = from[w - 1 - x];
}

/* The out_h x out_w crop starting ``left`` pixels into each decoded row, into the slot. */
static void write_crop(const run_options *opt, scratch *mem, const unsigned char *pixels,
                       size_t stride, size_t left, int mirror, void *dst)
{
    Py_ssize_t h = opt->out_h, w = opt->out_w, n = h * w;
    if (opt->nchw && opt->is_float) { /* the common case (faces): one pass */
        float *out = dst;
        for (Py_ssize_t y = 0; y < h; y++) {
            const uint8_t *row = pixels + stride * (size_t)y + 3 * left;
            if (mirror) { /* forwards into scratch, then each plane's row reversed */
                float *t = mem->planes;
                row_chw_float(row, t, t + w, t + 2 * w, w, opt->gains, opt->offsets);
                for (int c = 0; c < 3; c++)
                    reversed(t + c * w, out + c * n + y * w, w);
            } else {
                row_chw_float(row, out + y * w, out + n + y * w, out + 2 * n + y * w, w,
                              opt->gains, opt->offsets);
            }
        }
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

typedef struct {
    const run_options *opt;
    scratch *mem;
    const uint64_t *key;
    uint64_t epoch;
    roi_job job;
} sample_ctx;

/* Decode ``data`` into ``dst`` (one slot); 0 when done, -1 to leave it to Python. */
static int decode_into(sample_ctx *ctx, const unsigned char *data, size_t size, uint64_t sample,
                       void *dst)
{
    const run_options *opt = ctx->opt;
    scratch *mem = ctx->mem;
    roi_job *job = &ctx->job;
    int status = -1;

    if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF)
        return -1;
    memset(job, 0, sizeof *job);
    roi_init_errors(job);
    job->data = data;
    job->size = size;
    job->scale_num = job->scale_den = 1;
    job->channels = 3;
    job->fast_dct = opt->fast_dct;
    job->fast_upsample = opt->fast_upsample;
    job->strict = job->err.strict = opt->strict;
    job->max_bytes = opt->max_bytes;
    if (roi_guarded(job, roi_header) != 0 || job->depth != 3)
        goto done;
    long rows = (long)job->cinfo.image_height, cols = (long)job->cinfo.image_width;
    if (rows <= 0 || cols <= 0 || rows < opt->out_h || cols < opt->out_w)
        goto done; /* upscaling resamples: the Python path's */
    if (opt->max_pixels && (unsigned long long)rows * (unsigned long long)cols > opt->max_pixels)
        goto done;
    long x, y;
    if (opt->rand_crop) {
        x = randint(uniform(ctx->key, sample, ctx->epoch, U_CROP_X), 0, cols - opt->out_w);
        y = randint(uniform(ctx->key, sample, ctx->epoch, U_CROP_Y), 0, rows - opt->out_h);
    } else {
        x = (cols - opt->out_w) / 2;
        y = (rows - opt->out_h) / 2;
    }
    int mirror = opt->mirror
                 || (opt->rand_mirror && uniform(ctx->key, sample, ctx->epoch, U_MIRROR) < 0.5);
    job->x0 = x;
    job->y0 = y;
    job->x1 = x + opt->out_w;
    job->y1 = y + opt->out_h;
    if (roi_guarded(job, roi_begin) != 0)
        goto done;
    size_t stride = (size_t)job->out_w * 3;
    if (grow((void **)&mem->pixels, &mem->pixels_cap, stride * job->out_h)
        || grow((void **)&mem->rows, &mem->rows_cap, sizeof(JSAMPROW) * job->out_h))
        goto done;
    job->pixels = mem->pixels;
    job->rows = mem->rows;
    job->borrowed_rows = 1;
    if (roi_guarded(job, roi_read) != 0)
        goto done;
    /* the output-sized crop of the decoded window into the slot */
    write_crop(opt, mem, mem->pixels, stride, (size_t)(x - (long)job->out_x), mirror, dst);
    status = 0;
done:
    roi_free(job);
    return status;
}

typedef struct {
    int fd;
    int64_t file_size;
    Py_ssize_t count;
    const int64_t *starts, *ends, *samples, *slots;
    unsigned char *images;
    size_t slot_bytes;
    float *labels;
    unsigned char *status;
    uint64_t key[2], epoch;
    run_options opt;
} run_request;

static Py_ssize_t run_samples(run_request *req, scratch *mem)
{
    sample_ctx ctx = {&req->opt, mem, req->key, req->epoch};
    Py_ssize_t done = 0;
    for (Py_ssize_t i = 0; i < req->count; i++) {
        int64_t start = req->starts[i], end = req->ends[i];
        size_t span = (size_t)(end - start), length = 0, image_at = 0;
        req->status[i] = 0;
        if (start < 0 || end <= start || end > req->file_size || span > MAX_RECORD)
            continue;
        if (grow((void **)&mem->record, &mem->record_cap, span)
            || read_span(req->fd, mem->record, span, start))
            continue;
        const unsigned char *payload = payload_of(mem->record, span, &length);
        float *labels = req->labels + req->slots[i] * req->opt.label_width;
        if (payload == NULL
            || labels_of(payload, length, req->opt.label_width, labels, &image_at) != 0)
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

static int parse_options(PyObject *options, run_options *opt)
{
    PyObject *gains, *offsets;
    if (!PyArg_ParseTuple(options, "llppppOOlpppKK:options", &opt->out_h, &opt->out_w,
                          &opt->nchw, &opt->rand_crop, &opt->mirror, &opt->rand_mirror, &gains,
                          &offsets, &opt->label_width, &opt->fast_dct, &opt->fast_upsample,
                          &opt->strict, &opt->max_pixels, &opt->max_bytes))
        return -1;
    if (opt->out_h < 1 || opt->out_w < 1 || opt->out_h > 65535 || opt->out_w > 65535
        || opt->label_width < 1) {
        PyErr_SetString(PyExc_ValueError, "out_h, out_w and label_width must be positive");
        return -1;
    }
    return parse_floats(gains, opt->gains, 3, "gains")
           || parse_floats(offsets, opt->offsets, 3, "offsets");
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
        || checked_size(&sample_values, plane, 3, 1, "images"))
        return -1;
    if (images->itemsize != 1 && images->itemsize != 4) {
        PyErr_SetString(PyExc_ValueError, "images must be uint8 or float32");
        return -1;
    }
    req->opt.is_float = images->itemsize == 4;
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

static PyObject *batch_fill(PyObject *self, PyObject *args)
{
    Py_buffer starts = {0}, ends = {0}, samples = {0}, slots = {0}, images = {0}, labels = {0},
              status = {0};
    PyObject *options, *result = NULL;
    unsigned long long key_lo, key_hi, epoch;
    long long file_size;
    run_request req = {0};
    scratch *mem;
    (void)self;

    if (!PyArg_ParseTuple(args, "iLy*y*y*y*w*w*w*KKKO:fill", &req.fd, &file_size, &starts,
                          &ends, &samples, &slots, &images, &labels, &status, &key_lo, &key_hi,
                          &epoch, &options))
        return NULL;
    req.count = status.len;
    if (check_column(&starts, req.count, 8, "starts") || check_column(&ends, req.count, 8, "ends")
        || check_column(&samples, req.count, 8, "samples")
        || check_column(&slots, req.count, 8, "slots") || parse_options(options, &req.opt))
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
    mem = thread_scratch();
    if (mem == NULL
        || grow((void **)&mem->planes, &mem->planes_cap,
                sizeof(float) * 3 * (size_t)req.opt.out_h * (size_t)req.opt.out_w)) {
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
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&samples);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&images);
    PyBuffer_Release(&labels);
    PyBuffer_Release(&status);
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
        PyObject *value = PyFloat_FromDouble(uniform(key, sample, epoch, i));
        if (value == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, value);
    }
    return list;
}

static PyMethodDef batch_methods[] = {
    {"fill", batch_fill, METH_VARARGS,
     "fill(fd, file_size, starts, ends, samples, slots, images, labels, status, key_lo, key_hi, "
     "epoch, options) -> samples done (see the module source)."},
    {"uniforms", batch_uniforms, METH_VARARGS,
     "uniforms(key_lo, key_hi, sample, epoch, count) -> the first count uniforms of the "
     "sample's random stream (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef batch_module = {
    PyModuleDef_HEAD_INIT, "recpipe._batch",
    "A run of records decoded straight into batch slots, without the GIL.", -1, batch_methods,
};

PyMODINIT_FUNC PyInit__batch(void)
{
    static int key_made = 0;
    if (!key_made) {
        if (pthread_key_create(&scratch_key, scratch_free) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "recpipe._batch: no thread-specific key");
            return NULL;
        }
        key_made = 1;
    }
    return PyModule_Create(&batch_module);
}
