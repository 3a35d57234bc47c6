/* The one planner of recpipe: every random decision of one sample, drawn in a
 * fixed order from its block of N_UNIFORM uniforms (and three standard normals for PCA
 * lighting), for both paths. recpipe._plan calls it for the Python path
 * (recpipe.decode.augment.plan.Planner builds its SamplePlan from the result); recpipe._batch
 * calls it for every sample it renders. The two paths can differ only in their kernels.
 *
 * plan_full(config, u, normals, rows, cols, out) computes, in MXNet's order: the resize step
 * (shorter edge -> resize, the other size * long // short), the affine step's forward matrix and
 * size (shear, angle or rotate_list angle, random scale and aspect, img size clamps), pad, the
 * crop (random-resized crop: up to RRC_TRIES tries of area x log-uniform aspect; or a
 * random-size square crop; or an output-sized crop of the image, upscaled first when smaller),
 * the interpolations (inter_method 10: drawn per resize), mirror, the HLS shifts, the colour
 * jitter's order and factors, the PCA lighting offsets (float32) and MXNet's normalisation
 * contrast and illumination.
 *
 * The arithmetic is Python's, step by step: doubles where Python has floats, Python's round()
 * as nearbyint (half to even), int() as a cast (truncation), randint as
 * min(high, low + (long)(u * (high - low + 1))), and AlexNet's PCA offsets in float32 with one
 * order of operations. No fused multiply-adds (fp-contract off here, -ffp-contract=off for
 * csrc/plan/plan_module.c): a contraction would change the last bit of a matrix or a factor.
 *
 * The options: PLAN_FIELDS below, in this order, parsed from a tuple by plan_parse (recpipe._plan
 * takes exactly these; recpipe._batch takes them as the first fields of its RunOptions).
 */
#ifndef RECPIPE_PLAN_H
#define RECPIPE_PLAN_H

#include <limits.h>
#include <math.h>
#include <stddef.h>

#include "common/fields.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* the per-sample uniform slots (fixed order; recpipe.decode.augment.plan re-exports them) */
#define U_INTER 0    /* 3: resize step, affine, crop/upscale (inter_method 10) */
#define U_AFFINE 3   /* shear, angle, scale, ratio, rotate_list index */
#define U_RRC 8      /* RRC_TRIES x (area, ratio, x, y) */
#define RRC_TRIES 10
#define U_CROP 48    /* random-size crop side */
#define U_CROP_X 49
#define U_CROP_Y 50
#define U_MIRROR 51
#define U_HLS 52     /* h, s, l */
#define U_ORDER 55   /* 3 keys: the colour jitter's order */
#define U_COLOUR 58  /* brightness, contrast, saturation */
#define U_NORM 61    /* contrast, illumination */
#define N_UNIFORM 64

#define PLAN_MAX_SIDE 2147483647L /* larger sizes (an absurd random scale) are refused */
#define PLAN_PI 3.141592653589793 /* math.pi */

/* plan_full's results */
#define PLAN_OK 0
#define PLAN_BAD_SIZE 1     /* height or width <= 0: "invalid image size" */
#define PLAN_UNDER_CROP 2   /* smaller than max_crop_size after resize/affine/pad */
#define PLAN_TOO_LARGE 3    /* a size past PLAN_MAX_SIDE */

/* What planning reads: an AugmentConfig, interpreted once (Planner.options). */
typedef struct {
    long out_h, out_w;
    long resize;                       /* shorter-edge resize, -1: none */
    int rand_crop, mirror, rand_mirror;
    int rrc;                           /* a random-resized crop with a non-trivial range */
    double min_area, max_area, aspect_low, aspect_high;
    double colour[3];                  /* brightness, contrast, saturation limits, 0: off */
    double max_contrast, max_illumination; /* MXNet's normalisation jitter */
    double pca_noise;
    long hls[3];                       /* random_h, random_s, random_l */
    int affine;                        /* AugmentConfig.affine_active */
    double max_shear;
    long max_angle, rotate;
    field_longs rotate_list;           /* the angles (PyMem; plan_release frees them) */
    double min_scale, max_scale, min_img, max_img;
    long pad;
    int inter_method;                  /* 0-4, 9 auto, 10 drawn per resize */
    long min_crop, max_crop;           /* random-size square crop, -1: off */
} plan_config;

