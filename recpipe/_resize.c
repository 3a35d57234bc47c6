/*
 * recpipe._resize: bilinear resize of part of an image straight into a batch slot.
 *
 * linear(src, height, width, channels, dst, out_h, out_w, y_axis, x_axis, mirror, nchw,
 *        gains, offsets)
 *
 * ``src`` is a C-contiguous ``height x width x channels`` uint8 buffer (channels 1 or 3).
 * ``dst`` is a writable C-contiguous buffer of ``out_h x out_w x channels`` uint8 or float32
 * values (its item size says which), in (C, H, W) order when ``nchw`` is true, else (H, W, C).
 * Each axis is ``(offset, length, shift, scale)``: output index i samples the source at
 *
 *     pos = (float)((i + shift + 0.5) * scale - 0.5),  clamped to [0, length - 1],
 *
 * which is OpenCV's INTER_LINEAR sampling of a ``length``-pixel line resized by ``1 / scale``
 * (``shift`` > 0 starts the output ``shift`` pixels into the resized line: resize-then-crop
 * without computing the cropped-away pixels); the line starts at ``offset`` in ``src``.
 * Weights are OpenCV's 11-bit fixed-point steps; both passes run in float32 with one rounding
 * at the end, so values equal cv2.resize's within 1. ``mirror`` flips the output
 * horizontally. float32 output is ``value * gains[c] + offsets[c]``; uint8 output ignores them.
 *
 * Every sampled pixel must lie inside ``src`` (ValueError otherwise). The GIL is released while
 * it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_floats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#define COEF_BITS 11
#define COEF_ONE (1 << COEF_BITS)

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

typedef struct {
    Py_ssize_t offset, length;
    double shift, scale;
} axis_spec;

typedef struct {
    Py_ssize_t *first, *second;   /* source indices of the two taps */
    float *frac;                  /* weight of the second tap (OpenCV's 11-bit steps) */
} taps;

/* Fill ``t`` for ``n`` outputs; 0 when every tap lies in [0, limit), else -1. */
static int plan_taps(const axis_spec *a, Py_ssize_t n, Py_ssize_t limit, taps *t)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        float pos = (float)((i + a->shift + 0.5) * a->scale - 0.5);
        Py_ssize_t s = (Py_ssize_t)floorf(pos);
        float frac = pos - (float)s;
        if (s < 0) {
            s = 0;
            frac = 0.f;
        }
        if (s >= a->length - 1) {
            s = a->length - 1;
            frac = 0.f;
        }
        long w = lrintf(frac * COEF_ONE);
        t->first[i] = a->offset + s;
        t->second[i] = w ? t->first[i] + 1 : t->first[i];
        t->frac[i] = (float)w / COEF_ONE;
        if (t->first[i] < 0 || t->second[i] >= limit)
            return -1;
    }
    return 0;
}

typedef struct {
    const uint8_t *src;
    Py_ssize_t height, width, channels;
    void *dst;
    int is_float, mirror, nchw;
    Py_ssize_t out_h, out_w;
    taps ty, tx;
    Py_ssize_t col_first, cols;   /* source columns the horizontal taps read */
    Py_ssize_t *left;             /* per output column (mirrored when asked): row offset */
    int32_t *step;                /* ... and the distance to its second tap, in values */
    float *weight;                /* ... and that tap's weight */
    float *row;                   /* one vertically blended row of those columns (+ padding) */
    float gains[3], offsets[3];
} job;

HOT static void blend_row(const uint8_t *restrict a, const uint8_t *restrict b,
                          float *restrict row, Py_ssize_t n, float wb)
{
    float wa = 1.f - wb;
    for (Py_ssize_t i = 0; i < n; i++)
        row[i] = (float)a[i] * wa + (float)b[i] * wb;
}

static inline float clamp_round(float v)
{
    v = rintf(v);
    return v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
}

/* Any channel count, layout and output type. */
static void write_row(const job *j, Py_ssize_t y, Py_ssize_t from)
{
    Py_ssize_t ch = j->channels, w = j->out_w, plane = j->out_h * w;
    for (Py_ssize_t x = from; x < w; x++) {
        const float *p = j->row + j->left[x];
        for (Py_ssize_t c = 0; c < ch; c++) {
            float v = clamp_round(p[c] + (p[c + j->step[x]] - p[c]) * j->weight[x]);
            Py_ssize_t at = j->nchw ? c * plane + y * w + x : (y * w + x) * ch + c;
            if (j->is_float)
                ((float *)j->dst)[at] = v * j->gains[c] + j->offsets[c];
            else
                ((uint8_t *)j->dst)[at] = (uint8_t)v;
        }
    }
}

#ifdef __SSE2__
/* 4 output pixels of a 3-channel row, lanes (R, G, B, -), not yet rounded. */
static inline void four_pixels(const job *j, Py_ssize_t x, __m128 px[4])
{
    for (int k = 0; k < 4; k++) {
        const float *p = j->row + j->left[x + k];
        __m128 a = _mm_loadu_ps(p), b = _mm_loadu_ps(p + j->step[x + k]);
        px[k] = _mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), _mm_set1_ps(j->weight[x + k])));
    }
}

