/*
 * Float32 channel planes: made from RGB pixels, colour-jittered (colour_planes), and written
 * into a batch slot (uint8 rounded to nearest, or float32 ``p * gains[c] + offsets[c]``;
 * (C, H, W) or (H, W, C); optionally mirrored), shared by recpipe._colour and recpipe._batch
 * so that both compute identical values.
 */
#ifndef RECPIPE_PLANES_H
#define RECPIPE_PLANES_H

#include <Python.h>

#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

/* Where planes go: a height x width slot of uint8 or float32 values. */
typedef struct {
    Py_ssize_t height, width;
    void *dst;
    int is_float, mirror, nchw;
    float gains[3], offsets[3];
} plane_target;

static inline float clip(float v)
{
    v = v > 0.f ? v : 0.f;  /* (maxps / minps once vectorised) */
    return v < 255.f ? v : 255.f;
}

HOT static void to_planes(const uint8_t *restrict src, float *restrict r, float *restrict g,
                          float *restrict b, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        r[i] = src[3 * i];
        g[i] = src[3 * i + 1];
        b[i] = src[3 * i + 2];
    }
}

HOT static void store_float(const float *restrict row, float *restrict out, Py_ssize_t width,
                            float k, float b)
{
    for (Py_ssize_t x = 0; x < width; x++)
        out[x] = row[x] * k + b;
}

HOT static void store_float_mirrored(const float *restrict row, float *restrict out,
                                     Py_ssize_t width, float k, float b)
{
    for (Py_ssize_t x = 0; x < width; x++)
        out[width - 1 - x] = row[x] * k + b;
}

HOT static void store_u8(const float *restrict row, uint8_t *restrict out, Py_ssize_t width,
                         int mirror)
{
    for (Py_ssize_t x = 0; x < width; x++)
        out[mirror ? width - 1 - x : x] = (uint8_t)lrintf(row[x]);
}

/* One channel plane into dst: (C, H, W) rows are contiguous; (H, W, C) is strided. */
static void write_plane(const float *p, const plane_target *j, Py_ssize_t c)
{
    Py_ssize_t h = j->height, w = j->width, n = h * w;
    for (Py_ssize_t y = 0; y < h; y++) {
        const float *row = p + y * w;
        if (j->nchw && j->is_float) {
            float *out = (float *)j->dst + c * n + y * w;
            if (j->mirror)
                store_float_mirrored(row, out, w, j->gains[c], j->offsets[c]);
            else
                store_float(row, out, w, j->gains[c], j->offsets[c]);
        } else if (j->nchw) {
            store_u8(row, (uint8_t *)j->dst + c * n + y * w, w, j->mirror);
        } else {
            for (Py_ssize_t x = 0; x < w; x++) {
                Py_ssize_t at = (y * w + (j->mirror ? w - 1 - x : x)) * 3 + c;
                if (j->is_float)
                    ((float *)j->dst)[at] = row[x] * j->gains[c] + j->offsets[c];
                else
                    ((uint8_t *)j->dst)[at] = (uint8_t)lrintf(row[x]);
            }
        }
    }
}

/* The three planes at ``planes`` (3 x height x width floats) into the target. */
static void write_planes(const float *planes, const plane_target *t)
{
    Py_ssize_t n = t->height * t->width;
    for (int c = 0; c < 3; c++)
        write_plane(planes + c * n, t, c);
}

#define MAX_OPS 8
#define GRAY_R 0.299f
#define GRAY_G 0.587f
#define GRAY_B 0.114f

typedef struct {
    int op;
    float alpha;
} colour_op;

HOT static void scale_add(float *restrict p, Py_ssize_t n, float alpha, float add)
{
    for (Py_ssize_t i = 0; i < n; i++)
        p[i] = clip(p[i] * alpha + add);
}

HOT static double gray_sum(const float *restrict r, const float *restrict g,
                           const float *restrict b, Py_ssize_t n)
{
    /* 8 float lanes within 1024-pixel blocks (vectorisable), double across blocks */
    double total = 0.0;
    Py_ssize_t i = 0;
    for (; i + 1024 <= n; i += 1024) {
        float lanes[8] = {0.f};
        for (Py_ssize_t k = i; k < i + 1024; k += 8)
            for (int l = 0; l < 8; l++)
                lanes[l] += GRAY_R * r[k + l] + GRAY_G * g[k + l] + GRAY_B * b[k + l];
        for (int l = 0; l < 8; l++)
            total += lanes[l];
    }
    for (; i < n; i++)
        total += GRAY_R * r[i] + GRAY_G * g[i] + GRAY_B * b[i];
    return total;
}

HOT static void saturate(float *restrict r, float *restrict g, float *restrict b, Py_ssize_t n,
                         float alpha)
{
    float keep = 1.f - alpha;
    for (Py_ssize_t i = 0; i < n; i++) {
        float gray = keep * (GRAY_R * r[i] + GRAY_G * g[i] + GRAY_B * b[i]);
        r[i] = clip(r[i] * alpha + gray);
        g[i] = clip(g[i] * alpha + gray);
        b[i] = clip(b[i] * alpha + gray);
    }
}

/* Colour jitter in place on three planes of ``n`` pixels: each ``(op, alpha)`` in order (0
 * brightness p *= alpha; 1 contrast, blend with the mean gray; 2 saturation, blend with each
 * pixel's gray), clipped to [0, 255] after each; then ``pca`` (NULL: none) RGB offsets. */
static void colour_planes(float *planes, Py_ssize_t n, const colour_op *ops, int n_ops,
                          const float *pca)
{
    float *r = planes, *g = r + n, *b = g + n;
    for (int k = 0; k < n_ops; k++) {
        float alpha = ops[k].alpha;
        if (ops[k].op == 2) {
            saturate(r, g, b, n, alpha);
            continue;
        }
        float add = 0.f;
        if (ops[k].op == 1)
            add = (float)((1.0 - alpha) * (gray_sum(r, g, b, n) / (double)n));
        scale_add(r, n, alpha, add);
        scale_add(g, n, alpha, add);
        scale_add(b, n, alpha, add);
    }
    if (pca != NULL)
        for (int c = 0; c < 3; c++)
            scale_add(planes + c * n, n, 1.f, pca[c]);
}

#endif
