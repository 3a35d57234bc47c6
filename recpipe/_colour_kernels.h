/* Colour kernels of recpipe._batch (branch nativecolour, issue 21 item 2), kept out of _batch.c:
 *
 * - MXNet's ImageNormalizeParam jitter (max_random_contrast / max_random_illumination): the
 *   per-sample gains and offsets of Renderer._affine_terms, in the same double arithmetic.
 * - PCA lighting (pca_noise): numpy's Generator.standard_normal(3) drawn after the sample's 64
 *   uniforms, through numpy's own ziggurat (random_standard_normal from numpy's libnpyrandom,
 *   linked when setup.py finds it: RECPIPE_NPYRANDOM) fed by our Philox, then
 *   Planner._pca_offsets' float32 arithmetic.
 * - HLS shift (random_h/s/l): OpenCV 5.0.0's uint8 RGB<->HLS conversions, which compute in
 *   float32 with one formula in their vector loop (8 pixels at a time, AVX2) and another in the
 *   scalar loop that ends each block of 256 pixels; both are reproduced, each pixel with the one
 *   cv2 uses at its place in the row (hls_row).
 *
 * Everything here is evaluated without contraction into fused multiply-adds (fp-contract=off),
 * except where OpenCV itself fuses (fmaf).
 */
#ifndef RECPIPE_COLOUR_KERNELS_H
#define RECPIPE_COLOUR_KERNELS_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* numpy's Philox, defined in _batch.c */
static void philox_block(const uint64_t counter[4], const uint64_t key_in[2], uint64_t out[4]);
static double uniform(const uint64_t key[2], uint64_t sample, uint64_t epoch, unsigned which);

#define U_HLS 52  /* h, s, l */
#define U_NORM 61 /* contrast, illumination */
#define CV_BLOCK 256 /* OpenCV's colour conversions work in blocks of this many pixels */
#define CV_LANES 8   /* ... and their vector loops (AVX2) on this many float32 at a time */

/* --- contrast / illumination ---------------------------------------------------------------- */

/* 1 when the run draws MXNet's contrast or illumination per sample. */
static inline int has_norm_jitter(const run_options *opt)
{
    return opt->max_contrast != 0.0 || opt->max_illumination != 0.0;
}

/* Renderer._affine_terms for the sample drawing ``u``: gains * contrast and
 * -mean * gain * contrast + illumination * gain, into ``local`` (a copy of the run's options);
 * unchanged when the draw is neutral (contrast 1, illumination 0), as Python keeps fixed_terms. */
static void norm_terms(const run_options *opt, double u_contrast, double u_illumination,
                       run_options *local)
{
    double contrast = 1.0 + opt->max_contrast * (2 * u_contrast - 1);
    double illumination = opt->max_illumination * (2 * u_illumination - 1);
    if (contrast == 1.0 && illumination == 0.0)
        return;
    for (int c = 0; c < 3; c++) {
        double gain = opt->exact_gains[c] * contrast;
        double offset = -opt->means[c] * gain + illumination * opt->exact_gains[c];
        local->exact_gains[c] = gain;
        local->gains[c] = (float)gain;
        local->offsets[c] = (float)offset;
    }
}

/* --- PCA lighting --------------------------------------------------------------------------- */

static const float PCA_EIGVAL[3] = {55.46f, 4.794f, 1.148f};
static const float PCA_EIGVEC[3][3] = {{-0.5675f, 0.7192f, 0.4009f},
                                       {-0.5808f, -0.0045f, -0.8140f},
                                       {-0.5836f, -0.6948f, 0.4203f}};

#ifdef RECPIPE_NPYRANDOM
#include <numpy/random/distributions.h>
#define PCA_NATIVE 1

/* numpy's Philox state for the outputs after the sample's first ``next`` 64-bit words (the
 * uniforms): counter [block + 1, 0, sample, epoch], four words a block. */
typedef struct {
    const uint64_t *key;
    uint64_t sample, epoch, next, cached_block;
    uint64_t block[4];
} philox_stream;