/* Rounded to the nearest integer and clamped to [0, 255], as float. */
static inline __m128 round_clamp(__m128 v)
{
    v = _mm_cvtepi32_ps(_mm_cvtps_epi32(v));
    return _mm_min_ps(_mm_max_ps(v, _mm_setzero_ps()), _mm_set1_ps(255.f));
}

/* 3 channels, 4 output pixels at a time, any layout and output type; returns the columns done.
 * uint8 results round in _mm_cvtps_epi32 and saturate in the packs. */
static Py_ssize_t write_row_rgb(const job *j, Py_ssize_t y)
{
    Py_ssize_t w = j->out_w, plane = j->out_h * w, x = 0;
    __m128 gains = _mm_setr_ps(j->gains[0], j->gains[1], j->gains[2], 0.f);
    __m128 offsets = _mm_setr_ps(j->offsets[0], j->offsets[1], j->offsets[2], 0.f);
    for (; x + 4 <= w; x += 4) {
        __m128 px[4];
        four_pixels(j, x, px);
        if (j->nchw) {
            _MM_TRANSPOSE4_PS(px[0], px[1], px[2], px[3]);  /* now px[c] = channel c */
            if (j->is_float) {
                for (int c = 0; c < 3; c++)
                    _mm_storeu_ps((float *)j->dst + c * plane + y * w + x,
                                  _mm_add_ps(_mm_mul_ps(round_clamp(px[c]),
                                                        _mm_set1_ps(j->gains[c])),
                                             _mm_set1_ps(j->offsets[c])));
            } else {
                __m128i r = _mm_cvtps_epi32(px[0]), g = _mm_cvtps_epi32(px[1]);
                __m128i b = _mm_cvtps_epi32(px[2]);
                __m128i u = _mm_packus_epi16(_mm_packs_epi32(r, g), _mm_packs_epi32(b, b));
                uint8_t *out = (uint8_t *)j->dst + y * w + x;
                int32_t word = _mm_cvtsi128_si32(u);
                memcpy(out, &word, 4);
                word = _mm_cvtsi128_si32(_mm_srli_si128(u, 4));
                memcpy(out + plane, &word, 4);
                word = _mm_cvtsi128_si32(_mm_srli_si128(u, 8));
                memcpy(out + 2 * plane, &word, 4);
            }
        } else if (j->is_float) {
            float *out = (float *)j->dst + (y * w + x) * 3;
            for (int k = 0; k < 4; k++) {
                float v[4];
                _mm_storeu_ps(v, _mm_add_ps(_mm_mul_ps(round_clamp(px[k]), gains), offsets));
                memcpy(out + 3 * k, v, 3 * sizeof(float));
            }
        } else {
            __m128i u = _mm_packus_epi16(
                _mm_packs_epi32(_mm_cvtps_epi32(px[0]), _mm_cvtps_epi32(px[1])),
                _mm_packs_epi32(_mm_cvtps_epi32(px[2]), _mm_cvtps_epi32(px[3])));
            uint8_t bytes[16];
            _mm_storeu_si128((__m128i *)bytes, u);
            uint8_t *out = (uint8_t *)j->dst + (y * w + x) * 3;
            for (int k = 0; k < 4; k++)
                memcpy(out + 3 * k, bytes + 4 * k, 3);
        }
    }
    return x;
}
#endif

static void run_job(job *j)
{
    Py_ssize_t stride = j->width * j->channels, start = j->col_first * j->channels;
    Py_ssize_t n = j->cols * j->channels;
    for (Py_ssize_t y = 0; y < j->out_h; y++) {
        blend_row(j->src + j->ty.first[y] * stride + start,
                  j->src + j->ty.second[y] * stride + start, j->row, n, j->ty.frac[y]);
        Py_ssize_t done = 0;
#ifdef __SSE2__
        if (j->channels == 3)
            done = write_row_rgb(j, y);
#endif
        write_row(j, y, done);
    }
}

static int parse_axis(PyObject *obj, axis_spec *a, const char *name)
{
    if (!PyArg_ParseTuple(obj, "nndd", &a->offset, &a->length, &a->shift, &a->scale)) {
        PyErr_Format(PyExc_TypeError, "%s must be (offset, length, shift, scale)", name);
        return -1;
    }
    if (a->length < 1 || !(a->scale > 0) || !isfinite(a->scale) || !isfinite(a->shift)) {
        PyErr_Format(PyExc_ValueError, "%s: length must be >= 1 and scale finite and > 0", name);
        return -1;
    }
    return 0;
}

static int alloc_taps(taps *t, Py_ssize_t n)
{
    t->first = PyMem_RawMalloc(n * sizeof(Py_ssize_t));
    t->second = PyMem_RawMalloc(n * sizeof(Py_ssize_t));
    t->frac = PyMem_RawMalloc(n * sizeof(float));
    return (t->first && t->second && t->frac) ? 0 : -1;
}

