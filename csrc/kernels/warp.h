/* MXNet's affine step and pad for recpipe._batch, kept out of batch/batch.c: the planned matrix (plan/plan.h's, the Python path's) rounded to float32 as
 * cv2 gets it, OpenCV 5.0.0's cv2.warpAffine for uint8 images with INTER_LINEAR
 * and BORDER_CONSTANT reproduced bit for bit, cv2.copyMakeBorder's constant pad, and the float32
 * output table of the Python path's cv2 writers (Renderer._write).
 *
 * cv2.warpAffine (imgproc's warpAffineLinearInvoker_8UC1/_8UC3): the forward matrix (float32 in
 * Python, exact in double) is inverted in double (invertAffineTransform's operation order), then
 * rounded to float. Each destination row is processed in blocks of ``lanes`` columns (two SIMD
 * registers of float32: 16 with AVX2) and a scalar tail; the source coordinate of a block column
 * is fmaf(M0, x, (float)(y * M1) + M2) (M1 * y rounded, then the add rounded: the row term),
 * that of a tail column fmaf(x, M0, y * M1) + M2. Then ix = floor(sx), alpha = sx - ix (exact),
 * the four taps (taps outside the image take the border value; a pixel all of whose taps are
 * outside is the border value), v0 = fmaf(alpha, p01 - p00, p00), v1 = fmaf(alpha, p11 - p10,
 * p10), v = fmaf(beta, v1 - v0, v0), rounded to nearest even and saturated to uint8. ``lanes``
 * depends on the SIMD width OpenCV dispatched to; recpipe.decode.native measures it once against
 * cv2 (warp_lanes) and keeps the affine step on the Python path when no candidate matches.
 * Proved against cv2.warpAffine by tests/decode/test_native_affine.py. */
#ifndef RECPIPE_WARP_H
#define RECPIPE_WARP_H

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE__
#include <xmmintrin.h>
#endif

/* cv::invertAffineTransform as warpAffine applies it (double, this order). */
static void warp_invert(const double fwd[6], double inv[6])
{
    double m[6];
    memcpy(m, fwd, sizeof m);
    double d = m[0] * m[4] - m[1] * m[3];
    d = d != 0 ? 1. / d : 0;
    double a11 = m[4] * d, a22 = m[0] * d;
    m[0] = a11;
    m[1] *= -d;
    m[3] *= -d;
    m[4] = a22;
    double b1 = -m[0] * m[2] - m[1] * m[5];
    double b2 = -m[3] * m[2] - m[4] * m[5];
    m[2] = b1;
    m[5] = b2;
    memcpy(inv, m, sizeof m);
}

/* cvFloor of a float as OpenCV's SIMD v_floor gives it (out of int range: INT_MIN). */
static inline int warp_floor(float v)
{
    if (!(v >= -2147483648.0f && v < 2147483648.0f))
        return INT_MIN;
    return (int)floorf(v);
}

/* cvRound: to nearest, ties to even (the SSE conversion, not a libm call per value). */
static inline int warp_round(float v)
{
#ifdef __SSE__
    return _mm_cvtss_si32(_mm_set_ss(v));
#else
    return (int)lrintf(v);
#endif
}

typedef struct {
    const uint8_t *src;
    long src_h, src_w;
    size_t src_stride;
    int channels; /* 1 or 3 */
    long dst_w;   /* the whole warped image's width (which columns are in a block) */
    long x0, y0, x1, y1; /* the part of it computed: [x0, x1) x [y0, y1) */
    uint8_t *dst;        /* where pixel (y0, x0) goes */
    size_t dst_stride;
    double inverse[6]; /* destination -> source (warp_invert of the forward matrix) */
    uint8_t fill;
    int lanes; /* OpenCV's block width: 8, 16 or 32 columns */
} warp_job;