/* Everything SamplePlan holds. Sizes are rows, columns; the crop is in the coordinates of the
 * work image (after resize, affine and pad), or of its upscaled version. */
typedef struct {
    long src_h, src_w, res_h, res_w;
    int affine;                        /* matrix and affine_h/_w hold */
    double matrix[6];                  /* the forward 2x3 matrix, row by row */
    long affine_h, affine_w;
    long work_h, work_w;
    int upscale;                       /* up_h/_w hold */
    long up_h, up_w;
    long x, y, w, h;
    int resize_crop;                   /* the crop is resized to the output */
    int inter[3];                      /* 0-4 drawn, or the configured method */
    int mirror;
    int has_hls;
    long hls[3];
    int n_colour;                      /* colour ops in order, those with a limit */
    int colour_op[3];                  /* 0 brightness, 1 contrast, 2 saturation */
    double colour_alpha[3];
    int has_pca;
    float pca[3];                      /* RGB offsets */
    double contrast, illumination;
} full_plan;

/* Planner's randint: an integer in [low, high] from a uniform in [0, 1). */
static inline long plan_randint(double u, long low, long high)
{
    long value = low + (long)(u * (double)(high - low + 1));
    return value < high ? value : high;
}

/* MXNet's resize step: shorter edge -> size, the other ``size * long // short``. */
static inline void plan_shorter_edge(long rows, long cols, long size, long *out_h, long *out_w)
{
    if (rows > cols) {
        *out_h = size * rows / cols;
        *out_w = size;
    } else {
        *out_h = size;
        *out_w = size * cols / rows;
    }
}

/* A double size into a long (int() of a positive float): 0 when past PLAN_MAX_SIDE. */
static inline int plan_side(double value, long *out)
{
    if (!(value < (double)PLAN_MAX_SIDE))
        return 0;
    *out = (long)value;
    return 1;
}

/* The affine step: the forward matrix and the warped size. */
static int plan_affine(const plan_config *c, const double *u, full_plan *p)
{
    long rows = p->res_h, cols = p->res_w;
    double shear = u[U_AFFINE] * c->max_shear * 2 - c->max_shear;
    long angle = plan_randint(u[U_AFFINE + 1], -c->max_angle, c->max_angle);
    if (c->rotate > 0)
        angle = c->rotate;
    if (c->rotate_list.count > 0)
        angle = c->rotate_list.values[plan_randint(u[U_AFFINE + 4], 0,
                                                   c->rotate_list.count - 1)];
    double a = cos((double)angle / 180.0 * PLAN_PI), b = sin((double)angle / 180.0 * PLAN_PI);
    double scale = u[U_AFFINE + 2] * (c->max_scale - c->min_scale) + c->min_scale;
    double ratio = u[U_AFFINE + 3] * (c->aspect_high - c->aspect_low) + c->aspect_low;
    double hs = 2 * scale / (1 + ratio);
    double ws = ratio * hs;
    double new_w = fmax(c->min_img, fmin(c->max_img, scale * (double)cols));
    double new_h = fmax(c->min_img, fmin(c->max_img, scale * (double)rows));
    double m00 = hs * a - shear * b * ws, m01 = hs * b + shear * a * ws;
    double m10 = -b * ws, m11 = a * ws;
    p->matrix[0] = m00;
    p->matrix[1] = m01;
    p->matrix[2] = (new_w - (m00 * (double)cols + m01 * (double)rows)) / 2;
    p->matrix[3] = m10;
    p->matrix[4] = m11;
    p->matrix[5] = (new_h - (m10 * (double)cols + m11 * (double)rows)) / 2;
    /* max(1, int(new)): new >= 0 (the clamps), so a cast truncates as int() does */
    if (!plan_side(new_h, &p->affine_h) || !plan_side(new_w, &p->affine_w))
        return PLAN_TOO_LARGE;
    p->affine_h = p->affine_h > 1 ? p->affine_h : 1;
    p->affine_w = p->affine_w > 1 ? p->affine_w : 1;
    p->affine = 1;
    return PLAN_OK;
}

