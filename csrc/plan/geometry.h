/*
 * The geometry of a plan (plan/plan.h's full_plan): which DCT scale and which pixels of a decode
 * a sample needs, how its crop maps onto a reduced-scale or windowed decode (boxes, the part a
 * resize-then-crop needs, bilinear axes) and which interpolation each resize uses. Both decode
 * paths take these answers from here (recpipe._plan.geometry for the Python path's decoders,
 * kernels/render.h for the rendering): there is no other copy.
 *
 * The arithmetic is Python's (doubles, Python's round() as nearbyint), without contraction.
 */
#ifndef RECPIPE_PLAN_GEOMETRY_H
#define RECPIPE_PLAN_GEOMETRY_H

#include <math.h>

#include "plan/plan.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* OpenCV's interpolation codes (cv2.INTER_*) */
enum { GEO_NEAREST = 0, GEO_LINEAR = 1, GEO_CUBIC = 2, GEO_AREA = 3, GEO_LANCZOS4 = 4,
       GEO_AUTO = 9 };

/* A resize of one line: output ``i`` samples ``(i + shift + 0.5) * scale - 0.5``, clamped to
 * ``[0, length - 1]`` and moved by ``offset`` (where the line starts in the array given). */
typedef struct {
    long offset, length;
    double shift, scale;
} geo_axis;

/* The pixels a sample is rendered from: a ``full_h x full_w`` decode (the source at a DCT
 * scale), or the window of one starting at (x, y) (``whole`` 0). */
typedef struct {
    long x, y, full_h, full_w;
    int whole;
} geo_window;

static inline long geo_ceil_div(long a, long b)
{
    return (a + b - 1) / b;
}

/* MXNet's GetInterMethod for 9 (auto); drawn values pass through. */
static inline int geo_resolve_inter(int method, long old_h, long old_w, long new_h, long new_w)
{
    if (method != GEO_AUTO)
        return method;
    if (new_h > old_h && new_w > old_w)
        return GEO_CUBIC;
    if (new_h < old_h && new_w < old_w)
        return GEO_AREA;
    return GEO_LINEAR;
}

static inline int geo_is_linear(int method, long old_h, long old_w, long new_h, long new_w)
{
    return geo_resolve_inter(method, old_h, old_w, new_h, new_w) == GEO_LINEAR;
}

/* SamplePlan.source_box: (x0, y0, x1, y1) in source pixels the output is made of (doubles);
 * ``pad`` is the configured pad. */
static inline void geo_source_box(const full_plan *p, double box[4])
{
    if (p->affine) {
        box[0] = 0.0;
        box[1] = 0.0;
        box[2] = (double)p->src_w;
        box[3] = (double)p->src_h;
        return;
    }
    long from_h = p->upscale ? p->up_h : p->work_h, from_w = p->upscale ? p->up_w : p->work_w;
    long pad = (p->work_h - p->res_h) / 2;
    double sy = (double)p->res_h / (double)p->src_h, sx = (double)p->res_w / (double)p->src_w;
    double fy = (double)p->work_h / (double)from_h, fx = (double)p->work_w / (double)from_w;
    box[0] = ((double)p->x * fx - (double)pad) / sx;
    box[1] = ((double)p->y * fy - (double)pad) / sy;
    box[2] = ((double)(p->x + p->w) * fx - (double)pad) / sx;
    box[3] = ((double)(p->y + p->h) * fy - (double)pad) / sy;
}

/* The source box on a ``full_h x full_w`` image (the source decoded at a DCT scale), rounded to
 * whole pixels, at least one pixel, inside the image: (x0, y0, x1, y1). */
static inline void geo_mapped_box(const full_plan *p, long full_h, long full_w, long box[4])
{
    double src[4];
    geo_source_box(p, src);
    double fy = (double)full_h / (double)p->src_h, fx = (double)full_w / (double)p->src_w;
    long left = (long)nearbyint(src[0] * fx), top = (long)nearbyint(src[1] * fy);
    left = left < 0 ? 0 : (left > full_w - 1 ? full_w - 1 : left);
    top = top < 0 ? 0 : (top > full_h - 1 ? full_h - 1 : top);
    long right = (long)nearbyint(src[2] * fx), bottom = (long)nearbyint(src[3] * fy);
    right = right < full_w ? right : full_w;
    bottom = bottom < full_h ? bottom : full_h;
    box[0] = left;
    box[1] = top;
    box[2] = right > left + 1 ? right : left + 1;
    box[3] = bottom > top + 1 ? bottom : top + 1;
}