static uint64_t stream_next64(void *state)
{
    philox_stream *s = state;
    uint64_t block_index = s->next / 4;
    if (block_index != s->cached_block) {
        uint64_t counter[4] = {block_index + 1, 0, s->sample, s->epoch};
        philox_block(counter, s->key, s->block);
        s->cached_block = block_index;
    }
    return s->block[s->next++ % 4];
}

static uint32_t stream_next32(void *state) /* not used by the normal sampler */
{
    return (uint32_t)(stream_next64(state) >> 32);
}

static double stream_double(void *state)
{
    return (double)(stream_next64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Planner.plan's ``rng.standard_normal(3)`` after ``rng.random(N_DRAWN)``. */
static void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch, double out[3])
{
    philox_stream s = {key, sample, epoch, N_DRAWN, UINT64_MAX, {0}};
    bitgen_t bitgen = {&s, stream_next64, stream_next32, stream_double, stream_next64};
    for (int i = 0; i < 3; i++)
        out[i] = random_standard_normal(&bitgen);
}
#else
#define PCA_NATIVE 0
static void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch, double out[3])
{
    (void)key, (void)sample, (void)epoch;
    out[0] = out[1] = out[2] = 0.0;
}
#endif

/* Planner._pca_offsets in float32: alpha = float32(normal) * float32(pca_noise), then
 * eigvec @ (alpha * eigval) as ((v0 * x0 + v1 * x1) + v2 * x2) per row. */
static void pca_offsets(const double normals[3], double pca_noise, float out[3])
{
    float x[3];
    for (int i = 0; i < 3; i++) {
        float alpha = (float)normals[i] * (float)pca_noise;
        x[i] = alpha * PCA_EIGVAL[i];
    }
    for (int r = 0; r < 3; r++) {
        float a = PCA_EIGVEC[r][0] * x[0], b = PCA_EIGVEC[r][1] * x[1];
        float c = PCA_EIGVEC[r][2] * x[2];
        out[r] = (a + b) + c;
    }
}

/* --- HLS shift ------------------------------------------------------------------------------ */

static inline uint8_t cv_u8(float value) /* saturate_cast<uchar>(float): round half to even */
{
    long rounded = lrintf(value);
    return (uint8_t)(rounded < 0 ? 0 : (rounded > 255 ? 255 : rounded));
}

static inline float max3(float a, float b, float c)
{
    float m = a > b ? a : b; /* _mm256_max_ps(a, b): b unless a > b (no NaNs here) */
    return m > c ? m : c;
}

static inline float min3(float a, float b, float c)
{
    float m = a < b ? a : b;
    return m < c ? m : c;
}

/* RGB2HLS_f on one pixel of r, g, b in [0, 1] (hscale 0.5: H in [0, 180]): ``vector`` selects
 * the vector loop's formula, else the scalar loop's. */
static void hls_of(float r, float g, float b, int vector, float hls[3])
{
    const float hscale = 180.f / 360.f;
    float h = 0.f, s = 0.f, l;
    if (vector) {
        float vmax = max3(r, g, b), vmin = min3(r, g, b);
        float diff = vmax - vmin, msum = vmax + vmin;
        l = msum * 0.5f;
        s = diff / (l < 0.5f ? msum : 2.0f - msum);
        float part, num;
        if (vmax == r) {
            num = g - b;
            part = g < b ? 360.f : 0.f;
        } else if (vmax == g) {
            num = b - r;
            part = 120.f;
        } else {
            num = r - g;
            part = 240.f;
        }
        h = fmaf(num, 60.f / diff, part) * hscale;
        if (!(diff > FLT_EPSILON))
            h = s = 0.f;
    } else {
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
        l = (vmax + vmin) * 0.5f;
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
        h = h * hscale;
    }
    hls[0] = h;
    hls[1] = l;
    hls[2] = s;
}

