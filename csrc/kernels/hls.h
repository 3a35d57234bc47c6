/*
 * The HLS shift (random_h/s/l) on uint8 RGB pixels: OpenCV 5.0.0's uint8 RGB<->HLS conversions,
 * which compute in float32 with one formula in their vector loop (8 pixels at a time, AVX2) and
 * another in the scalar loop that ends each block of 256 pixels; both are reproduced, each pixel
 * with the one cv2's AVX2 build uses at its place in the row (convert_row). These are recpipe's
 * HLS pixels on every CPU (the same values with or without AVX2: fmaf is exact either way);
 * tests/decode/test_native_colour.py checks them against cv2.cvtColor on this machine.
 *
 * Everything here is evaluated without contraction into fused multiply-adds, except where
 * OpenCV itself fuses (fmaf).
 */
#ifndef RECPIPE_KERNELS_HLS_H
#define RECPIPE_KERNELS_HLS_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off", "no-trapping-math") /* value-safe: lets selects vectorise */
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define CV_BLOCK 256 /* OpenCV's colour conversions work in blocks of this many pixels */
#define CV_LANES 8   /* ... and their vector loops (AVX2) on this many float32 at a time */

static inline uint8_t cv_u8(float value) /* saturate_cast<uchar>(float): round half to even */
{
    long rounded = lrintf(value);
    return (uint8_t)(rounded < 0 ? 0 : (rounded > 255 ? 255 : rounded));
}

/* RGB2HLS_f's scalar loop on one pixel of r, g, b in [0, 1] (hscale 0.5: H in [0, 180]). */
static void hls_of(float r, float g, float b, float hls[3])
{
    float h = 0.f, s = 0.f;
    float vmax = r, vmin = r;
    if (vmax < g)
        vmax = g;
    if (vmax < b)
        vmax = b;
    if (vmin > g)
        vmin = g;
    if (vmin > b)
        vmin = b;
    float diff = vmax - vmin;
    float l = (vmax + vmin) * 0.5f;
    if (diff > FLT_EPSILON) {
        s = l < 0.5f ? diff / (vmax + vmin) : diff / (2 - vmax - vmin);
        diff = 60.f / diff;
        if (vmax == r) /* OpenCV's AVX2 build contracts these into fused multiply-adds */
            h = (g - b) * diff;
        else if (vmax == g)
            h = fmaf(b - r, diff, 120.f);
        else
            h = fmaf(r - g, diff, 240.f);
        if (h < 0.f)
            h += 360.f;
    }
    hls[0] = h * (180.f / 360.f);
    hls[1] = l;
    hls[2] = s;
}