/* Along one axis, the part of a ``full``-pixel line that a crop of ``[start, start + length)``
 * of its ``resized``-pixel resize needs: it starts at source pixel ``first`` ~= k * full /
 * resized, the candidate k below ``start`` (at most 48 source pixels further out; k = 0 is
 * exact) whose grid position is nearest a whole pixel; ``end`` reaches past the interpolation
 * taps of the last needed pixel. */
static inline void geo_aligned_axis(long start, long length, long full, long resized, long *first,
                             long *end, long *k)
{
    double step = (double)full / (double)resized, best = 1.0;
    long at = 0, best_k = 0;
    long low = start - 3 - (long)(48.0 / step);
    low = low > 0 ? low : 0;
    for (long cand = start - 3; cand >= low; cand--) {
        double pos = (double)cand * step, rounded = nearbyint(pos);
        double err = fabs(rounded - pos);
        if (err < best) {
            at = (long)rounded;
            best_k = cand;
            best = err;
            if (err < 0.01)
                break;
        }
    }
    long last = at + (long)ceil((double)(start - best_k + length) * step) + 3;
    *first = at;
    *k = best_k;
    *end = last < full ? last : full;
}

/* The part of a ``full_h x full_w`` decode a plain crop of the resized image needs: box
 * (x0, y0, x1, y1) and the resized pixel (kx, ky) it starts at. */
static inline void geo_aligned_crop(const full_plan *p, long full_h, long full_w, long box[4],
                             long *kx, long *ky)
{
    geo_aligned_axis(p->x, p->w, full_w, p->res_w, &box[0], &box[2], kx);
    geo_aligned_axis(p->y, p->h, full_h, p->res_h, &box[1], &box[3], ky);
}

/* The source pixels [first, end) of a ``length``-pixel line that ``size`` outputs of the axis
 * (0, length, shift, scale) read, one pixel of margin included. */
static inline void geo_taps_span(long size, double shift, double scale, long length, long *first,
                          long *end)
{
    long a = (long)floor((shift + 0.5) * scale - 0.5);
    long b = (long)floor(((double)(size - 1) + shift + 0.5) * scale - 0.5) + 1;
    *first = a - 1 > 0 ? a - 1 : 0;
    *end = b + 2 < length ? b + 2 : length;
}

/* What the geometry needs of a configuration besides the plan. */
typedef struct {
    long out_h, out_w;
    long pad;
    int dct_scaling;   /* reduced DCT scales (and decoding a window after a resize step) */
    int resize_kernel; /* bilinear resizes by kernels/resize.h */
    int scales;        /* bits 1, 2, 4: the DCT scales 1/2, 1/4, 1/8 the decoder offers */
} geo_config;

/* The DCT scale 1/den to decode at: the smallest offered one keeping the planned crop at output
 * resolution; 1 when dct_scaling is off or the plan warps or pads. */
static inline unsigned geo_decode_scale(const geo_config *g, const full_plan *p)
{
    if (!g->dct_scaling || p->affine || g->pad)
        return 1;
    double box[4];
    geo_source_box(p, box);
    double need_w = (double)g->out_w / (box[2] - box[0]);
    double need_h = (double)g->out_h / (box[3] - box[1]);
    static const unsigned dens[3] = {8, 4, 2};
    static const int bits[3] = {4, 2, 1};
    for (int i = 0; i < 3; i++) {
        if (!(g->scales & bits[i]))
            continue;
        double f_w = (double)geo_ceil_div(p->src_w, dens[i]) / (double)p->src_w;
        double f_h = (double)geo_ceil_div(p->src_h, dens[i]) / (double)p->src_h;
        if (f_w >= need_w && f_h >= need_h)
            return dens[i];
    }
    return 1;
}

