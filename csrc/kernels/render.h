/*
 * Rendering: one decoded image and its plan (plan/plan.h's full_plan) -> one batch slot. This is
 * the whole step after decoding, for both decode paths: recpipe._batch calls render_sample on
 * the rows libjpeg gave it, the Python path's Renderer (recpipe.decode.augment.render) calls it
 * through recpipe._kernels on whatever its decoder gave (a region of a JPEG, a whole image, a
 * PNG decoded by OpenCV), so the two paths differ only in where the rows come from.
 *
 * The steps are MXNet's (decode/augment/__init__.py): the resize step, the affine warp, the pad,
 * the crop (upscaled first when the image is smaller than the output; resized to the output
 * for random-resized and random-size crops), the HLS shift, the colour jitter and PCA lighting,
 * the mirror and the normalisation, written in the slot's layout and type. The kernels are
 * kernels/resize.h (bilinear straight into the slot, when dct_scaling is on), kernels/interp.h
 * (every cv::resize interpolation), kernels/warp.h (warpAffine), kernels/hls.h,
 * kernels/planes.h (colour jitter in float32) and kernels/write.h (the output values); the
 * geometry is plan/geometry.h's.
 *
 * render_sample returns RENDER_DONE, RENDER_REFUSED (a combination not rendered here: a
 * non-bilinear affine warp or an upscale past RENDER_EXACT_UPSCALE pixels; the caller renders
 * it), RENDER_NO_MEMORY or RENDER_BAD_WINDOW (the pixels given do not cover what the plan needs).
 * It needs no GIL.
 */
#ifndef RECPIPE_KERNELS_RENDER_H
#define RECPIPE_KERNELS_RENDER_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hls.h"
#include "kernels/interp.h"
#include "kernels/planes.h"
#include "kernels/resize.h"
#include "kernels/warp.h"
#include "kernels/write.h"
#include "plan/geometry.h"

#define RENDER_DONE 0
#define RENDER_REFUSED 1
#define RENDER_NO_MEMORY 2
#define RENDER_BAD_WINDOW 3

/* upscaled images up to this size are made as MXNet does (resize all, then crop) */
#define RENDER_EXACT_UPSCALE (16L << 20)
/* OpenCV's warpAffine block width on this machine (AVX2: two registers of float32): recpipe's */
#define RENDER_WARP_LANES 16

/* What rendering needs of a configuration besides the plan. */
typedef struct {
    long out_h, out_w, channels; /* channels: of the pixels given and of the output, 1 or 3 */
    int nchw;
    int itemsize;                /* the slot's type: 1 uint8, 2 float16, 4 float32 */
    float gains[3], offsets[3];  /* normalisation: value * gain + offset */
    double exact_gains[3];       /* the gains unrounded (NHWC arithmetic, per-sample terms) */
    double means[3];
    double max_contrast, max_illumination; /* MXNet's per-sample normalisation jitter */
    long pad;
    int fill;                    /* the pad's and the warp's border value */
    int dct_scaling;             /* reduced-scale decodes (and windows after a resize step) */
    int resize_kernel;           /* bilinear resizes by kernels/resize.h */
} render_config;

/* The pixels given: ``h x w x channels`` uint8 rows ``stride`` bytes apart, the window ``win``
 * of a ``win.full_h x win.full_w`` decode (``win.whole``: the whole decode). */
typedef struct {
    const uint8_t *pixels;
    size_t stride;
    long h, w;
    geo_window win;
} render_image;

/* Buffers kept between samples (one a thread); render_scratch_free releases them. */
typedef struct {
    uint8_t *region, *staged, *work, *warped;
    size_t region_cap, staged_cap, work_cap, warped_cap;
    float *planes;
    size_t planes_cap;
    /* the float tables of the last terms (a run's terms are the same from sample to sample) */
    int tables_for; /* 0: none yet; else the itemsize they were made for */
    int tables_nchw;
    float table_gains[3], table_offsets[3];
    double table_exact[3];
    float values[3][256], tail[3][256];
    uint16_t halves[3][256];
} render_scratch;

