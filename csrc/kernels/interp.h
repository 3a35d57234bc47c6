/*
 * csrc/kernels/interp.h: uint8 resizes with OpenCV's (5.0) cv::resize arithmetic, bit for bit, for
 * the interpolations ImageRecordIter's ``inter_method`` names besides bilinear-in-C: 0 nearest,
 * 1 bilinear (cv::resize's own fixed-point one, for the resizes the Python path hands to
 * OpenCV), 2 bicubic, 3 area (the integer-factor fast path and the general path; below a
 * factor of 1, the bilinear emulation), 4 Lanczos-4. Bicubic is OpenCV's own arithmetic
 * (resizeGeneric_: 11-bit taps across, float32 or integer sums down), the one cv2.resize
 * computes with Intel IPP switched off: the Python path turns IPP off for its bicubic resizes
 * (recpipe.image.opencv.ipp_off), since IPP's 8-bit bicubic depends on the CPU's dispatch.
 *
 * Written from OpenCV's imgproc/src/resize.cpp as the reference of what is computed (offsets,
 * coefficient rounding, accumulation order and types, saturation); no code copied.
 *
 * interp_resize(src, sstep, sw, sh, cn, dst, dstep, dw, dh, inv_x, inv_y, method): resize a
 * sw x sh x cn image into a dw x dh one as cv::hal::resize with those inverse scales (cv2.resize
 * with a size: dw / sw; with fx, fy: fx, fy); 0 when done, -1 for a method not here or no memory.
 * interp_size_by(s, f): the size cv2.resize gives to a side of s resized by f (fx, fy).
 */
#ifndef RECPIPE_INTERP_H
#define RECPIPE_INTERP_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* OpenCV computes these with plain float multiplies and adds (a baseline-SSE build): never fuse */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

#define INTERP_COEF_BITS 11
#define INTERP_COEF_SCALE (1 << INTERP_COEF_BITS)

enum { INTERP_NEAREST = 0, INTERP_LINEAR = 1, INTERP_CUBIC = 2, INTERP_AREA = 3,
       INTERP_LANCZOS4 = 4 };

/* cvRound of a double / float: to nearest, ties to even (the default rounding mode), as
 * OpenCV's own (cvtsd2si / cvtss2si on x86: INT_MIN when out of range) */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline int interp_round(double v) { return _mm_cvtsd_si32(_mm_set_sd(v)); }
static inline int interp_roundf(float v) { return _mm_cvtss_si32(_mm_set_ss(v)); }
#else
static inline int interp_round(double v) { return (int)lrint(v); }
static inline int interp_roundf(float v) { return (int)lrintf(v); }
#endif