/* The crop's corner: random with rand_crop, else centred. */
static void plan_place(const plan_config *c, const double *u, long spare_rows, long spare_cols,
                       full_plan *p)
{
    if (c->rand_crop) {
        p->x = plan_randint(u[U_CROP_X], 0, spare_cols);
        p->y = plan_randint(u[U_CROP_Y], 0, spare_rows);
    } else {
        p->x = spare_cols / 2;
        p->y = spare_rows / 2;
    }
}

/* A random-resized crop of the work image: 1 with the box, 0 when every try failed. */
static int plan_rrc(const plan_config *c, const double *u, full_plan *p)
{
    long rows = p->work_h, cols = p->work_w;
    double log_low = log(c->aspect_low), log_high = log(c->aspect_high);
    double area = (double)(rows * cols);
    for (int i = 0; i < RRC_TRIES; i++) {
        int base = U_RRC + 4 * i;
        double target = area * (c->min_area + u[base] * (c->max_area - c->min_area));
        double ratio = exp(log_low + u[base + 1] * (log_high - log_low));
        double w = nearbyint(sqrt(target * ratio)); /* Python's round: half to even */
        double h = nearbyint(sqrt(target / ratio));
        /* compared as doubles: a huge, infinite or NaN size is never cast to long */
        if (w > 0 && w <= (double)cols && h > 0 && h <= (double)rows) {
            p->w = (long)w;
            p->h = (long)h;
            p->x = plan_randint(u[base + 2], 0, cols - p->w);
            p->y = plan_randint(u[base + 3], 0, rows - p->h);
            return 1;
        }
    }
    return 0;
}

/* The crop of the work image (upscaled first when it is smaller than the output). */
static int plan_crop(const plan_config *c, const double *u, full_plan *p)
{
    long rows = p->work_h, cols = p->work_w;
    p->upscale = 0;
    p->resize_crop = 0;
    if (c->rrc) {
        if (plan_rrc(c, u, p)) {
            p->resize_crop = 1;
            return PLAN_OK;
        }
    } else if (c->max_crop != -1) {
        if ((rows < cols ? rows : cols) < c->max_crop)
            return PLAN_UNDER_CROP;
        long size = plan_randint(u[U_CROP], c->min_crop, c->max_crop);
        plan_place(c, u, rows - size, cols - size, p);
        p->w = p->h = size;
        p->resize_crop = 1;
        return PLAN_OK;
    }
    if (rows < c->out_h || cols < c->out_w) {
        double fy = (double)c->out_h / (double)rows, fx = (double)c->out_w / (double)cols;
        double factor = fx > fy ? fx : fy; /* Python's max: the first of equals */
        long up_h, up_w;
        if (!plan_side((double)rows * factor + 0.5, &up_h)
            || !plan_side((double)cols * factor + 0.5, &up_w))
            return PLAN_TOO_LARGE;
        rows = up_h > c->out_h ? up_h : c->out_h;
        cols = up_w > c->out_w ? up_w : c->out_w;
        p->upscale = 1;
        p->up_h = rows;
        p->up_w = cols;
    }
    plan_place(c, u, rows - c->out_h, cols - c->out_w, p);
    p->w = c->out_w;
    p->h = c->out_h;
    return PLAN_OK;
}

/* The colour jitter: brightness/contrast/saturation in the order of their keys (a stable sort),
 * each with its factor, those whose limit is 0 left out. */