/* HLS2RGB_f on one pixel (h in [0, 180], l and s in [0, 1]) -> r, g, b in [0, 1]. */
static void rgb_of(float h, float l, float s, int vector, float rgb[3])
{
    const float hscale = 6.f / 180.f;
    if (vector) {
        float ls = l * s;
        float elem0 = l <= 0.5f ? ls : s - ls;
        float raw = h * hscale;
        float pre = truncf(raw);
        float hs = raw - pre;
        float sector = pre - 6.0f * truncf(raw * (1.0f / 6.0f));
        float elem1 = hs + hs;
        float tab0 = l + elem0, tab1 = l - elem0;
        float tab2 = l + elem0 - elem0 * elem1;
        float tab3 = l - elem0 + elem0 * elem1;
        float b = sector < 2 ? tab1 : (sector <= 2 ? tab3 : (sector <= 4 ? tab0 : tab2));
        float g = sector < 1 ? tab3 : (sector <= 2 ? tab0 : (sector < 4 ? tab2 : tab1));
        float r = sector < 1 ? tab0
                             : (sector < 2 ? tab2 : (sector < 4 ? tab1 : (sector <= 4 ? tab3 : tab0)));
        rgb[0] = r;
        rgb[1] = g;
        rgb[2] = b;
        return;
    }
    if (s == 0) {
        rgb[0] = rgb[1] = rgb[2] = l;
        return;
    }
    static const int sector_tab[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                         {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
    float tab[4];
    float p2 = l <= 0.5f ? l * (1 + s) : l + s - l * s;
    float p1 = 2 * l - p2;
    h *= hscale;
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

/* Whether cv2 converts pixel ``i`` of a row of ``n`` with its vector loop: blocks of CV_BLOCK
 * pixels, each converted CV_LANES at a time and its last (size % CV_LANES) one by one. */
static inline int vector_pixel(long i, long n)
{
    long block_start = i - i % CV_BLOCK;
    long size = n - block_start < CV_BLOCK ? n - block_start : CV_BLOCK;
    return i - block_start < size - size % CV_LANES;
}

/* cv2.cvtColor(RGB2HLS) (uint8, H 0-180) of one pixel at ``i`` in a row of ``n``. */
static void rgb2hls_u8(const uint8_t *rgb, uint8_t *hls, long i, long n)
{
    float out[3];
    hls_of(rgb[0] * (1.f / 255.f), rgb[1] * (1.f / 255.f), rgb[2] * (1.f / 255.f),
           vector_pixel(i, n), out);
    hls[0] = cv_u8(out[0]);
    hls[1] = cv_u8(out[1] * 255.f);
    hls[2] = cv_u8(out[2] * 255.f);
}

/* cv2.cvtColor(HLS2RGB) (uint8) of one pixel at ``i`` in a row of ``n``. */
static void hls2rgb_u8(const uint8_t *hls, uint8_t *rgb, long i, long n)
{
    float out[3];
    rgb_of((float)hls[0], hls[1] * (1.f / 255.f), hls[2] * (1.f / 255.f), vector_pixel(i, n),
           out);
    rgb[0] = cv_u8(out[0] * 255.f);
    rgb[1] = cv_u8(out[1] * 255.f);
    rgb[2] = cv_u8(out[2] * 255.f);
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
    for (long y = 0; y < rows; y++) {
        uint8_t *row = pixels + (size_t)y * (size_t)width * 3;
        for (long x = 0; x < width; x++) {
            uint8_t hls[3];
            rgb2hls_u8(row + 3 * x, hls, x, width);
            if (dh)
                hls[0] = shifted(hls[0], dh, 180);
            if (dl)
                hls[1] = shifted(hls[1], dl, 255);
            if (ds)
                hls[2] = shifted(hls[2], ds, 255);
            hls2rgb_u8(hls, row + 3 * x, x, width);
        }
    }
}

/* Planner._plan_hls: int(u * v * 2 - v) for (h, s, l), truncated toward zero. */
static void plan_hls(const run_options *opt, const double *u, long shifts[3])
{
    for (int i = 0; i < 3; i++) {
        double v = (double)opt->hls[i];
        shifts[i] = (long)(u[U_HLS + i] * v * 2 - v);
    }
}

static inline int has_hls(const run_options *opt)
{
    return opt->hls[0] || opt->hls[1] || opt->hls[2];
}

/* A ValueError (-1) for colour options recpipe._batch cannot render. */
static int colour_options_invalid(const run_options *opt)
{
    int colour = opt->colour[0] > 0 || opt->colour[1] > 0 || opt->colour[2] > 0
                 || opt->pca_noise > 0 || has_hls(opt);
    if ((opt->channels != 1 && opt->channels != 3) || (opt->channels == 1 && colour)
        || opt->hls[0] < 0 || opt->hls[1] < 0 || opt->hls[2] < 0
        || (opt->pca_noise > 0 && !PCA_NATIVE)) {
        PyErr_SetString(PyExc_ValueError, "channels, colour jitter, PCA lighting or the HLS "
                                          "shift are outside what recpipe._batch renders");
        return 1;
    }
    return 0;
}

/* --- float16 output after colour jitter ------------------------------------------------------ */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

/* Jittered planes (3 x out_h x out_w float32 values in [0, 255]) into a float16 slot, as the
 * Python path writes the colour kernel's float32 values (Renderer._write_float_path): NCHW,
 * cv2.addWeighted to CV_16F, one fused float32 multiply-add; NHWC, cv2.multiply then cv2.add,
 * value * gain in double rounded to float32, plus the offset in float32; then float16. */
FMA_CLONES static void write_half_planes(const float *planes, const run_options *opt, int mirror,
                                         uint16_t *dst)
{
    long h = opt->out_h, w = opt->out_w, n = h * w;
    for (long c = 0; c < 3; c++) {
        float gain = opt->gains[c], offset = opt->offsets[c];
        double exact = opt->exact_gains[c];
        for (long y = 0; y < h; y++) {
            const float *row = planes + c * n + y * w;
            for (long x = 0; x < w; x++) {
                float v = row[x];
                float value = opt->nchw ? fmaf(v, gain, offset) : (float)((double)v * exact) + offset;
                long column = mirror ? w - 1 - x : x;
                long at = opt->nchw ? c * n + y * w + column : (y * w + column) * 3 + c;
                dst[at] = half_of(value);
            }
        }
    }
}

/* --- staged output --------------------------------------------------------------------------- */

/* 1 when a sample is rendered as uint8 values first, then mapped to the output type through
 * per-value tables (Renderer._write's OpenCV arithmetic): float16 or float32 output with
 * neither colour jitter nor PCA lighting (float32: only with an HLS shift; float16 after
 * jitter: write_half_planes). */
static int stages_values(const run_options *opt)
{
    int float_path = opt->colour[0] > 0 || opt->colour[1] > 0 || opt->colour[2] > 0
                     || opt->pca_noise > 0;
    return !float_path && (opt->is_half || (opt->is_float && has_hls(opt)));
}

typedef struct {
    uint16_t halves[3][256];
    float values[3][256];
} value_tables;

/* The tables of the options ``opt`` (a run's, or a sample's after norm_terms). */
static void make_tables(const run_options *opt, value_tables *tables)
{
    if (opt->is_half)
        half_table(opt, tables->halves);
    else
        value_table(opt, tables->values);
}

/* The staged uint8 sample ``from`` into ``to`` through the run's tables, or through the
 * sample's own when it draws contrast/illumination (its uniforms U_NORM, U_NORM + 1). */
static void unstage(const run_options *opt, const value_tables *run_tables, const uint64_t key[2],
                    uint64_t sample, uint64_t epoch, const uint8_t *from, void *to)
{
    value_tables own;
    const value_tables *tables = run_tables;
    if (has_norm_jitter(opt)) {
        run_options local = *opt;
        norm_terms(opt, uniform(key, sample, epoch, U_NORM),
                   uniform(key, sample, epoch, U_NORM + 1), &local);
        make_tables(&local, &own);
        tables = &own;
    }
    staged_to(from, to, opt->out_h * opt->out_w, opt->nchw, opt->channels,
              opt->is_half ? (const uint16_t(*)[256])tables->halves : NULL,
              (const float(*)[256])tables->values);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