static int render_grow(void **buffer, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    void *bigger = realloc(*buffer, need ? need : 1);
    if (bigger == NULL)
        return -1;
    *buffer = bigger;
    *cap = need;
    return 0;
}

static void render_scratch_free(render_scratch *m)
{
    free(m->region);
    free(m->staged);
    free(m->work);
    free(m->warped);
    free(m->planes);
    memset(m, 0, sizeof *m);
}

/* Drop buffers an unusual sample made big (more than ``keep`` bytes). */
static void render_scratch_trim(render_scratch *m, size_t keep)
{
    if (m->work_cap > keep) {
        free(m->work);
        m->work = NULL;
        m->work_cap = 0;
    }
    if (m->warped_cap > keep) {
        free(m->warped);
        m->warped = NULL;
        m->warped_cap = 0;
    }
}

/* The sample's normalisation: the run's, or with MXNet's contrast and illumination drawn for it
 * (Renderer._affine_terms: gain * contrast, -mean * gain * contrast + illumination * gain). */
typedef struct {
    float gains[3], offsets[3];
    double exact[3];
} render_terms;

static void render_terms_of(const render_config *rc, const full_plan *fp, render_terms *t)
{
    memcpy(t->gains, rc->gains, sizeof t->gains);
    memcpy(t->offsets, rc->offsets, sizeof t->offsets);
    memcpy(t->exact, rc->exact_gains, sizeof t->exact);
    if (rc->itemsize == 1 || (fp->contrast == 1.0 && fp->illumination == 0.0))
        return;
    for (int c = 0; c < 3; c++) {
        double gain = rc->exact_gains[c] * fp->contrast;
        double offset = -rc->means[c] * gain + fp->illumination * rc->exact_gains[c];
        t->exact[c] = gain;
        t->gains[c] = (float)gain;
        t->offsets[c] = (float)offset;
    }
}

static geo_config render_geometry(const render_config *rc)
{
    geo_config g = {rc->out_h, rc->out_w, rc->pad, rc->dct_scaling, rc->resize_kernel, 0};
    return g;
}

/* --- writing into the slot ------------------------------------------------------------------ */

/* Three uint8 RGB rows (``stride`` bytes apart, from byte ``left * 3``), out_h x out_w, into the
 * slot as the colour kernel writes them without jitter (float32 CHW: kernels/chw_rows.h). */
static int write_rgb(const render_config *rc, const render_terms *t, render_scratch *m,
                     const uint8_t *pixels, size_t stride, int mirror, void *dst)
{
    long h = rc->out_h, w = rc->out_w, n = h * w;
    if (rc->nchw && rc->itemsize == 4) {
        chw_rows rows = {dst, (size_t)n, w, mirror, {t->gains[0], t->gains[1], t->gains[2]},
                         {t->offsets[0], t->offsets[1], t->offsets[2]}};
        chw_float_rows(&rows, pixels, stride, h);
        return RENDER_DONE;
    }
    if (render_grow((void **)&m->planes, &m->planes_cap, 3 * (size_t)n * sizeof(float)))
        return RENDER_NO_MEMORY;
    for (long y = 0; y < h; y++)
        to_planes(pixels + stride * (size_t)y, m->planes + y * w, m->planes + n + y * w,
                  m->planes + 2 * n + y * w, w);
    plane_target target = {h, w, dst, rc->itemsize == 4, mirror, rc->nchw, {0}, {0}};
    memcpy(target.gains, t->gains, sizeof target.gains);
    memcpy(target.offsets, t->offsets, sizeof target.offsets);
    write_planes(m->planes, &target);
    return RENDER_DONE;
}

