/*
 * The run contract of recpipe._batch: ``run_options``, what fill is told about a run, parsed from
 * a recpipe.decode.native.RunOptions (a tuple; its names in order are the module's
 * OPTION_FIELDS): first the planner's options (plan/plan.h's PLAN_FIELDS, into ``plan``), then
 * the renderer's (kernels/render_fields.h's RENDER_FIELDS, into ``render``: together a
 * RenderOptions), then the run's (RUN_FIELDS below). Every table is parsed by common/fields.h;
 * tests/decode/test_native.py checks the names against RunOptions.
 */
#ifndef RECPIPE_BATCH_OPTIONS_H
#define RECPIPE_BATCH_OPTIONS_H

#include <Python.h>

#include "common/fields.h"
#include "kernels/render_fields.h"
#include "plan/plan.h"

#define MAX_ROTATE_LIST 64 /* the most rotate_list angles a run takes */

typedef struct {
    plan_config plan;      /* what the planner reads: the options' first fields */
    render_config render;  /* what rendering reads (kernels/render.h) */
    long label_width;
    int fast_dct, fast_upsample, strict, check_rest; /* libjpeg's (jpeg/roi.h) */
    int max_scans; /* 0: no limit */
    unsigned long long max_pixels, max_bytes;
    int scales; /* bits 1, 2, 4: the DCT scales 1/2, 1/4, 1/8 offered */
    int id_labels; /* labels from the caller's id table, not the record header */
} run_options;

#define RUN_FIELD(name, member, kind) FIELD_AS(run_options, name, member, kind)

/* The run's fields, in RunOptions' order after the planner's. */
static const field RUN_FIELDS[] = {
    RUN_FIELD("label_width", label_width, FIELD_LONG),
    RUN_FIELD("fast_dct", fast_dct, FIELD_BOOL),
    RUN_FIELD("fast_upsample", fast_upsample, FIELD_BOOL),
    RUN_FIELD("strict", strict, FIELD_BOOL),
    RUN_FIELD("max_pixels", max_pixels, FIELD_ULL),
    RUN_FIELD("max_bytes", max_bytes, FIELD_ULL),
    RUN_FIELD("check_rest", check_rest, FIELD_BOOL),
    RUN_FIELD("max_scans", max_scans, FIELD_INT),
    RUN_FIELD("scales", scales, FIELD_INT),
    RUN_FIELD("id_labels", id_labels, FIELD_BOOL),
};

#define N_RUN_FIELDS FIELD_COUNT(RUN_FIELDS)

/* Frees what run_parse allocated; safe on a zeroed or half-parsed run_options. */
static void run_release(run_options *opt)
{
    plan_release(&opt->plan);
    fields_release(RUN_FIELDS, N_RUN_FIELDS, opt);
}

/* ``options`` into ``opt`` (zeroed by the caller), validated; -1 with an exception naming the
 * field. run_release(opt) afterwards, always. */
static int run_parse(PyObject *options, run_options *opt)
{
    Py_ssize_t count = N_PLAN_FIELDS + N_RENDER_FIELDS + N_RUN_FIELDS;
    if (!PyTuple_Check(options) || PyTuple_GET_SIZE(options) != count) {
        PyErr_Format(PyExc_TypeError, "options must be a tuple of %zd values (OPTION_FIELDS)",
                     count);
        return -1;
    }
    if (plan_parse(options, 0, &opt->plan))
        return -1;
    if (opt->plan.rotate_list.count > MAX_ROTATE_LIST) {
        PyErr_Format(PyExc_TypeError, "options.rotate_list must be a tuple of at most %d ints",
                     MAX_ROTATE_LIST);
        return -1;
    }
    if (render_parse(options, N_PLAN_FIELDS, &opt->plan, &opt->render)
        || fields_parse(options, N_PLAN_FIELDS + N_RENDER_FIELDS, RUN_FIELDS, N_RUN_FIELDS, opt))
        return -1;
    if (opt->max_scans < 0) {
        PyErr_SetString(PyExc_ValueError, "max_scans must be >= 0 (0: no limit)");
        return -1;
    }
    if (opt->label_width < 1) { /* (out_h and out_w: plan_parse's) */
        PyErr_SetString(PyExc_ValueError, "out_h, out_w and label_width must be positive");
        return -1;
    }
    return 0;
}

/* OPTION_FIELDS (the planner's names, then the run's) and DRAW_SLOTS into ``module``. */
static int run_add_contract(PyObject *module)
{
    const field *more[2] = {RENDER_FIELDS, RUN_FIELDS};
    Py_ssize_t counts[2] = {N_RENDER_FIELDS, N_RUN_FIELDS};
    return plan_add_contract(module, more, counts, 2);
}

#endif