static inline uint8_t interp_u8(int v) { return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

/* saturate_cast<uchar>(float): cvRound, then clamped (NaN or out of int's range: INT_MIN) */
static inline uint8_t interp_u8f(float v) { return interp_u8(interp_roundf(v)); }

static inline int16_t interp_short(float v)
{
    int r = interp_roundf(v);
    return (int16_t)(r < -32768 ? -32768 : (r > 32767 ? 32767 : r));
}

static int interp_size_by(int s, double f)
{
    double v = (double)s * f;
    if (!(v < 2147483647.0))
        return -1;
    return interp_round(v);
}

/* --- nearest ---------------------------------------------------------------------------- */

static int interp_nearest(const uint8_t *src, size_t sstep, int sw, int sh, int cn, uint8_t *dst,
                          size_t dstep, int dw, int dh, double inv_x, double inv_y)
{
    double ifx = 1. / inv_x, ify = 1. / inv_y;
    int *xofs = malloc(sizeof(int) * (size_t)dw);
    if (xofs == NULL)
        return -1;
    for (int x = 0; x < dw; x++) {
        int sx = (int)floor((double)x * ifx);
        xofs[x] = (sx < sw - 1 ? sx : sw - 1) * cn;
    }
    for (int y = 0; y < dh; y++) {
        int sy = (int)floor((double)y * ify);
        const uint8_t *S = src + sstep * (size_t)(sy < sh - 1 ? sy : sh - 1);
        uint8_t *D = dst + dstep * (size_t)y;
        for (int x = 0; x < dw; x++)
            for (int c = 0; c < cn; c++)
                D[x * cn + c] = S[xofs[x] + c];
    }
    free(xofs);
    return 0;
}

/* --- area, integer factors ---------------------------------------------------------------- */

static int interp_area_fast(const uint8_t *src, size_t sstep, int sw, int sh, int cn,
                            uint8_t *dst, size_t dstep, int dw, int dh, int ix, int iy)
{
    int area = ix * iy, width = dw * cn, swidth = sw * cn;
    float scale = 1.f / (float)area;
    int dwidth1 = (sw / ix) * cn;
    int pairs = ix == 2 && iy == 2 && (cn == 1 || cn == 3 || cn == 4);
    int *xofs = malloc(sizeof(int) * (size_t)width);
    if (xofs == NULL)
        return -1;
    for (int dx = 0; dx < dw; dx++)
        for (int k = 0; k < cn; k++)
            xofs[dx * cn + k] = ix * dx * cn + k;
    for (int dy = 0; dy < dh; dy++) {
        uint8_t *D = dst + dstep * (size_t)dy;
        int sy0 = dy * iy, dx = 0;
        int w = sy0 + iy <= sh ? dwidth1 : 0;
        if (sy0 >= sh) {
            memset(D, 0, (size_t)width);
            continue;
        }
        const uint8_t *S = src + sstep * (size_t)sy0, *N = S + sstep;
        if (pairs) { /* OpenCV's 2x2 path rounds (sum + 2) >> 2 */
            for (int px = 0; px < w / cn; px++, S += 2 * cn, N += 2 * cn)
                for (int c = 0; c < cn; c++)
                    D[px * cn + c] = (uint8_t)((S[c] + S[c + cn] + N[c] + N[c + cn] + 2) >> 2);
            dx = w;
        }
        for (; dx < w; dx++) {
            const uint8_t *P = S + xofs[dx];
            int sum = 0;
            for (int sy = 0; sy < iy; sy++)
                for (int sx = 0; sx < ix; sx++)
                    sum += P[sstep * (size_t)sy + (size_t)(sx * cn)];
            D[dx] = interp_u8f((float)sum * scale);
        }
        for (; dx < width; dx++) { /* the last column or row: the pixels inside the image */
            int sum = 0, count = 0, sx0 = xofs[dx];
            for (int sy = 0; sy < iy && sy0 + sy < sh; sy++) {
                const uint8_t *P = src + sstep * (size_t)(sy0 + sy) + sx0;
                for (int sx = 0; sx < ix * cn && sx0 + sx < swidth; sx += cn) {
                    sum += P[sx];
                    count++;
                }
            }
            D[dx] = count ? interp_u8f((float)sum / (float)count) : 0;
        }
    }
    free(xofs);
    return 0;
}

/* --- area, any factor >= 1 ---------------------------------------------------------------- */

typedef struct {
    int si, di;
    float alpha;
} interp_decimate;

static int interp_area_tab(int ssize, int dsize, int cn, double scale, interp_decimate *tab)
{
    int k = 0;
    for (int dx = 0; dx < dsize; dx++) {
        double fsx1 = dx * scale, fsx2 = fsx1 + scale;
        double cell = scale < ssize - fsx1 ? scale : ssize - fsx1;
        int sx1 = (int)ceil(fsx1), sx2 = (int)floor(fsx2);
        sx2 = sx2 < ssize - 1 ? sx2 : ssize - 1;
        sx1 = sx1 < sx2 ? sx1 : sx2;
        if (sx1 - fsx1 > 1e-3) {
            tab[k].di = dx * cn;
            tab[k].si = (sx1 - 1) * cn;
            tab[k++].alpha = (float)((sx1 - fsx1) / cell);
        }
        for (int sx = sx1; sx < sx2; sx++) {
            tab[k].di = dx * cn;
            tab[k].si = sx * cn;
            tab[k++].alpha = (float)(1.0 / cell);
        }
        if (fsx2 - sx2 > 1e-3) {
            double part = fsx2 - sx2 < 1. ? fsx2 - sx2 : 1.;
            tab[k].di = dx * cn;
            tab[k].si = sx2 * cn;
            tab[k++].alpha = (float)((part < cell ? part : cell) / cell);
        }
    }
    return k;
}

static void interp_store_row(const float *sum, int width, uint8_t *D)
{
    for (int dx = 0; dx < width; dx++)
        D[dx] = interp_u8f(sum[dx]);
}

static int interp_area(const uint8_t *src, size_t sstep, int sw, int sh, int cn, uint8_t *dst,
                       size_t dstep, int dw, int dh, double scale_x, double scale_y)
{
    int width = dw * cn;
    /* a table entry per (output, source) pixel pair: at most source + 2 x output of them */
    size_t xcap = (size_t)sw + 2 * (size_t)dw + 2, ycap = (size_t)sh + 2 * (size_t)dh + 2;
    interp_decimate *xtab = malloc(sizeof *xtab * (xcap + ycap));
    float *buf = malloc(sizeof(float) * 2 * (size_t)width);
    if (xtab == NULL || buf == NULL) {
        free(xtab);
        free(buf);
        return -1;
    }
    interp_decimate *ytab = xtab + xcap;
    float *sum = buf + width;
    int xtab_size = interp_area_tab(sw, dw, cn, scale_x, xtab);
    int ytab_size = interp_area_tab(sh, dh, 1, scale_y, ytab);
    int prev_dy = ytab_size ? ytab[0].di : 0;
    memset(sum, 0, sizeof(float) * (size_t)width);
    for (int j = 0; j < ytab_size; j++) {
        float beta = ytab[j].alpha;
        int dy = ytab[j].di;
        const uint8_t *S = src + sstep * (size_t)ytab[j].si;
        if (j > 0 && ytab[j].si == ytab[j - 1].si)
            goto accumulate; /* the same source row: the same horizontal sums */
        memset(buf, 0, sizeof(float) * (size_t)width);
        for (int k = 0; cn == 3 && k < xtab_size;) { /* the common case, unrolled */
            int dxn = xtab[k].di;
            float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f;
            do {
                const uint8_t *P = S + xtab[k].si;
                float alpha = xtab[k].alpha;
                acc0 = acc0 + (float)P[0] * alpha;
                acc1 = acc1 + (float)P[1] * alpha;
                acc2 = acc2 + (float)P[2] * alpha;
                k++;
            } while (k < xtab_size && xtab[k].di == dxn);
            buf[dxn] = acc0;
            buf[dxn + 1] = acc1;
            buf[dxn + 2] = acc2;
        }
        for (int k = 0; cn != 3 && k < xtab_size;) { /* a pixel's taps in order, in registers */
            int dxn = xtab[k].di;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            for (; k < xtab_size && xtab[k].di == dxn; k++) {
                const uint8_t *P = S + xtab[k].si;
                float alpha = xtab[k].alpha;
                for (int c = 0; c < cn && c < 4; c++)
                    acc[c] = acc[c] + (float)P[c] * alpha;
            }
            for (int c = 0; c < cn && c < 4; c++)
                buf[dxn + c] = acc[c];
        }
    accumulate:
        if (dy != prev_dy) {
            interp_store_row(sum, width, dst + dstep * (size_t)prev_dy);
            for (int dx = 0; dx < width; dx++)
                sum[dx] = beta * buf[dx];
            prev_dy = dy;
        } else {
            for (int dx = 0; dx < width; dx++)
                sum[dx] = sum[dx] + beta * buf[dx];
        }
    }
    interp_store_row(sum, width, dst + dstep * (size_t)prev_dy);
    free(xtab);
    free(buf);
    return 0;
}

/* --- separable kernels: bilinear (and area below a factor of 1), Lanczos-4 ---------------- */

static void interp_lanczos4(float x, float *coeffs)
{
    static const double s45 = 0.70710678118654752440084436210485;
    static const double cs[8][2] = {{1, 0}, {-s45, -s45}, {0, 1}, {s45, -s45},
                                    {-1, 0}, {s45, s45},   {0, -1}, {-s45, s45}};
    const double pi = 3.1415926535897932384626433832795;
    float sum = 0;
    double y0 = -(double)(x + 3) * pi * 0.25, s0 = sin(y0), c0 = cos(y0);
    for (int i = 0; i < 8; i++) {
        float y0_ = x + 3 - (float)i;
        if (fabsf(y0_) >= 1e-6f) {
            double y = -(double)y0_ * pi * 0.25;
            coeffs[i] = (float)((cs[i][0] * s0 + cs[i][1] * c0) / (y * y));
        } else {
            coeffs[i] = 1e30f;
        }
        sum += coeffs[i];
    }
    sum = 1.f / sum;
    for (int i = 0; i < 8; i++)
        coeffs[i] *= sum;
}

/* OpenCV's interpolateCubic (A = -0.75), in float32 as it computes them */
static void interp_cubic(float x, float *coeffs)
{
    const float A = -0.75f;
    float x1 = x + 1.f, r = 1.f - x;
    coeffs[0] = ((A * x1 - 5.f * A) * x1 + 8.f * A) * x1 - 4.f * A;
    coeffs[1] = ((A + 2.f) * x - (A + 3.f)) * x * x + 1.f;
    coeffs[2] = ((A + 2.f) * r - (A + 3.f)) * r * r + 1.f;
    coeffs[3] = 1.f - coeffs[0] - coeffs[1] - coeffs[2];
}

/* the tap position and coefficients of output ``d`` along an axis (hal::resize's loops) */
static int interp_taps(int d, double scale, double inv_scale, int area_mode, int method,
                       int ksize, int16_t *coef)
{
    float f, cbuf[8];
    int s;
    if (!area_mode) {
        f = (float)((d + 0.5) * scale - 0.5);
        s = (int)floorf(f);
        f -= (float)s;
    } else {
        s = (int)floor(d * scale);
        f = (float)((d + 1) - (s + 1) * inv_scale);
        f = f <= 0 ? 0.f : f - floorf(f);
    }
    if (method == INTERP_LANCZOS4) {
        interp_lanczos4(f, cbuf);
    } else if (method == INTERP_CUBIC) {
        interp_cubic(f, cbuf);
    } else {
        cbuf[0] = 1.f - f;
        cbuf[1] = f;
    }
    for (int k = 0; k < ksize; k++)
        coef[k] = interp_short(cbuf[k] * (float)INTERP_COEF_SCALE);
    return s;
}

/* One output pixel's ``ksize`` taps from ``S`` + sx - back on, those outside the row stepped
 * back inside a channel at a time (hal::resize's border handling across). */
static void interp_hpixel_clamped(const uint8_t *S, int32_t *R, int sx, int back, int cn,
                                  int swidth, int ksize, const int16_t *a)
{
    for (int c = 0; c < cn; c++) {
        int32_t v = 0;
        for (int j = 0; j < ksize; j++) {
            int sxj = sx + c - back + j * cn;
            while (sxj < 0)
                sxj += cn;
            while (sxj >= swidth)
                sxj -= cn;
            v += S[sxj] * a[j];
        }
        R[c] = v;
    }
}

/* The 3-channel bicubic pass across with SSSE3 (where the CPU has it; integer sums, so the
 * same values as the scalar loop): per output pixel, the 12 bytes of its 4 taps reordered to
 * (tap 0, tap 1) and (tap 2, tap 3) pairs per channel and summed with pmaddwd against
 * ``pairs`` (16 int16 a pixel: a0 a1 a0 a1 a0 a1 0 0, a2 a3 a2 a3 a2 a3 0 0). Reads 16 bytes
 * from the first tap: the caller keeps that inside the row. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define INTERP_SSSE3 1
#include <tmmintrin.h>

__attribute__((target("ssse3"))) static void
interp_cubic3_ssse3(const uint8_t *S, int32_t *R, const int *xofs, const int16_t *pairs,
                    int from, int to)
{
    const __m128i order = _mm_setr_epi8(0, 3, 1, 4, 2, 5, -1, -1, 6, 9, 7, 10, 8, 11, -1, -1);
    const __m128i zero = _mm_setzero_si128();
    for (int px = from; px < to; px++) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(S + xofs[px] - 3));
        bytes = _mm_shuffle_epi8(bytes, order);
        const __m128i *a = (const __m128i *)(pairs + 16 * (size_t)px);
        __m128i sum = _mm_add_epi32(_mm_madd_epi16(_mm_unpacklo_epi8(bytes, zero),
                                                   _mm_loadu_si128(a)),
                                    _mm_madd_epi16(_mm_unpackhi_epi8(bytes, zero),
                                                   _mm_loadu_si128(a + 1)));
        int32_t *T = R + 3 * (size_t)px;
        _mm_storel_epi64((__m128i *)T, sum);
        T[2] = _mm_cvtsi128_si32(_mm_srli_si128(sum, 8));
    }
}

static int interp_has_ssse3(void)
{
    return __builtin_cpu_supports("ssse3") != 0; /* libgcc's table, filled at load time */
}
#else
#define INTERP_SSSE3 0
#endif