/* The tables of ``t`` for the slot's type, made once for a run's terms. */
static void render_tables(const render_config *rc, const render_terms *t, render_scratch *m)
{
    if (m->tables_for == rc->itemsize && m->tables_nchw == rc->nchw
        && !memcmp(m->table_gains, t->gains, sizeof t->gains)
        && !memcmp(m->table_offsets, t->offsets, sizeof t->offsets)
        && !memcmp(m->table_exact, t->exact, sizeof t->exact))
        return;
    if (rc->itemsize == 2)
        half_table(t->gains, t->offsets, t->exact, rc->nchw, m->halves);
    else
        float_table(t->gains, t->offsets, t->exact, rc->nchw, m->values, m->tail);
    m->tables_for = rc->itemsize;
    m->tables_nchw = rc->nchw;
    memcpy(m->table_gains, t->gains, sizeof t->gains);
    memcpy(m->table_offsets, t->offsets, sizeof t->offsets);
    memcpy(m->table_exact, t->exact, sizeof t->exact);
}

/* Renderer._write: the uint8 region (out_h x out_w x channels) mirrored, laid out and, for
 * float output, turned into the output values (kernels/write.h). */
static int write_region(const render_config *rc, const render_terms *t, render_scratch *m,
                        const uint8_t *region, int mirror, void *dst)
{
    long h = rc->out_h, w = rc->out_w, cn = rc->channels, n = h * w;
    uint8_t *laid = rc->itemsize == 1 ? (uint8_t *)dst : NULL;
    if (laid == NULL) {
        if (render_grow((void **)&m->staged, &m->staged_cap, (size_t)(n * cn)))
            return RENDER_NO_MEMORY;
        laid = m->staged;
    }
    for (long y = 0; y < h; y++)
        for (long x = 0; x < w; x++) {
            long column = mirror ? w - 1 - x : x;
            const uint8_t *from = region + (y * w + x) * cn;
            for (long c = 0; c < cn; c++)
                laid[rc->nchw ? c * n + y * w + column : (y * w + column) * cn + c] = from[c];
        }
    if (rc->itemsize == 1)
        return RENDER_DONE;
    render_tables(rc, t, m);
    if (rc->itemsize == 2)
        halves_of(laid, dst, n, rc->nchw, cn, (const uint16_t(*)[256])m->halves);
    else
        floats_of(laid, dst, n, rc->nchw, cn, (const float(*)[256])m->values,
                  (const float(*)[256])m->tail);
    return RENDER_DONE;
}

