/*
 * The rendering options as recpipe's extensions take them from Python: a
 * recpipe.decode.native.RenderOptions (a tuple) is the planner's options (plan/plan.h's
 * PLAN_FIELDS) followed by RENDER_FIELDS below, parsed by common/fields.h into a plan_config
 * and a render_config (kernels/render.h). recpipe._kernels takes exactly these; recpipe._batch's
 * RunOptions starts with them (batch/options.h).
 */
#ifndef RECPIPE_KERNELS_RENDER_FIELDS_H
#define RECPIPE_KERNELS_RENDER_FIELDS_H

#include <Python.h>

#include "common/fields.h"
#include "kernels/render.h"
#include "plan/plan.h"

#define RENDER_FIELD(name, member, kind) FIELD_AS(render_config, name, member, kind)

/* The renderer's fields, in RenderOptions' order after the planner's. */
static const field RENDER_FIELDS[] = {
    RENDER_FIELD("nchw", nchw, FIELD_BOOL),
    RENDER_FIELD("gains", gains, FIELD_FLOAT3),
    RENDER_FIELD("offsets", offsets, FIELD_FLOAT3),
    RENDER_FIELD("gain_r", exact_gains[0], FIELD_DOUBLE),
    RENDER_FIELD("gain_g", exact_gains[1], FIELD_DOUBLE),
    RENDER_FIELD("gain_b", exact_gains[2], FIELD_DOUBLE),
    RENDER_FIELD("channels", channels, FIELD_LONG),
    RENDER_FIELD("mean_r", means[0], FIELD_DOUBLE),
    RENDER_FIELD("mean_g", means[1], FIELD_DOUBLE),
    RENDER_FIELD("mean_b", means[2], FIELD_DOUBLE),
    RENDER_FIELD("fill_value", fill, FIELD_INT),
    RENDER_FIELD("dct_scaling", dct_scaling, FIELD_BOOL),
    RENDER_FIELD("resize_kernel", resize_kernel, FIELD_BOOL),
};

#define N_RENDER_FIELDS FIELD_COUNT(RENDER_FIELDS)

/* ``options[first:first + N_RENDER_FIELDS]`` into ``r`` (zeroed by the caller), completed from
 * the planner's options ``c`` (parsed before) and validated; -1 with an exception. */
static int render_parse(PyObject *options, Py_ssize_t first, const plan_config *c,
                        render_config *r)
{
    if (fields_parse(options, first, RENDER_FIELDS, N_RENDER_FIELDS, r))
        return -1;
    r->out_h = c->out_h;
    r->out_w = c->out_w;
    r->pad = c->pad;
    r->max_contrast = c->max_contrast;
    r->max_illumination = c->max_illumination;
    if (r->fill < 0 || r->fill > 255) {
        PyErr_SetString(PyExc_ValueError, "fill_value must be in 0..255");
        return -1;
    }
    if (r->channels != 1 && r->channels != 3) {
        PyErr_SetString(PyExc_ValueError, "channels must be 1 or 3");
        return -1;
    }
    if (r->channels == 1
        && (c->colour[2] > 0 || c->pca_noise > 0 || c->hls[0] || c->hls[1] || c->hls[2])) {
        PyErr_SetString(PyExc_ValueError, "saturation, PCA lighting and the HLS shift need 3 "
                                          "channels");
        return -1;
    }
    if (r->resize_kernel && (!r->dct_scaling || c->affine || c->pad)) {
        PyErr_SetString(PyExc_ValueError, "resize_kernel needs dct_scaling, no affine step and "
                                          "no pad");
        return -1;
    }
    return 0;
}

#endif