/* interp_cubic3_ssse3's coefficient pairs for ``dw`` pixels of 4 taps each (NULL: none) */
static int16_t *interp_cubic_pairs(const int16_t *alpha, int dw)
{
    int16_t *pairs = malloc(sizeof(int16_t) * 16 * (size_t)dw);
    for (int px = 0; pairs != NULL && px < dw; px++) {
        const int16_t *a = alpha + 4 * (size_t)px;
        int16_t *p = pairs + 16 * (size_t)px;
        for (int c = 0; c < 3; c++) {
            p[2 * c] = a[0];
            p[2 * c + 1] = a[1];
            p[8 + 2 * c] = a[2];
            p[8 + 2 * c + 1] = a[3];
        }
        p[6] = p[7] = p[14] = p[15] = 0;
    }
    return pairs;
}

/* The bicubic pass across: the pixels whose 4 taps lie inside the row ([xmin, xmax)) in one
 * tight loop (3 channels with ``pairs``: SSSE3), the others clamped. */
static void interp_hrow_cubic(const uint8_t *S, int32_t *R, int sw, int cn, int dw,
                              const int *xofs, const int16_t *alpha, const int16_t *pairs,
                              int xmin, int xmax)
{
    int swidth = sw * cn, mid_end = xmax > xmin ? xmax : xmin;
    for (int px = 0; px < xmin && px < dw; px++)
        interp_hpixel_clamped(S, R + px * cn, xofs[px], cn, cn, swidth, 4, alpha + 4 * px);
    int px = xmin;
#if INTERP_SSSE3
    if (pairs != NULL && cn == 3) {
        int fast_end = xmin; /* 16 bytes readable from the first tap */
        while (fast_end < mid_end && xofs[fast_end] + 13 <= swidth)
            fast_end++;
        interp_cubic3_ssse3(S, R, xofs, pairs, xmin, fast_end);
        px = fast_end;
    }
#else
    (void)pairs;
#endif
    for (; px < mid_end; px++) {
        const uint8_t *P = S + xofs[px] - cn;
        const int16_t *a = alpha + 4 * px;
        int a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        int32_t *T = R + px * cn;
        if (cn == 3) {
            T[0] = P[0] * a0 + P[3] * a1 + P[6] * a2 + P[9] * a3;
            T[1] = P[1] * a0 + P[4] * a1 + P[7] * a2 + P[10] * a3;
            T[2] = P[2] * a0 + P[5] * a1 + P[8] * a2 + P[11] * a3;
        } else {
            for (int c = 0; c < cn; c++)
                T[c] = P[c] * a0 + P[c + cn] * a1 + P[c + 2 * cn] * a2 + P[c + 3 * cn] * a3;
        }
    }
    for (px = mid_end > xmin ? mid_end : xmin; px < dw; px++)
        interp_hpixel_clamped(S, R + px * cn, xofs[px], cn, cn, swidth, 4, alpha + 4 * px);
}