static void plan_colour(const plan_config *c, const double *u, full_plan *p)
{
    int order[3] = {0, 1, 2};
    for (int i = 1; i < 3; i++)
        for (int k = i; k > 0 && u[U_ORDER + order[k]] < u[U_ORDER + order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    p->n_colour = 0;
    for (int i = 0; i < 3; i++) {
        int op = order[i];
        if (c->colour[op] > 0) {
            p->colour_op[p->n_colour] = op;
            p->colour_alpha[p->n_colour] = 1.0 + c->colour[op] * (2 * u[U_COLOUR + op] - 1);
            p->n_colour++;
        }
    }
}

/* AlexNet's PCA lighting (RGB eigenvalues and eigenvectors, as mx.image.LightingAug). */
static const float PLAN_EIGVAL[3] = {55.46f, 4.794f, 1.148f};
static const float PLAN_EIGVEC[3][3] = {{-0.5675f, 0.7192f, 0.4009f},
                                        {-0.5808f, -0.0045f, -0.8140f},
                                        {-0.5836f, -0.6948f, 0.4203f}};

/* The offsets in float32: alpha = float32(normal) * float32(pca_noise), x = alpha * eigval,
 * then eigvec @ x row by row as ((v0 x0 + v1 x1) + v2 x2). */
static void plan_pca(double pca_noise, const double normals[3], float out[3])
{
    float x[3];
    for (int i = 0; i < 3; i++) {
        volatile float alpha = (float)normals[i] * (float)pca_noise; /* rounded: no contraction */
        x[i] = alpha * PLAN_EIGVAL[i];
    }
    for (int r = 0; r < 3; r++) {
        volatile float a = PLAN_EIGVEC[r][0] * x[0], b = PLAN_EIGVEC[r][1] * x[1];
        volatile float cc = PLAN_EIGVEC[r][2] * x[2];
        out[r] = (a + b) + cc;
    }
}

/* Every decision for a ``rows`` x ``cols`` source image from its uniforms ``u`` (N_UNIFORM)
 * and, when pca_noise > 0, its three standard ``normals``. PLAN_OK, or the PLAN_* reason. */
static inline int plan_full(const plan_config *c, const double u[N_UNIFORM], const double normals[3],
                     long rows, long cols, full_plan *p)
{
    int status;
    p->src_h = rows;
    p->src_w = cols;
    if (rows <= 0 || cols <= 0)
        return PLAN_BAD_SIZE;
    if (rows > PLAN_MAX_SIDE || cols > PLAN_MAX_SIDE)
        return PLAN_TOO_LARGE;
    for (int i = 0; i < 3; i++)
        p->inter[i] = c->inter_method == 10 ? (int)plan_randint(u[U_INTER + i], 0, 4)
                                            : c->inter_method;
    p->res_h = rows;
    p->res_w = cols;
    if (c->resize != -1)
        plan_shorter_edge(rows, cols, c->resize, &p->res_h, &p->res_w);
    if (p->res_h > PLAN_MAX_SIDE || p->res_w > PLAN_MAX_SIDE)
        return PLAN_TOO_LARGE;
    p->affine = 0;
    p->work_h = p->res_h;
    p->work_w = p->res_w;
    if (c->affine) {
        if ((status = plan_affine(c, u, p)) != PLAN_OK)
            return status;
        p->work_h = p->affine_h;
        p->work_w = p->affine_w;
    }
    p->work_h += 2 * c->pad;
    p->work_w += 2 * c->pad;
    if ((status = plan_crop(c, u, p)) != PLAN_OK)
        return status;
    p->mirror = c->mirror || (c->rand_mirror && u[U_MIRROR] < 0.5);
    p->has_hls = c->hls[0] || c->hls[1] || c->hls[2];
    for (int i = 0; i < 3; i++) { /* int(u * v * 2 - v): truncated toward zero */
        double v = (double)c->hls[i];
        p->hls[i] = p->has_hls ? (long)(u[U_HLS + i] * v * 2 - v) : 0;
    }
    plan_colour(c, u, p);
    p->has_pca = c->pca_noise > 0;
    if (p->has_pca)
        plan_pca(c->pca_noise, normals, p->pca);
    p->contrast = 1.0 + c->max_contrast * (2 * u[U_NORM] - 1);
    p->illumination = c->max_illumination * (2 * u[U_NORM + 1] - 1);
    return PLAN_OK;
}

/* --- the options tuple ------------------------------------------------------------------------ */

#define PLAN_FIELD(name, member, kind) FIELD_AS(plan_config, name, member, kind)

/* The planning options, in tuple order (exported as OPTION_FIELDS by recpipe._plan; the first
 * fields of recpipe._batch's), parsed by common/fields.h. */
static const field PLAN_FIELDS[] = {
    PLAN_FIELD("out_h", out_h, FIELD_LONG),
    PLAN_FIELD("out_w", out_w, FIELD_LONG),
    PLAN_FIELD("resize", resize, FIELD_LONG),
    PLAN_FIELD("rand_crop", rand_crop, FIELD_BOOL),
    PLAN_FIELD("mirror", mirror, FIELD_BOOL),
    PLAN_FIELD("rand_mirror", rand_mirror, FIELD_BOOL),
    PLAN_FIELD("rrc", rrc, FIELD_BOOL),
    PLAN_FIELD("min_area", min_area, FIELD_DOUBLE),
    PLAN_FIELD("max_area", max_area, FIELD_DOUBLE),
    PLAN_FIELD("aspect_low", aspect_low, FIELD_DOUBLE),
    PLAN_FIELD("aspect_high", aspect_high, FIELD_DOUBLE),
    PLAN_FIELD("brightness", colour[0], FIELD_DOUBLE),
    PLAN_FIELD("contrast", colour[1], FIELD_DOUBLE),
    PLAN_FIELD("saturation", colour[2], FIELD_DOUBLE),
    PLAN_FIELD("max_contrast", max_contrast, FIELD_DOUBLE),
    PLAN_FIELD("max_illumination", max_illumination, FIELD_DOUBLE),
    PLAN_FIELD("pca_noise", pca_noise, FIELD_DOUBLE),
    PLAN_FIELD("random_h", hls[0], FIELD_LONG),
    PLAN_FIELD("random_s", hls[1], FIELD_LONG),
    PLAN_FIELD("random_l", hls[2], FIELD_LONG),
    PLAN_FIELD("affine", affine, FIELD_BOOL),
    PLAN_FIELD("max_shear_ratio", max_shear, FIELD_DOUBLE),
    PLAN_FIELD("max_rotate_angle", max_angle, FIELD_LONG),
    PLAN_FIELD("rotate", rotate, FIELD_LONG),
    PLAN_FIELD("rotate_list", rotate_list, FIELD_LONGS),
    PLAN_FIELD("min_random_scale", min_scale, FIELD_DOUBLE),
    PLAN_FIELD("max_random_scale", max_scale, FIELD_DOUBLE),
    PLAN_FIELD("min_img_size", min_img, FIELD_DOUBLE),
    PLAN_FIELD("max_img_size", max_img, FIELD_DOUBLE),
    PLAN_FIELD("pad", pad, FIELD_LONG),
    PLAN_FIELD("inter_method", inter_method, FIELD_INT),
    PLAN_FIELD("min_crop_size", min_crop, FIELD_LONG),
    PLAN_FIELD("max_crop_size", max_crop, FIELD_LONG),
};

#define N_PLAN_FIELDS FIELD_COUNT(PLAN_FIELDS)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Frees what plan_parse allocated (the angles); safe on a zeroed or half-parsed config. */
static void plan_release(plan_config *c)
{
    fields_release(PLAN_FIELDS, N_PLAN_FIELDS, c);
}

/* A ValueError for options planning cannot honour (limits that keep every size inside long and
 * double ranges; AugmentConfig validates more). */
static int plan_invalid(const plan_config *c)
{
    int finite = isfinite(c->min_area) && isfinite(c->max_area) && isfinite(c->aspect_low)
                 && isfinite(c->aspect_high) && isfinite(c->max_shear) && isfinite(c->min_scale)
                 && isfinite(c->max_scale) && isfinite(c->min_img) && isfinite(c->max_img)
                 && isfinite(c->colour[0]) && isfinite(c->colour[1]) && isfinite(c->colour[2])
                 && isfinite(c->max_contrast) && isfinite(c->max_illumination)
                 && isfinite(c->pca_noise);
    if (!finite) {
        PyErr_SetString(PyExc_ValueError, "planning options must be finite numbers");
        return 1;
    }
    if (c->out_h < 1 || c->out_w < 1 || c->out_h > 65535 || c->out_w > 65535) {
        PyErr_SetString(PyExc_ValueError, "out_h and out_w must be in 1..65535");
        return 1;
    }
    if ((c->resize != -1 && c->resize < 1) || c->resize > 65535
        || (c->rrc && !(c->aspect_low >= 1e-6 && c->aspect_low <= c->aspect_high
                        && c->aspect_high <= 1e6 && c->min_area >= 0
                        && c->min_area <= c->max_area && c->max_area <= 1))) {
        PyErr_SetString(PyExc_ValueError, "resize or the aspect range is invalid");
        return 1;
    }
    if (c->pad < 0 || c->pad > 65535 || c->max_angle < -1000000000L
        || c->max_angle > 1000000000L || c->rotate < -1000000000L || c->rotate > 1000000000L) {
        PyErr_SetString(PyExc_ValueError, "pad or a rotation angle is invalid");
        return 1;
    }
    for (int i = 0; i < 3; i++)
        if (c->hls[i] < -(1L << 52) || c->hls[i] > (1L << 52)) {
            PyErr_SetString(PyExc_ValueError, "random_h, random_s and random_l must be within "
                                              "+-2**52");
            return 1;
        }
    if (!((c->inter_method >= 0 && c->inter_method <= 4) || c->inter_method == 9
          || c->inter_method == 10)
        || (c->max_crop != -1 && !(c->min_crop >= 1 && c->min_crop <= c->max_crop
                                    && c->max_crop <= 65535))) {
        PyErr_SetString(PyExc_ValueError, "inter_method or the crop size range is invalid");
        return 1;
    }
    return 0;
}

/* The planning options from ``options[first:first + N_PLAN_FIELDS]`` into ``c`` (zeroed by the
 * caller), validated; -1 with an exception naming the field. plan_release afterwards, always. */
static int plan_parse(PyObject *options, Py_ssize_t first, plan_config *c)
{
    if (fields_parse(options, first, PLAN_FIELDS, N_PLAN_FIELDS, c))
        return -1;
    return plan_invalid(c) ? -1 : 0;
}

/* The slots as a dict (DRAW_SLOTS): name -> first uniform. */
static PyObject *plan_draw_slots(void)
{
    return Py_BuildValue("{sisisisisisisisisisisisisi}", "rrc", U_RRC, "rrc_tries", RRC_TRIES,
                         "crop_x", U_CROP_X, "crop_y", U_CROP_Y, "mirror", U_MIRROR, "order",
                         U_ORDER, "colour", U_COLOUR, "drawn", N_UNIFORM, "hls", U_HLS, "norm",
                         U_NORM, "affine", U_AFFINE, "inter", U_INTER, "crop", U_CROP);
}

/* A module's contract: OPTION_FIELDS, the planner's field names followed by those of the
 * ``n_more`` tables ``more`` (``counts`` rows each: the extension's own, in its tuple order),
 * and DRAW_SLOTS. */
static int plan_add_contract(PyObject *module, const field *const *more, const Py_ssize_t *counts,
                             int n_more)
{
    const field *tables[4] = {PLAN_FIELDS};
    Py_ssize_t sizes[4] = {N_PLAN_FIELDS};
    if (n_more > 3)
        return -1;
    for (int i = 0; i < n_more; i++) {
        tables[1 + i] = more[i];
        sizes[1 + i] = counts[i];
    }
    PyObject *names = fields_names(tables, sizes, 1 + n_more), *slots;
    if (names == NULL || PyModule_AddObject(module, "OPTION_FIELDS", names) < 0) {
        Py_XDECREF(names);
        return -1;
    }
    slots = plan_draw_slots();
    if (slots == NULL || PyModule_AddObject(module, "DRAW_SLOTS", slots) < 0) {
        Py_XDECREF(slots);
        return -1;
    }
    return 0;
}

#endif