/* HLS2RGB_f's scalar loop on one pixel (h in [0, 180], l and s in [0, 1]) -> r, g, b. */
static void rgb_of(float h, float l, float s, float rgb[3])
{
    if (s == 0) {
        rgb[0] = rgb[1] = rgb[2] = l;
        return;
    }
    static const int sector_tab[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                         {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
    float tab[4];
    float p2 = l <= 0.5f ? l * (1 + s) : l + s - l * s;
    float p1 = 2 * l - p2;
    h *= 6.f / 180.f;
    if (h < 0)
        do
            h += 6;
        while (h < 0);
    else if (h >= 6)
        do
            h -= 6;
        while (h >= 6);
    int sector = (int)floorf(h);
    h -= (float)sector;
    tab[0] = p2;
    tab[1] = p1;
    tab[2] = p1 + (p2 - p1) * (1 - h);
    tab[3] = p1 + (p2 - p1) * h;
    rgb[2] = tab[sector_tab[sector][0]]; /* b */
    rgb[1] = tab[sector_tab[sector][1]];
    rgb[0] = tab[sector_tab[sector][2]]; /* r */
}

/* cv2.cvtColor(RGB2HLS) (uint8, H 0-180) of one pixel by cv2's scalar loop. */
static void rgb2hls_u8(const uint8_t *rgb, uint8_t *hls)
{
    float out[3];
    hls_of(rgb[0] * (1.f / 255.f), rgb[1] * (1.f / 255.f), rgb[2] * (1.f / 255.f), out);
    hls[0] = cv_u8(out[0]);
    hls[1] = cv_u8(out[1] * 255.f);
    hls[2] = cv_u8(out[2] * 255.f);
}

/* cv2.cvtColor(HLS2RGB) (uint8) of one pixel by cv2's scalar loop. */
static void hls2rgb_u8(const uint8_t *hls, uint8_t *rgb)
{
    float out[3];
    rgb_of((float)hls[0], hls[1] * (1.f / 255.f), hls[2] * (1.f / 255.f), out);
    rgb[0] = cv_u8(out[0] * 255.f);
    rgb[1] = cv_u8(out[1] * 255.f);
    rgb[2] = cv_u8(out[2] * 255.f);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define AVX2_FMA 1
#define FAST __attribute__((target("avx2,fma")))
#else
#define AVX2_FMA 0
#endif
#define LANE_LOOP static inline __attribute__((always_inline)) void

/* round half to even and saturate to 0-255, branch-free (vectorises) */
static inline int u8_of(float value)
{
    int rounded = (int)rintf(value);
    rounded = rounded < 0 ? 0 : rounded;
    return rounded > 255 ? 255 : rounded;
}

/* The vector loop of cv2's RGB2HLS on ``count`` pixels, written branch-free so that the
 * compiler vectorises it (the same float32 operations lane by lane). */
LANE_LOOP rgb2hls_lanes(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    for (long i = 0; i < count; i++) {
        float r = src[3 * i] * (1.f / 255.f), g = src[3 * i + 1] * (1.f / 255.f);
        float b = src[3 * i + 2] * (1.f / 255.f);
        float vmax = r > g ? r : g, vmin = r < g ? r : g;
        vmax = vmax > b ? vmax : b;
        vmin = vmin < b ? vmin : b;
        float diff = vmax - vmin, msum = vmax + vmin;
        float l = msum * 0.5f;
        float s = diff / (l < 0.5f ? msum : 2.0f - msum);
        int r_max = vmax == r, g_max = vmax == g;
        float num = r_max ? g - b : (g_max ? b - r : r - g);
        float part = r_max ? (g < b ? 360.f : 0.f) : (g_max ? 120.f : 240.f);
        float h = fmaf(num, 60.f / diff, part) * 0.5f;
        int grey = !(diff > FLT_EPSILON);
        dst[3 * i] = (uint8_t)u8_of(grey ? 0.f : h);
        dst[3 * i + 1] = (uint8_t)u8_of(l * 255.f);
        dst[3 * i + 2] = (uint8_t)u8_of((grey ? 0.f : s) * 255.f);
    }
}

/* The vector loop of cv2's HLS2RGB on ``count`` pixels, branch-free. */
LANE_LOOP hls2rgb_lanes(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    for (long i = 0; i < count; i++) {
        float h = (float)src[3 * i], l = src[3 * i + 1] * (1.f / 255.f);
        float s = src[3 * i + 2] * (1.f / 255.f);
        float ls = l * s;
        float elem0 = l <= 0.5f ? ls : s - ls;
        float raw = h * (6.f / 180.f);
        float pre = truncf(raw);
        float hs = raw - pre;
        float sector = pre - 6.0f * truncf(raw * (1.0f / 6.0f));
        float elem1 = hs + hs;
        float tab0 = l + elem0, tab1 = l - elem0;
        float tab2 = l + elem0 - elem0 * elem1;
        float tab3 = l - elem0 + elem0 * elem1;
        /* cv2's nested v_select, as chains of two-way selects (which vectorise) */
        int lt1 = sector < 1, lt2 = sector < 2, le2 = sector <= 2, lt4 = sector < 4;
        int le4 = sector <= 4;
        float bv = le4 ? tab0 : tab2;
        bv = le2 ? tab3 : bv;
        bv = lt2 ? tab1 : bv;
        float gv = lt4 ? tab2 : tab1;
        gv = le2 ? tab0 : gv;
        gv = lt1 ? tab3 : gv;
        float rv = le4 ? tab3 : tab0;
        rv = lt4 ? tab1 : rv;
        rv = lt2 ? tab2 : rv;
        rv = lt1 ? tab0 : rv;
        dst[3 * i] = (uint8_t)u8_of(rv * 255.f);
        dst[3 * i + 1] = (uint8_t)u8_of(gv * 255.f);
        dst[3 * i + 2] = (uint8_t)u8_of(bv * 255.f);
    }
}

static void rgb2hls_plain(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    rgb2hls_lanes(src, dst, count);
}

static void hls2rgb_plain(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    hls2rgb_lanes(src, dst, count);
}

#if AVX2_FMA
FAST static void rgb2hls_fast(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    rgb2hls_lanes(src, dst, count);
}

FAST static void hls2rgb_fast(const uint8_t *restrict src, uint8_t *restrict dst, long count)
{
    hls2rgb_lanes(src, dst, count);
}
#endif

/* The vector loops, compiled for AVX2 + FMA when the CPU has them (the same values either
 * way: fmaf is exact in both). */
static void hls_vector(int code, const uint8_t *src, uint8_t *dst, long count)
{
#if AVX2_FMA
    static int fast = -1;
    if (fast < 0) {
        __builtin_cpu_init();
        fast = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    if (fast) {
        if (code == 0)
            rgb2hls_fast(src, dst, count);
        else
            hls2rgb_fast(src, dst, count);
        return;
    }
#endif
    if (code == 0)
        rgb2hls_plain(src, dst, count);
    else
        hls2rgb_plain(src, dst, count);
}

/* cv2.cvtColor of one row of ``width`` pixels (``code`` 0: RGB2HLS, 1: HLS2RGB): in blocks of
 * CV_BLOCK pixels, each by the vector loop CV_LANES at a time and its last (size % CV_LANES)
 * pixels by the scalar loop, as OpenCV's AVX2 build does. */
static void convert_row(int code, const uint8_t *src, uint8_t *dst, long width)
{
    for (long start = 0; start < width; start += CV_BLOCK) {
        long size = width - start < CV_BLOCK ? width - start : CV_BLOCK;
        long vector = size - size % CV_LANES;
        const uint8_t *from = src + 3 * start;
        uint8_t *to = dst + 3 * start;
        hls_vector(code, from, to, vector);
        for (long i = vector; i < size; i++) {
            if (code == 0)
                rgb2hls_u8(from + 3 * i, to + 3 * i);
            else
                hls2rgb_u8(from + 3 * i, to + 3 * i);
        }
    }
}

static inline uint8_t shifted(uint8_t value, long delta, long limit)
{
    long v = (long)value + delta;
    return (uint8_t)(v < 0 ? 0 : (v > limit ? limit : v));
}

/* Renderer._shift_hls in place on ``rows`` rows of ``width`` RGB pixels: RGB2HLS, H + dh
 * clipped to [0, 180], L + dl and S + ds to [0, 255], HLS2RGB (each row as cv2 converts it). */
static void shift_hls(uint8_t *pixels, long rows, long width, long dh, long ds, long dl)
{
    uint8_t hls[3 * CV_BLOCK];
    for (long y = 0; y < rows; y++) {
        uint8_t *row = pixels + (size_t)y * (size_t)width * 3;
        for (long start = 0; start < width; start += CV_BLOCK) {
            long size = width - start < CV_BLOCK ? width - start : CV_BLOCK;
            uint8_t *part = row + 3 * start;
            convert_row(0, part, hls, size); /* a whole block: cv2's split within it */
            for (long i = 0; i < size; i++) {
                if (dh)
                    hls[3 * i] = shifted(hls[3 * i], dh, 180);
                if (dl)
                    hls[3 * i + 1] = shifted(hls[3 * i + 1], dl, 255);
                if (ds)
                    hls[3 * i + 2] = shifted(hls[3 * i + 2], ds, 255);
            }
            convert_row(1, hls, part, size);
        }
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