/* One source row resized across (hal::resize's horizontal pass, int sums of 11-bit taps):
 * ``xofs`` the first tap of each output pixel (times cn), taps outside [xmin, xmax) clamped. */
static void interp_hrow(const uint8_t *S, int32_t *R, int sw, int cn, int dw, int ksize,
                        const int *xofs, const int16_t *alpha, const int16_t *pairs, int xmin,
                        int xmax)
{
    int swidth = sw * cn;
    if (ksize == 4) {
        interp_hrow_cubic(S, R, sw, cn, dw, xofs, alpha, pairs, xmin, xmax);
        return;
    }
    for (int px = 0; px < dw; px++, R += cn) {
        const int16_t *a = alpha + (size_t)ksize * px;
        int sx = xofs[px];
        if (ksize == 2) {
            if (px < xmax)
                for (int c = 0; c < cn; c++)
                    R[c] = S[sx + c] * a[0] + S[sx + cn + c] * a[1];
            else
                for (int c = 0; c < cn; c++)
                    R[c] = S[sx + c] * INTERP_COEF_SCALE;
        } else if (px >= xmin && px < xmax) { /* Lanczos-4 */
            const uint8_t *P = S + sx - 3 * cn;
            for (int c = 0; c < cn; c++) {
                int32_t v = 0;
                for (int j = 0; j < 8; j++)
                    v += P[c + j * cn] * a[j];
                R[c] = v;
            }
        } else { /* taps outside the image step back inside, a channel at a time */
            interp_hpixel_clamped(S, R, sx, 3 * cn, cn, swidth, 8, a);
        }
    }
}

