/*
 * RGB uint8 rows into the three float32 planes of a (C, H, W) batch slot in one pass:
 * ``(float)p * gains[c] + offsets[c]`` (a multiply, then an add: the values of to_planes +
 * write_planes, bit for bit), each row optionally mirrored as it is written.
 *
 * The faces recipe (a 112x112 record into a 112x112 float32 slot) spends most of its time
 * outside libjpeg here: 150 KB of floats a sample, four times the decoded bytes. With AVX2 a row
 * is split into three byte rows (sixteen pixels at a time, by byte shuffles, in cache), then each
 * plane's row is widened, scaled and stored eight floats at a time in one ascending run (a
 * mirrored row read backwards, its lanes reversed): one pass where the portable path made two
 * (forwards into scratch, then reversed), and the slot's rows written plane by plane, which the
 * store path streams better than the three planes interleaved. Rows that start on 32 bytes
 * (BufferPool's batches) are written with non-temporal stores: the slot is not read back here,
 * and streaming skips reading each line before writing it (the writer ~15% faster in the
 * pipeline, BENCHMARKS.md "Faces against the C loop"). Elsewhere a portable loop computes the
 * same values.
 */
#ifndef RECPIPE_CHW_ROWS_H
#define RECPIPE_CHW_ROWS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__)
#define CHW_ROWS_AVX2 1
#include <immintrin.h>
#else
#define CHW_ROWS_AVX2 0
#endif

#define CHW_ROWS_MAX_W 4096 /* wider rows take the portable path */

/* Where the rows go: plane c's row y starts at planes + c * plane + y * w (floats). */
typedef struct {
    float *planes;
    size_t plane; /* floats a plane: h * w */
    long w;
    int mirror;
    float gains[3], offsets[3];
} chw_rows;

/* Row ``y`` of the slot from the RGB pixels ``s``, portable: pixel x to column x (w - 1 - x
 * when mirrored). */
static void chw_row_portable(const chw_rows *t, const uint8_t *restrict s, long y)
{
    long w = t->w;
    float *restrict r = t->planes + (size_t)y * (size_t)w;
    float *restrict g = r + t->plane, *restrict b = g + t->plane;
    float k0 = t->gains[0], k1 = t->gains[1], k2 = t->gains[2];
    float o0 = t->offsets[0], o1 = t->offsets[1], o2 = t->offsets[2];
    for (long x = 0; x < w; x++) {
        long d = t->mirror ? w - 1 - x : x;
        r[d] = (float)s[3 * x] * k0 + o0;
        g[d] = (float)s[3 * x + 1] * k1 + o1;
        b[d] = (float)s[3 * x + 2] * k2 + o2;
    }
}

#if CHW_ROWS_AVX2
/* Eight channel bytes (the low half of ``bytes``) scaled into eight floats at ``dst``,
 * reversed when ``mirror``; ``stream``: a non-temporal store (``dst`` 32-byte aligned). */
__attribute__((target("avx2"))) static inline void chw_put8(float *dst, __m128i bytes,
                                                            __m256 k, __m256 o, int mirror,
                                                            int stream)
{
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    v = _mm256_add_ps(_mm256_mul_ps(v, k), o); /* no FMA: the scalar code's two roundings */
    if (mirror)
        v = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
    if (stream)
        _mm256_stream_ps(dst, v);
    else
        _mm256_storeu_ps(dst, v);
}

/* Row ``y`` with AVX2 (w <= CHW_ROWS_MAX_W): the channels split into byte rows, then each
 * plane's row stored in one ascending run. */
__attribute__((target("avx2"))) static void chw_row_avx2(const chw_rows *t,
                                                         const uint8_t *restrict s, long y)
{
    /* channel c's bytes of 16 pixels from three 16-byte loads a, b, c of their 48 RGB bytes */
    const __m128i ar = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i br = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i cr = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i ag = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i bg = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i cg = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i ab = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i bb = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i cb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    long w = t->w, blocks = w / 16, eights = w / 8;
    uint8_t bytes[3][CHW_ROWS_MAX_W] __attribute__((aligned(32)));
    for (long j = 0; j < blocks; j++) {
        const uint8_t *p = s + 48 * j;
        __m128i a = _mm_loadu_si128((const __m128i *)p);
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
        _mm_store_si128((__m128i *)(bytes[0] + 16 * j),
                        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ar),
                                                  _mm_shuffle_epi8(b, br)),
                                     _mm_shuffle_epi8(c, cr)));
        _mm_store_si128((__m128i *)(bytes[1] + 16 * j),
                        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ag),
                                                  _mm_shuffle_epi8(b, bg)),
                                     _mm_shuffle_epi8(c, cg)));
        _mm_store_si128((__m128i *)(bytes[2] + 16 * j),
                        _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ab),
                                                  _mm_shuffle_epi8(b, bb)),
                                     _mm_shuffle_epi8(c, cb)));
    }
    for (long x = 16 * blocks; x < w; x++)
        for (int q = 0; q < 3; q++)
            bytes[q][x] = s[3 * x + q];
    for (int q = 0; q < 3; q++) {
        float *row = t->planes + (size_t)q * t->plane + (size_t)y * (size_t)w;
        int stream = ((uintptr_t)row & 31) == 0; /* the batch's rows: aligned, streamed */
        const uint8_t *from = bytes[q];
        float k = t->gains[q], o = t->offsets[q];
        __m256 kv = _mm256_set1_ps(k), ov = _mm256_set1_ps(o);
        if (t->mirror) { /* column d from pixel w - 1 - d */
            for (long j = 0; j < eights; j++)
                chw_put8(row + 8 * j, _mm_loadl_epi64((const __m128i *)(from + w - 8 * (j + 1))),
                         kv, ov, 1, stream);
            for (long d = 8 * eights; d < w; d++)
                row[d] = (float)from[w - 1 - d] * k + o;
        } else {
            for (long j = 0; j < eights; j++)
                chw_put8(row + 8 * j, _mm_loadl_epi64((const __m128i *)(from + 8 * j)), kv, ov,
                         0, stream);
            for (long d = 8 * eights; d < w; d++)
                row[d] = (float)from[d] * k + o;
        }
    }
}

static int chw_rows_avx2(void)
{
    static int known = -1; /* a benign race: every thread computes the same answer */
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return known;
}
#endif

/* Rows [0, h) of the slot from ``pixels`` (``stride`` bytes a row, RGB from its first byte). */
static void chw_float_rows(const chw_rows *t, const uint8_t *pixels, size_t stride, long h)
{
#if CHW_ROWS_AVX2
    if (t->w <= CHW_ROWS_MAX_W && chw_rows_avx2()) {
        for (long y = 0; y < h; y++)
            chw_row_avx2(t, pixels + stride * (size_t)y, y);
        _mm_sfence(); /* the streamed stores ordered before the slot is reported done */
        return;
    }
#endif
    for (long y = 0; y < h; y++)
        chw_row_portable(t, pixels + stride * (size_t)y, y);
}

#endif