/* numpy's float32 sum (np.add.reduce: 0 plus the pairwise sum of blocks of 128 in 8 lanes). */
static float render_pairwise_sum(const float *a, long n)
{
    if (n < 8) {
        float res = 0.f;
        for (long i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        float r[8];
        long i;
        for (int k = 0; k < 8; k++)
            r[k] = a[k];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++)
                r[k] += a[i + k];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    long n2 = n / 2;
    n2 -= n2 % 8;
    return render_pairwise_sum(a, n2) + render_pairwise_sum(a + n2, n - n2);
}

static inline float render_clip(float v)
{
    return v < 0.f ? 0.f : (v > 255.f ? 255.f : v);
}

/* Gray output's brightness and contrast (Renderer's float32 steps on one channel: the pixels
 * scaled, then, for contrast, the mean of the scaled pixels times 1 - alpha added; clipped). */
static void jitter_gray(float *p, long n, const full_plan *fp)
{
    for (int k = 0; k < fp->n_colour; k++) {
        float alpha = (float)fp->colour_alpha[k];
        for (long i = 0; i < n; i++)
            p[i] *= alpha;
        if (fp->colour_op[k] == 1) {
            volatile float sum = 0.f + render_pairwise_sum(p, n);
            volatile float mean = sum / (float)n;
            float add = (float)((1.0 - fp->colour_alpha[k]) * (double)mean);
            for (long i = 0; i < n; i++)
                p[i] += add;
        }
        for (long i = 0; i < n; i++)
            p[i] = render_clip(p[i]);
    }
}

/* Gray output's jittered float32 values (one plane, mirrored here) into the slot as the Python
 * path's OpenCV calls write them: uint8 cv2.convertScaleAbs (rounded to nearest even,
 * saturated); float NCHW cv2.addWeighted (fused multiply-add, a last block of 256 shorter than
 * 8 values in two roundings); float NHWC cv2.multiply then cv2.add. */
static int write_gray_values(const render_config *rc, const render_terms *t, const float *plane,
                             int mirror, void *dst)
{
    long h = rc->out_h, w = rc->out_w, n = h * w;
    long rest = n % ARITH_BLOCK, tail_from = rest > 0 && rest < ARITH_LANES ? n - rest : n;
    float gain = t->gains[0], offset = t->offsets[0];
    double exact = t->exact[0];
    for (long y = 0; y < h; y++)
        for (long x = 0; x < w; x++) {
            long at = y * w + (mirror ? w - 1 - x : x);
            float v = plane[y * w + x];
            if (rc->itemsize == 1) {
                long r = lrintf(v);
                ((uint8_t *)dst)[at] = (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
                continue;
            }
            float value;
            if (!rc->nchw) {
                value = (float)((double)v * exact) + offset;
            } else if (at < tail_from || rc->itemsize == 2) {
                value = fmaf(v, gain, offset);
            } else {
                volatile float product = v * gain;
                value = product + offset;
            }
            if (rc->itemsize == 2)
                ((uint16_t *)dst)[at] = half_of(value);
            else
                ((float *)dst)[at] = value;
        }
    return RENDER_DONE;
}

/* Renderer._write_float_path: colour jitter and PCA lighting in float32 planes (kernels/planes.h),
 * then mirror, normalisation and layout. */
static int write_jittered(const render_config *rc, const render_terms *t, const full_plan *fp,
                          render_scratch *m, const uint8_t *region, void *dst)
{
    long h = rc->out_h, w = rc->out_w, n = h * w;
    if (render_grow((void **)&m->planes, &m->planes_cap, 3 * (size_t)n * sizeof(float)))
        return RENDER_NO_MEMORY;
    float *planes = m->planes;
    if (rc->channels == 1) {
        for (long i = 0; i < n; i++)
            planes[i] = region[i];
        jitter_gray(planes, n, fp);
    } else {
        colour_op ops[3];
        for (int i = 0; i < fp->n_colour; i++) {
            ops[i].op = fp->colour_op[i];
            ops[i].alpha = (float)fp->colour_alpha[i];
        }
        to_planes(region, planes, planes + n, planes + 2 * n, n);
        colour_planes(planes, n, ops, fp->n_colour, fp->has_pca ? fp->pca : NULL);
    }
    if (rc->channels == 1)
        return write_gray_values(rc, t, planes, fp->mirror, dst);
    if (rc->itemsize == 2) {
        write_half_planes(planes, h, w, t->gains, t->offsets, t->exact, rc->nchw, fp->mirror,
                          dst);
        return RENDER_DONE;
    }
    plane_target target = {h, w, dst, rc->itemsize == 4, fp->mirror, rc->nchw, {0}, {0}};
    for (int c = 0; c < 3; c++) {
        target.gains[c] = rc->itemsize == 4 ? t->gains[c] : 1.f;
        target.offsets[c] = rc->itemsize == 4 ? t->offsets[c] : 0.f;
    }
    write_planes(planes, &target);
    return RENDER_DONE;
}

/* --- resizes -------------------------------------------------------------------------------- */

/* The bilinear kernel (kernels/resize.h) along ``ya``/``xa`` of the pixels, into the slot
 * (mirrored, laid out, normalised) or into the uint8 region (``region`` not NULL). */
static int resize_linear(const render_config *rc, const render_terms *t,
                         const render_image *im, const geo_axis *ya, const geo_axis *xa,
                         int mirror, void *dst, uint8_t *region)
{
    resize_job j = {0};
    axis_spec y = {ya->offset, ya->length, ya->shift, ya->scale};
    axis_spec x = {xa->offset, xa->length, xa->shift, xa->scale};
    j.src = im->pixels;
    j.src_stride = (Py_ssize_t)im->stride;
    j.height = im->h;
    j.width = im->w;
    j.channels = rc->channels;
    j.out_h = rc->out_h;
    j.out_w = rc->out_w;
    if (region == NULL) {
        j.dst = dst;
        j.is_float = rc->itemsize == 4;
        j.mirror = mirror;
        j.nchw = rc->nchw;
        memcpy(j.gains, t->gains, sizeof j.gains);
        memcpy(j.offsets, t->offsets, sizeof j.offsets);
    } else {
        j.dst = region;
        for (int c = 0; c < 3; c++)
            j.gains[c] = 1.f;
    }
    int status = resize_prepare(&j, &y, &x);
    if (status == 0)
        resize_run(&j);
    resize_release(&j);
    return status == 0 ? RENDER_DONE : (status == -2 ? RENDER_BAD_WINDOW : RENDER_NO_MEMORY);
}

/* cv2.resize of ``sw x sh`` pixels to ``dw x dh`` (``inv``: cv2's inverse scales) with
 * ``method`` resolved (kernels/interp.h). */
static int resize_exact(const uint8_t *src, size_t sstep, long sw, long sh, int cn,
                        uint8_t *dst, size_t dstep, long dw, long dh, double inv_x, double inv_y,
                        int method)
{
    if (sw > INT_MAX || sh > INT_MAX || dw > INT_MAX || dh > INT_MAX)
        return RENDER_REFUSED;
    return interp_resize(src, sstep, (int)sw, (int)sh, cn, dst, dstep, (int)dw, (int)dh, inv_x,
                         inv_y, method) == 0 ? RENDER_DONE : RENDER_NO_MEMORY;
}

/* Renderer._resize: ``src`` resized to the output (``region``), the method resolved by MXNet's
 * rule for these sizes. */
static int resize_to_output(const render_config *rc, const uint8_t *src, size_t sstep, long sw,
                            long sh, int method, uint8_t *region)
{
    method = geo_resolve_inter(method, sh, sw, rc->out_h, rc->out_w);
    return resize_exact(src, sstep, sw, sh, (int)rc->channels, region,
                        (size_t)(rc->out_w * rc->channels), rc->out_w, rc->out_h,
                        (double)rc->out_w / (double)sw, (double)rc->out_h / (double)sh, method);
}

/* --- the region: the output-sized crop before colour, mirror and normalisation --------------- */

/* Renderer._aligned_region: resize-then-crop on the part of the decode a plain crop of the
 * resized image needs, starting where the resize grid nearly meets a source pixel; RENDER_REFUSED
 * when it does not fit (the scaled region then). */
static int aligned_region(const render_config *rc, const full_plan *fp, const render_image *im,
                          render_scratch *m, uint8_t *region)
{
    long full_h = im->win.full_h, full_w = im->win.full_w, box[4], kx, ky;
    long cn = rc->channels;
    geo_aligned_crop(fp, full_h, full_w, box, &kx, &ky);
    long left = box[0] - im->win.x, top = box[1] - im->win.y;
    long right = box[2] - im->win.x, bottom = box[3] - im->win.y;
    if (left < 0 || top < 0 || right > im->w || bottom > im->h)
        return RENDER_REFUSED;
    double fx = (double)fp->res_w / (double)full_w, fy = (double)fp->res_h / (double)full_h;
    long pw = right - left, ph = bottom - top;
    int dw = interp_size_by((int)pw, fx), dh = interp_size_by((int)ph, fy);
    if (dw < 1 || dh < 1)
        return RENDER_REFUSED;
    long x = fp->x - kx, y = fp->y - ky;
    if (x < 0 || y < 0 || x + rc->out_w > dw || y + rc->out_h > dh)
        return RENDER_REFUSED;
    if (render_grow((void **)&m->work, &m->work_cap, (size_t)dw * (size_t)dh * (size_t)cn))
        return RENDER_NO_MEMORY;
    int method = geo_resolve_inter(fp->inter[0], full_h, full_w, fp->res_h, fp->res_w);
    int status = resize_exact(im->pixels + im->stride * (size_t)top + (size_t)(left * cn),
                              im->stride, pw, ph, (int)cn, m->work, (size_t)dw * (size_t)cn, dw,
                              dh, fx, fy, method);
    if (status != RENDER_DONE)
        return status;
    for (long row = 0; row < rc->out_h; row++)
        memcpy(region + (size_t)(row * rc->out_w * cn),
               m->work + ((size_t)(y + row) * (size_t)dw + (size_t)x) * (size_t)cn,
               (size_t)(rc->out_w * cn));
    return RENDER_DONE;
}

/* Renderer._scaled_region: the planned box mapped onto a reduced-scale decode or a window of
 * one, resized to the output at once. */
static int scaled_region(const render_config *rc, const full_plan *fp, const render_image *im,
                         uint8_t *region)
{
    long box[4], cn = rc->channels;
    geo_mapped_box(fp, im->win.full_h, im->win.full_w, box);
    long left = box[0] - im->win.x, top = box[1] - im->win.y;
    long right = box[2] - im->win.x, bottom = box[3] - im->win.y;
    if (left < 0 || top < 0 || right > im->w || bottom > im->h)
        return RENDER_BAD_WINDOW;
    return resize_to_output(rc, im->pixels + im->stride * (size_t)top + (size_t)(left * cn),
                            im->stride, right - left, bottom - top,
                            fp->resize_crop ? fp->inter[2] : fp->inter[0], region);
}

/* A ``h x w`` crop at (x, y) of ``src`` (``sstep`` bytes a row) into ``dst``, rows packed. */
static void copy_rows(const uint8_t *src, size_t sstep, long x, long y, long h, long w, long cn,
                      uint8_t *dst)
{
    for (long row = 0; row < h; row++)
        memcpy(dst + (size_t)(row * w * cn), src + sstep * (size_t)(y + row) + (size_t)(x * cn),
               (size_t)(w * cn));
}

/* Renderer._full_image_crop into ``crop`` (the plan's crop size, rows packed): MXNet's steps on
 * the whole decoded image: the resize step, the affine warp, the pad, the upscale, the crop.
 * Only the crop's pixels of the warp and the pad are computed. */
static int full_image_crop(const render_config *rc, const full_plan *fp, const render_image *im,
                           render_scratch *m, uint8_t *crop)
{
    int cn = (int)rc->channels;
    const uint8_t *work = im->pixels;
    size_t work_stride = im->stride;
    long work_h = im->h, work_w = im->w;
    if (work_h != fp->res_h || work_w != fp->res_w) { /* the resize step */
        size_t bytes = (size_t)fp->res_h * (size_t)fp->res_w * (size_t)cn;
        if (render_grow((void **)&m->work, &m->work_cap, bytes))
            return RENDER_NO_MEMORY;
        int method = geo_resolve_inter(fp->inter[0], work_h, work_w, fp->res_h, fp->res_w);
        int status = resize_exact(work, work_stride, work_w, work_h, cn, m->work,
                                  (size_t)(fp->res_w * cn), fp->res_w, fp->res_h,
                                  (double)fp->res_w / (double)work_w,
                                  (double)fp->res_h / (double)work_h, method);
        if (status != RENDER_DONE)
            return status;
        work = m->work;
        work_stride = (size_t)(fp->res_w * cn);
        work_h = fp->res_h;
        work_w = fp->res_w;
    }
    double forward[6];
    long warped_h = work_h, warped_w = work_w;
    if (fp->affine) {
        int method = geo_resolve_inter(fp->inter[1], work_h, work_w, fp->affine_h, fp->affine_w);
        if (method != GEO_LINEAR && method != GEO_AREA) /* (warpAffine's area is bilinear) */
            return RENDER_REFUSED;
        if (fp->affine_h > 65535 || fp->affine_w > 65535)
            return RENDER_REFUSED;
        warp_forward(fp->matrix, forward);
        warped_h = fp->affine_h;
        warped_w = fp->affine_w;
    }
    if (!fp->upscale) { /* the crop of the warped, padded image: only its pixels */
        work_crop(work, work_h, work_w, work_stride, cn, fp->affine ? forward : NULL, warped_h,
                  warped_w, rc->pad, fp->x, fp->y, fp->h, fp->w, (uint8_t)rc->fill,
                  RENDER_WARP_LANES, crop);
        return RENDER_DONE;
    }
    if (fp->up_h * fp->up_w > RENDER_EXACT_UPSCALE)
        return RENDER_REFUSED;
    long full_h = fp->work_h, full_w = fp->work_w; /* after the warp and the pad */
    size_t full_bytes = (size_t)full_h * (size_t)full_w * (size_t)cn;
    if (render_grow((void **)&m->warped, &m->warped_cap, full_bytes))
        return RENDER_NO_MEMORY;
    work_crop(work, work_h, work_w, work_stride, cn, fp->affine ? forward : NULL, warped_h,
              warped_w, rc->pad, 0, 0, full_h, full_w, (uint8_t)rc->fill, RENDER_WARP_LANES,
              m->warped);
    size_t up_bytes = (size_t)fp->up_h * (size_t)fp->up_w * (size_t)cn;
    uint8_t *up = malloc(up_bytes ? up_bytes : 1);
    if (up == NULL)
        return RENDER_NO_MEMORY;
    int method = geo_resolve_inter(fp->inter[2], full_h, full_w, fp->up_h, fp->up_w);
    int status = resize_exact(m->warped, (size_t)(full_w * cn), full_w, full_h, cn, up,
                              (size_t)(fp->up_w * cn), fp->up_w, fp->up_h,
                              (double)fp->up_w / (double)full_w,
                              (double)fp->up_h / (double)full_h, method);
    if (status == RENDER_DONE)
        copy_rows(up, (size_t)(fp->up_w * cn), fp->x, fp->y, fp->h, fp->w, cn, crop);
    free(up);
    return status;
}

/* Renderer._exact_region: MXNet's steps on the full-size image; with a window, only the plain
 * crop (then its resize) is possible. */
static int exact_region(const render_config *rc, const full_plan *fp, const render_image *im,
                        render_scratch *m, uint8_t *region)
{
    long cn = rc->channels;
    const uint8_t *crop;
    size_t crop_stride;
    if (!im->win.whole && (im->win.x || im->win.y || im->h != fp->src_h || im->w != fp->src_w)) {
        if (fp->upscale || fp->res_h != fp->src_h || fp->res_w != fp->src_w)
            return RENDER_BAD_WINDOW; /* this plan needs the whole image */
        long x = fp->x - im->win.x, y = fp->y - im->win.y;
        if (x < 0 || y < 0 || x + fp->w > im->w || y + fp->h > im->h)
            return RENDER_BAD_WINDOW;
        crop = im->pixels + im->stride * (size_t)y + (size_t)(x * cn);
        crop_stride = im->stride;
    } else {
        uint8_t *into = region;
        if (fp->resize_crop) {
            if (render_grow((void **)&m->staged, &m->staged_cap,
                            (size_t)fp->h * (size_t)fp->w * (size_t)cn))
                return RENDER_NO_MEMORY;
            into = m->staged;
        } else if (fp->h != rc->out_h || fp->w != rc->out_w) {
            return RENDER_BAD_WINDOW;
        }
        int status = full_image_crop(rc, fp, im, m, into);
        if (status != RENDER_DONE || !fp->resize_crop)
            return status;
        crop = into;
        crop_stride = (size_t)(fp->w * cn);
    }
    if (fp->resize_crop)
        return resize_to_output(rc, crop, crop_stride, fp->w, fp->h, fp->inter[2], region);
    if (fp->h != rc->out_h || fp->w != rc->out_w)
        return RENDER_BAD_WINDOW;
    copy_rows(crop, crop_stride, 0, 0, fp->h, fp->w, cn, region);
    return RENDER_DONE;
}

/* Renderer._region: the output-sized crop (out_h x out_w x channels), uint8. */
static int region_of(const render_config *rc, const full_plan *fp, const render_image *im,
                     render_scratch *m, uint8_t *region)
{
    int full_is_source = im->win.full_h == fp->src_h && im->win.full_w == fp->src_w;
    int resized = fp->res_h != fp->src_h || fp->res_w != fp->src_w;
    if (!fp->affine && !rc->pad && !fp->upscale
        && (!full_is_source || (!im->win.whole && resized))) {
        int status = RENDER_REFUSED;
        if (!fp->resize_crop && rc->dct_scaling)
            status = aligned_region(rc, fp, im, m, region);
        if (status == RENDER_REFUSED)
            status = scaled_region(rc, fp, im, region);
        return status;
    }
    return exact_region(rc, fp, im, m, region);
}

/* --- one sample ----------------------------------------------------------------------------- */

/* Renderer.apply: the sample planned as ``fp`` from the pixels ``im`` into the slot ``dst``. */
static int render_sample(const render_config *rc, const full_plan *fp, const render_image *im,
                         render_scratch *m, void *dst)
{
    render_terms t;
    render_terms_of(rc, fp, &t);
    geo_config g = render_geometry(rc);
    geo_axis ya, xa;
    long cn = rc->channels, n = rc->out_h * rc->out_w;
    int axes = rc->resize_kernel && geo_linear_axes(&g, fp, &im->win, &ya, &xa);
    int needs_float = fp->n_colour > 0 || fp->has_pca;
    if (axes && rc->resize_kernel && !needs_float && !fp->has_hls && rc->itemsize != 2) {
        /* straight into the slot: a crop the size of the output copied, or resized */
        if (cn == 3 && ya.scale == 1.0 && xa.scale == 1.0 && ya.shift == 0.0
            && xa.shift == 0.0 && ya.length == rc->out_h && xa.length == rc->out_w
            && ya.offset >= 0 && xa.offset >= 0 && ya.offset + rc->out_h <= im->h
            && xa.offset + rc->out_w <= im->w)
            return write_rgb(rc, &t, m, im->pixels + im->stride * (size_t)ya.offset
                                             + (size_t)(xa.offset * 3),
                             im->stride, fp->mirror, dst);
        return resize_linear(rc, &t, im, &ya, &xa, fp->mirror, dst, NULL);
    }
    if (render_grow((void **)&m->region, &m->region_cap, (size_t)(n * cn)))
        return RENDER_NO_MEMORY;
    int status = axes ? resize_linear(rc, &t, im, &ya, &xa, 0, NULL, m->region)
                      : region_of(rc, fp, im, m, m->region);
    if (status != RENDER_DONE)
        return status;
    if (fp->has_hls) {
        if (cn != 3)
            return RENDER_REFUSED;
        shift_hls(m->region, rc->out_h, rc->out_w, fp->hls[0], fp->hls[1], fp->hls[2]);
    }
    if (needs_float)
        return write_jittered(rc, &t, fp, m, m->region, dst);
    return write_region(rc, &t, m, m->region, fp->mirror, dst);
}

/* The steps after the region, for a region made elsewhere (``region``: out_h x out_w x
 * channels, rows packed): the HLS shift, the colour jitter, the mirror and the writing. */
static inline int render_region(const render_config *rc, const full_plan *fp, const uint8_t *region,
                         render_scratch *m, void *dst)
{
    size_t bytes = (size_t)(rc->out_h * rc->out_w * rc->channels);
    if (render_grow((void **)&m->region, &m->region_cap, bytes))
        return RENDER_NO_MEMORY;
    memmove(m->region, region, bytes);
    render_terms t;
    render_terms_of(rc, fp, &t);
    if (fp->has_hls) {
        if (rc->channels != 3)
            return RENDER_REFUSED;
        shift_hls(m->region, rc->out_h, rc->out_w, fp->hls[0], fp->hls[1], fp->hls[2]);
    }
    if (fp->n_colour > 0 || fp->has_pca)
        return write_jittered(rc, &t, fp, m, m->region, dst);
    return write_region(rc, &t, m, m->region, fp->mirror, dst);
}

#endif