/* The bicubic vertical pass (VResizeCubic with its SSE2 helper): the row's values in blocks of
 * 8 as float32 (taps scaled by 2^-22, products summed in tap order, rounded to nearest even),
 * the rest (width % 8) in int ((sum + 2^21) >> 22); both saturated to uint8. ``simd`` 0: the
 * blocks in scalar float32 (the same operations, the same values). */
static void interp_vcubic(const int32_t *const *taps, const int16_t *b, int width, uint8_t *D,
                          int simd)
{
    const float scale = 1.f / (float)(INTERP_COEF_SCALE * INTERP_COEF_SCALE);
    float b0 = (float)b[0] * scale, b1 = (float)b[1] * scale, b2 = (float)b[2] * scale,
          b3 = (float)b[3] * scale;
    int blocks = width - width % 8, e = 0;
#if defined(__SSE2__)
    __m128 v0 = _mm_set1_ps(b0), v1 = _mm_set1_ps(b1), v2 = _mm_set1_ps(b2), v3 = _mm_set1_ps(b3);
    for (; simd && e < blocks; e += 8) { /* the same operations, 4 lanes at a time */
        __m128i q[2];
        for (int h = 0; h < 2; h++) {
            int o = e + 4 * h;
#define INTERP_TAP(k) _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)(taps[k] + o)))
            __m128 s = _mm_mul_ps(INTERP_TAP(3), v3);
            s = _mm_add_ps(_mm_mul_ps(INTERP_TAP(2), v2), s);
            s = _mm_add_ps(_mm_mul_ps(INTERP_TAP(1), v1), s);
            s = _mm_add_ps(_mm_mul_ps(INTERP_TAP(0), v0), s);
#undef INTERP_TAP
            q[h] = _mm_cvtps_epi32(s);
        }
        __m128i words = _mm_packs_epi32(q[0], q[1]);
        _mm_storel_epi64((__m128i *)(D + e), _mm_packus_epi16(words, words));
    }
#else
    (void)simd;
#endif
    for (; e < blocks; e++) {
        float s = (float)taps[3][e] * b3;
        s = (float)taps[2][e] * b2 + s;
        s = (float)taps[1][e] * b1 + s;
        s = (float)taps[0][e] * b0 + s;
        D[e] = interp_u8f(s);
    }
    for (; e < width; e++) {
        int64_t v = (int64_t)taps[0][e] * b[0] + (int64_t)taps[1][e] * b[1]
                    + (int64_t)taps[2][e] * b[2] + (int64_t)taps[3][e] * b[3];
        v = (v + (1 << 21)) >> 22;
        D[e] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
}

static int interp_separable(const uint8_t *src, size_t sstep, int sw, int sh, int cn,
                            uint8_t *dst, size_t dstep, int dw, int dh, double inv_x,
                            double inv_y, int method, int simd)
{
    int ksize = method == INTERP_LANCZOS4 ? 8 : (method == INTERP_CUBIC ? 4 : 2);
    int half = ksize / 2;
    int area_mode = method == INTERP_AREA;
    double scale_x = 1. / inv_x, scale_y = 1. / inv_y;
    int width = dw * cn, xmin = 0, xmax = dw;
    int *xofs = malloc(sizeof(int) * ((size_t)dw + (size_t)dh));
    int16_t *alpha = malloc(sizeof(int16_t) * (size_t)ksize * ((size_t)dw + (size_t)dh));
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)ksize * (size_t)width);
    if (xofs == NULL || alpha == NULL || rows == NULL) {
        free(xofs);
        free(alpha);
        free(rows);
        return -1;
    }
    int *yofs = xofs + dw;
    int16_t *beta = alpha + (size_t)ksize * dw;
    for (int dx = 0; dx < dw; dx++) {
        int16_t *a = alpha + (size_t)ksize * dx;
        int sx = interp_taps(dx, scale_x, inv_x, area_mode, method, ksize, a);
        if (sx < half - 1) {
            xmin = dx + 1;
            if (sx < 0 && ksize == 2) {
                sx = 0;
                a[0] = INTERP_COEF_SCALE; /* fx = 0 */
                a[1] = 0;
            }
        }
        if (sx + half >= sw) {
            xmax = xmax < dx ? xmax : dx;
            if (sx >= sw - 1 && ksize == 2) {
                sx = sw - 1;
                a[0] = INTERP_COEF_SCALE;
                a[1] = 0;
            }
        }
        xofs[dx] = sx * cn;
    }
    for (int dy = 0; dy < dh; dy++)
        yofs[dy] = interp_taps(dy, scale_y, inv_y, area_mode, method, ksize, beta + ksize * dy);
    int16_t *pairs = NULL; /* 3-channel bicubic across with SSSE3 (NULL: the scalar loop) */