static void free_taps(taps *t)
{
    PyMem_RawFree(t->first);
    PyMem_RawFree(t->second);
    PyMem_RawFree(t->frac);
}

static PyObject *resize_linear(PyObject *self, PyObject *args)
{
    Py_buffer src = {0}, dst = {0};
    PyObject *y_obj, *x_obj, *gains_obj, *offsets_obj, *result = NULL;
    axis_spec ya, xa;
    job j = {0};
    if (!PyArg_ParseTuple(args, "y*nnnw*nnOOppOO:linear", &src, &j.height, &j.width, &j.channels,
                          &dst, &j.out_h, &j.out_w, &y_obj, &x_obj, &j.mirror, &j.nchw,
                          &gains_obj, &offsets_obj))
        return NULL;
    if (j.channels != 1 && j.channels != 3) {
        PyErr_SetString(PyExc_ValueError, "channels must be 1 or 3");
        goto done;
    }
    Py_ssize_t src_bytes, values, value_bytes;
    if (checked_size(&src_bytes, j.height, j.width, j.channels, "src")
        || checked_size(&values, j.out_h, j.out_w, j.channels, "dst")
        || checked_size(&value_bytes, values, 4, 1, "dst"))
        goto done;
    if (j.height < 1 || j.width < 1 || j.out_h < 1 || j.out_w < 1 || src.len != src_bytes) {
        PyErr_SetString(PyExc_ValueError, "src must hold height x width x channels bytes");
        goto done;
    }
    if (dst.len == value_bytes && dst.itemsize == 4)
        j.is_float = 1;
    else if (dst.len != values || dst.itemsize != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "dst must hold out_h x out_w x channels uint8 or float32 values");
        goto done;
    }
    if (parse_axis(y_obj, &ya, "y_axis") || parse_axis(x_obj, &xa, "x_axis")
        || parse_floats(gains_obj, j.gains, j.channels, "gains")
        || parse_floats(offsets_obj, j.offsets, j.channels, "offsets"))
        goto done;
    if (alloc_taps(&j.ty, j.out_h) || alloc_taps(&j.tx, j.out_w)) {
        PyErr_NoMemory();
        goto free;
    }
    if (plan_taps(&ya, j.out_h, j.height, &j.ty) || plan_taps(&xa, j.out_w, j.width, &j.tx)) {
        PyErr_SetString(PyExc_ValueError, "src does not cover the pixels the resize samples");
        goto free;
    }
    j.col_first = j.tx.first[0] < j.tx.first[j.out_w - 1] ? j.tx.first[0] : j.tx.first[j.out_w - 1];
    Py_ssize_t col_last = j.tx.second[0] > j.tx.second[j.out_w - 1] ? j.tx.second[0]
                                                                      : j.tx.second[j.out_w - 1];
    j.cols = col_last - j.col_first + 1;
    /* + 4 zeroed floats: the 4-wide loads of the last pixel read past its channels */
    j.row = PyMem_RawCalloc(j.cols * j.channels + 4, sizeof(float));
    j.left = PyMem_RawMalloc(j.out_w * sizeof(Py_ssize_t));
    j.step = PyMem_RawMalloc(j.out_w * sizeof(int32_t));
    j.weight = PyMem_RawMalloc(j.out_w * sizeof(float));
    if (j.row == NULL || j.left == NULL || j.step == NULL || j.weight == NULL) {
        PyErr_NoMemory();
        goto free;
    }
    for (Py_ssize_t x = 0; x < j.out_w; x++) {
        Py_ssize_t from = j.mirror ? j.out_w - 1 - x : x;
        j.left[x] = (j.tx.first[from] - j.col_first) * j.channels;
        j.step[x] = (int32_t)((j.tx.second[from] - j.tx.first[from]) * j.channels);
        j.weight[x] = j.tx.frac[from];
    }
    j.src = src.buf;
    j.dst = dst.buf;
    Py_BEGIN_ALLOW_THREADS
    run_job(&j);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
free:
    free_taps(&j.ty);
    free_taps(&j.tx);
    PyMem_RawFree(j.row);
    PyMem_RawFree(j.left);
    PyMem_RawFree(j.step);
    PyMem_RawFree(j.weight);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyMethodDef resize_methods[] = {
    {"linear", resize_linear, METH_VARARGS,
     "linear(src, height, width, channels, dst, out_h, out_w, y_axis, x_axis, mirror, nchw, "
     "gains, offsets): bilinear resize of part of src into dst (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef resize_module = {
    PyModuleDef_HEAD_INIT, "recpipe._resize",
    "Bilinear resize of part of an image straight into a batch slot.", -1, resize_methods,
};

PyMODINIT_FUNC PyInit__resize(void)
{
    return PyModule_Create(&resize_module);
}
