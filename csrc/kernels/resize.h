/*
 * The bilinear resize of recpipe._resize (see kernels/resize_module.c for what it computes),
 * shared with
 * recpipe._batch so that both write identical values. Fill a resize_job (src, height, width,
 * channels, dst, out_h, out_w, mirror, nchw, is_float, gains, offsets), call
 * resize_prepare(job, y_axis, x_axis), then resize_run(job) (no GIL needed), and
 * resize_release(job) on every path.
 */
#ifndef RECPIPE_RESIZE_CORE_H
#define RECPIPE_RESIZE_CORE_H

#include <Python.h>

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

#ifndef HOT
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif
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
    Py_ssize_t src_stride;        /* bytes from one source row to the next; 0: width * channels */
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
} resize_job;

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
static void write_row(const resize_job *j, Py_ssize_t y, Py_ssize_t from)
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
static inline void four_pixels(const resize_job *j, Py_ssize_t x, __m128 px[4])
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
static Py_ssize_t write_row_rgb(const resize_job *j, Py_ssize_t y)
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

static void resize_run(resize_job *j)
{
    Py_ssize_t stride = j->src_stride ? j->src_stride : j->width * j->channels;
    Py_ssize_t start = j->col_first * j->channels;
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

/* Taps, column tables and the row buffer of ``j`` for axes ``ya``/``xa`` (no GIL needed);
 * 0, or -1 (out of memory: ``*covered`` untouched) or -2 (a tap outside the source) after
 * which resize_release(j) frees what was allocated. */
static int resize_prepare(resize_job *j, const axis_spec *ya, const axis_spec *xa)
{
    if (alloc_taps(&j->ty, j->out_h) || alloc_taps(&j->tx, j->out_w))
        return -1;
    if (plan_taps(ya, j->out_h, j->height, &j->ty) || plan_taps(xa, j->out_w, j->width, &j->tx))
        return -2;
    j->col_first = j->tx.first[0] < j->tx.first[j->out_w - 1] ? j->tx.first[0]
                                                               : j->tx.first[j->out_w - 1];
    Py_ssize_t col_last = j->tx.second[0] > j->tx.second[j->out_w - 1]
                              ? j->tx.second[0] : j->tx.second[j->out_w - 1];
    j->cols = col_last - j->col_first + 1;
    /* + 4 zeroed floats: the 4-wide loads of the last pixel read past its channels */
    j->row = PyMem_RawCalloc(j->cols * j->channels + 4, sizeof(float));
    j->left = PyMem_RawMalloc(j->out_w * sizeof(Py_ssize_t));
    j->step = PyMem_RawMalloc(j->out_w * sizeof(int32_t));
    j->weight = PyMem_RawMalloc(j->out_w * sizeof(float));
    if (j->row == NULL || j->left == NULL || j->step == NULL || j->weight == NULL)
        return -1;
    for (Py_ssize_t x = 0; x < j->out_w; x++) {
        Py_ssize_t from = j->mirror ? j->out_w - 1 - x : x;
        j->left[x] = (j->tx.first[from] - j->col_first) * j->channels;
        j->step[x] = (int32_t)((j->tx.second[from] - j->tx.first[from]) * j->channels);
        j->weight[x] = j->tx.frac[from];
    }
    return 0;
}

static void resize_release(resize_job *j)
{
    free_taps(&j->ty);
    free_taps(&j->tx);
    PyMem_RawFree(j->row);
    PyMem_RawFree(j->left);
    PyMem_RawFree(j->step);
    PyMem_RawFree(j->weight);
}

#endif