#if INTERP_SSSE3
    if (simd && ksize == 4 && cn == 3 && interp_has_ssse3())
        pairs = interp_cubic_pairs(alpha, dw);
#endif
    int tags[8];
    const int32_t *taps[8];
    for (int k = 0; k < ksize; k++)
        tags[k] = -1;
    for (int dy = 0; dy < dh; dy++) {
        const int16_t *b = beta + ksize * dy;
        for (int k = 0; k < ksize; k++) { /* the rows the taps read, clamped; each resized once */
            int sy = yofs[dy] - half + 1 + k;
            sy = sy < 0 ? 0 : (sy >= sh ? sh - 1 : sy);
            int slot = sy % ksize; /* a dy's rows lie within ksize consecutive ones: no clash */
            int32_t *R = rows + (size_t)slot * width;
            if (tags[slot] != sy) {
                interp_hrow(src + sstep * (size_t)sy, R, sw, cn, dw, ksize, xofs, alpha, pairs,
                            xmin, xmax);
                tags[slot] = sy;
            }
            taps[k] = R;
        }
        uint8_t *D = dst + dstep * (size_t)dy;
        if (ksize == 2) { /* the bilinear fixed point: 4 bits dropped, high halves, >> 2 */
            int b0 = b[0], b1 = b[1];
            for (int e = 0; e < width; e++) {
                int v = ((b0 * (taps[0][e] >> 4)) >> 16) + ((b1 * (taps[1][e] >> 4)) >> 16);
                D[e] = interp_u8((v + 2) >> 2);
            }
        } else if (ksize == 4) {
            interp_vcubic(taps, b, width, D, simd);
        } else {
            for (int e = 0; e < width; e++) {
                int64_t v = 0;
                for (int k = 0; k < 8; k++)
                    v += (int64_t)taps[k][e] * b[k];
                D[e] = interp_u8((int)((v + (1 << 21)) >> 22));
            }
        }
    }
    free(xofs);
    free(alpha);
    free(rows);
    free(pairs);
    return 0;
}