/* The box (x0, y0, x1, y1) of the decode at 1/``den`` that rendering reads; 0 when it needs
 * the whole image (an affine warp, pad or upscaling, or a resize step with dct_scaling off:
 * MXNet's full-image resize-then-crop, kept exact). Without a resize step at full scale the box
 * is the planned crop itself; otherwise the crop mapped onto the decoded image (resized to the
 * output in one step), the taps of a bilinear resize-then-crop, or the part an exact
 * resize-then-crop needs (geo_aligned_crop). */
static inline int geo_decode_box(const geo_config *g, const full_plan *p, unsigned den, long box[4])
{
    if (p->affine || p->upscale || g->pad)
        return 0;
    if (den == 1 && p->res_h == p->src_h && p->res_w == p->src_w) {
        box[0] = p->x;
        box[1] = p->y;
        box[2] = p->x + p->w;
        box[3] = p->y + p->h;
        return 1;
    }
    if (!g->dct_scaling)
        return 0;
    long full_h = geo_ceil_div(p->src_h, (long)den), full_w = geo_ceil_div(p->src_w, (long)den);
    if (!p->resize_crop) {
        if (g->resize_kernel && geo_is_linear(p->inter[0], full_h, full_w, p->res_h, p->res_w)) {
            geo_taps_span(p->h, (double)p->y, (double)full_h / (double)p->res_h, full_h, &box[1],
                          &box[3]);
            geo_taps_span(p->w, (double)p->x, (double)full_w / (double)p->res_w, full_w, &box[0],
                          &box[2]);
        } else {
            long kx, ky;
            geo_aligned_crop(p, full_h, full_w, box, &kx, &ky);
        }
        return 1;
    }
    geo_mapped_box(p, full_h, full_w, box);
    return 1;
}

/* The axes of kernels/resize.h when what is left to do is a bilinear resize of part of the
 * decoded pixels (then mirror and normalise) into the output; 0 when it is not:
 * - a resize step (maybe through a DCT scale), then a plain crop: the crop's part of the resize
 *   grid, sampled where resizing the whole image would sample it;
 * - a crop resized to the output from a reduced-scale or windowed decode: the crop box mapped
 *   onto the decode;
 * - no resize step: the crop box, resized to the output (random-resized crop) or copied.
 * MXNet's whole-image resize followed by a resized crop is not one of them. */
static inline int geo_linear_axes(const geo_config *g, const full_plan *p, const geo_window *win,
                           geo_axis *ya, geo_axis *xa)
{
    if (p->affine || p->upscale)
        return 0;
    long full_h = win->full_h, full_w = win->full_w, wx = win->x, wy = win->y;
    int resized = p->res_h != p->src_h || p->res_w != p->src_w;
    int full_is_source = full_h == p->src_h && full_w == p->src_w;
    if (!p->resize_crop && (resized || !full_is_source)) {
        if (!geo_is_linear(p->inter[0], full_h, full_w, p->res_h, p->res_w))
            return 0;
        *ya = (geo_axis){-wy, full_h, (double)p->y, (double)full_h / (double)p->res_h};
        *xa = (geo_axis){-wx, full_w, (double)p->x, (double)full_w / (double)p->res_w};
        return 1;
    }
    if (p->resize_crop && (!full_is_source || (!win->whole && resized))) {
        long box[4];
        geo_mapped_box(p, full_h, full_w, box);
        long bh = box[3] - box[1], bw = box[2] - box[0];
        if (!geo_is_linear(p->inter[2], bh, bw, g->out_h, g->out_w))
            return 0;
        *ya = (geo_axis){box[1] - wy, bh, 0.0, (double)bh / (double)g->out_h};
        *xa = (geo_axis){box[0] - wx, bw, 0.0, (double)bw / (double)g->out_w};
        return 1;
    }
    if (resized)
        return 0;
    if (p->resize_crop && !geo_is_linear(p->inter[2], p->h, p->w, g->out_h, g->out_w))
        return 0;
    *ya = (geo_axis){p->y - wy, p->h, 0.0, (double)p->h / (double)g->out_h};
    *xa = (geo_axis){p->x - wx, p->w, 0.0, (double)p->w / (double)g->out_w};
    return 1;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