/* One destination pixel from its source coordinate. */
static inline __attribute__((always_inline)) void warp_pixel(const warp_job *j, float sx,
                                                             float sy, uint8_t *out)
{
    int ix = warp_floor(sx), iy = warp_floor(sy), cn = j->channels;
    if (ix < -1 || ix >= j->src_w || iy < -1 || iy >= j->src_h) {
        for (int c = 0; c < cn; c++)
            out[c] = j->fill;
        return;
    }
    float alpha = sx - (float)ix, beta = sy - (float)iy, fill = (float)j->fill;
    if (ix >= 0 && iy >= 0 && ix + 1 < j->src_w && iy + 1 < j->src_h) { /* all four inside */
        const uint8_t *p0 = j->src + (size_t)iy * j->src_stride + (size_t)ix * (size_t)cn;
        const uint8_t *p1 = p0 + j->src_stride;
        for (int c = 0; c < cn; c++) {
            float p00 = p0[c], p01 = p0[cn + c], p10 = p1[c], p11 = p1[cn + c];
            float v0 = fmaf(alpha, p01 - p00, p00);
            float v1 = fmaf(alpha, p11 - p10, p10);
            int r = warp_round(fmaf(beta, v1 - v0, v0));
            out[c] = (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
        }
        return;
    }
    int in_x0 = ix >= 0, in_x1 = ix + 1 < j->src_w, in_y0 = iy >= 0, in_y1 = iy + 1 < j->src_h;
    const uint8_t *row0 = j->src + (ptrdiff_t)iy * (ptrdiff_t)j->src_stride + (ptrdiff_t)ix * cn;
    const uint8_t *row1 = row0 + j->src_stride;
    for (int c = 0; c < cn; c++) {
        float p00 = in_y0 && in_x0 ? (float)row0[c] : fill;
        float p01 = in_y0 && in_x1 ? (float)row0[cn + c] : fill;
        float p10 = in_y1 && in_x0 ? (float)row1[c] : fill;
        float p11 = in_y1 && in_x1 ? (float)row1[cn + c] : fill;
        float v0 = fmaf(alpha, p01 - p00, p00);
        float v1 = fmaf(alpha, p11 - p10, p10);
        float v = fmaf(beta, v1 - v0, v0);
        int r = warp_round(v);
        out[c] = (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
    }
}

static inline __attribute__((always_inline)) void warp_rows(const warp_job *j)
{
    float m[6];
    for (int i = 0; i < 6; i++)
        m[i] = (float)j->inverse[i];
    long blocks_end = j->dst_w - j->dst_w % j->lanes;
    for (long y = j->y0; y < j->y1; y++) {
        float yf = (float)y;
        volatile float row_x = yf * m[1], row_y = yf * m[4]; /* rounded: no contraction */
        float mx = row_x + m[2], my = row_y + m[5];
        uint8_t *out = j->dst + (size_t)(y - j->y0) * j->dst_stride;
        for (long x = j->x0; x < j->x1; x++, out += j->channels) {
            float xf = (float)x, sx, sy;
            if (x < blocks_end) {
                sx = fmaf(m[0], xf, mx);
                sy = fmaf(m[3], xf, my);
            } else {
                sx = fmaf(xf, m[0], row_x) + m[2];
                sy = fmaf(xf, m[3], row_y) + m[5];
            }
            warp_pixel(j, sx, sy, out);
        }
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target("fma"))) static void warp_rows_fma(const warp_job *j)
{
    warp_rows(j);
}
#define WARP_HAS_FMA_CLONE 1
#endif

static void warp_rows_portable(const warp_job *j)
{
    warp_rows(j); /* fmaf from libm: exact, slower */
}

/* The [x0, x1) x [y0, y1) part of cv2.warpAffine(src, forward, (dst_w, any height),
 * INTER_LINEAR, BORDER_CONSTANT, fill) into ``j->dst`` (``j->inverse``: warp_invert of the
 * forward matrix). */
static void warp_affine_linear(const warp_job *j)
{
#ifdef WARP_HAS_FMA_CLONE
    if (__builtin_cpu_supports("fma")) {
        warp_rows_fma(j);
        return;
    }
#endif
    warp_rows_portable(j);
}

/* The planned forward matrix (csrc/plan/plan.h, doubles) as cv2 gets it: float32 values. */
static void warp_forward(const double matrix[6], double forward[6])
{
    /* rounded through volatile floats: GCC 12's SLP vectorizer (-O3) dropped the float
     * rounding of the last two when stored straight */
    volatile float rounded[6];
    for (int i = 0; i < 6; i++)
        rounded[i] = (float)matrix[i];
    for (int i = 0; i < 6; i++)
        forward[i] = rounded[i];
}

/* The out_h x out_w crop at (x, y) of MXNet's work image into ``crop`` (out_w x channels a
 * row): the work image is ``img`` (img_h x img_w x channels, ``stride`` bytes a row) warped to
 * work_h x work_w by the forward matrix ``forward`` (NULL: not warped, work = img), then framed
 * by ``pad`` pixels of ``fill`` (cv2.copyMakeBorder, BORDER_CONSTANT). Only the crop's pixels
 * are computed. */
static void work_crop(const uint8_t *img, long img_h, long img_w, size_t stride, int channels,
                      const double *forward, long work_h, long work_w, long pad, long x, long y,
                      long out_h, long out_w, uint8_t fill, int lanes, uint8_t *crop)
{
    size_t crop_stride = (size_t)out_w * (size_t)channels;
    memset(crop, fill, crop_stride * (size_t)out_h);
    /* the crop's part of the interior, in work-image coordinates */
    long ax0 = (x > pad ? x : pad) - pad, ay0 = (y > pad ? y : pad) - pad;
    long ax1 = (x + out_w < pad + work_w ? x + out_w : pad + work_w) - pad;
    long ay1 = (y + out_h < pad + work_h ? y + out_h : pad + work_h) - pad;
    if (ax0 >= ax1 || ay0 >= ay1)
        return;
    uint8_t *dst = crop + (size_t)(ay0 + pad - y) * crop_stride
                   + (size_t)(ax0 + pad - x) * (size_t)channels;
    if (forward == NULL) {
        for (long row = ay0; row < ay1; row++)
            memcpy(dst + (size_t)(row - ay0) * crop_stride,
                   img + (size_t)row * stride + (size_t)ax0 * (size_t)channels,
                   (size_t)(ax1 - ax0) * (size_t)channels);
        return;
    }
    warp_job j = {img, img_h, img_w, stride, channels, work_w, ax0, ay0, ax1, ay1, dst,
                  crop_stride, {0}, fill, lanes};
    warp_invert(forward, j.inverse);
    warp_affine_linear(&j);
}

#endif