/* --- cv::hal::resize's choice ------------------------------------------------------------- */

/* interp_resize with ``simd`` 0: the scalar loops only (for the tests: the same values) */
static int interp_resize_simd(const uint8_t *src, size_t sstep, int sw, int sh, int cn,
                              uint8_t *dst, size_t dstep, int dw, int dh, double inv_x,
                              double inv_y, int method, int simd)
{
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1 || !(inv_x > 0) || !(inv_y > 0))
        return -1;
    if (dw == sw && dh == sh) { /* cv::resize copies */
        for (int y = 0; y < dh; y++)
            memcpy(dst + dstep * (size_t)y, src + sstep * (size_t)y, (size_t)dw * cn);
        return 0;
    }
    if (method == INTERP_NEAREST)
        return interp_nearest(src, sstep, sw, sh, cn, dst, dstep, dw, dh, inv_x, inv_y);
    if (method != INTERP_LINEAR && method != INTERP_CUBIC && method != INTERP_AREA
        && method != INTERP_LANCZOS4)
        return -1;
    double scale_x = 1. / inv_x, scale_y = 1. / inv_y;
    int ix = interp_round(scale_x), iy = interp_round(scale_y);
    int area_fast = fabs(scale_x - ix) < DBL_EPSILON && fabs(scale_y - iy) < DBL_EPSILON;
    if (method == INTERP_LINEAR && area_fast && ix == 2 && iy == 2)
        method = INTERP_AREA;
    if (method == INTERP_AREA && scale_x >= 1 && scale_y >= 1) {
        if (area_fast)
            return interp_area_fast(src, sstep, sw, sh, cn, dst, dstep, dw, dh, ix, iy);
        return interp_area(src, sstep, sw, sh, cn, dst, dstep, dw, dh, scale_x, scale_y);
    }
    return interp_separable(src, sstep, sw, sh, cn, dst, dstep, dw, dh, inv_x, inv_y, method,
                            simd);
}

static int interp_resize(const uint8_t *src, size_t sstep, int sw, int sh, int cn, uint8_t *dst,
                         size_t dstep, int dw, int dh, double inv_x, double inv_y, int method)
{
    return interp_resize_simd(src, sstep, sw, sh, cn, dst, dstep, dw, dh, inv_x, inv_y, method,
                              1);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
