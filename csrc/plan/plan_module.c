/*
 * recpipe._plan: the one planner (csrc/plan/plan.h) for the Python path. recpipe._batch calls the
 * same plan_full for every sample it renders, so the two paths differ only in their kernels.
 *
 * plan(options, uniforms, normals, height, width) -> the fields of a SamplePlan, in order:
 *     (source_size, resized_size, affine, work_size, upscale, crop, resize_crop, inter, mirror,
 *      hls, colour, pca, contrast, illumination)
 *   or, when the image cannot be planned, (status, rows, cols): status BAD_SIZE (height or
 *   width <= 0), UNDER_CROP (rows x cols, the image after resize/affine/pad, is smaller than
 *   max_crop_size) or TOO_LARGE (a size past 2**31 - 1); the caller raises its DecodeError.
 * ``options``: a tuple of the OPTION_FIELDS (recpipe.decode.augment.plan.Planner.options);
 * ``uniforms``: a C-contiguous buffer of 64 float64 (numpy's Generator.random(64)) read at the
 * DRAW_SLOTS; ``normals``: None, or 3 float64 (Generator.standard_normal(3), drawn after the
 * uniforms) when pca_noise > 0; draws' bytes are taken as they are.
 *
 * draws(key_lo, key_hi, sample, epoch, normals) -> (uniforms, normals): a sample's random draws
 *     (plan/draws.h, the ones recpipe._batch plans with): its N_UNIFORM uniforms as bytes of
 *     float64, and PCA lighting's 3 normals when ``normals`` is true (None when PCA_NATIVE is
 *     0: numpy's sampler was not linked, and the caller draws them with numpy).
 *
 * check(options) -> None: ``options`` parsed and validated (TypeError/ValueError), as plan does.
 * resize_shorter(height, width, size) -> (rows, cols): MXNet's resize step.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "plan/draws.h"
#include "plan/geometry.h"
#include "plan/plan.h"

/* ``options`` parsed into ``c`` (zeroed here); plan_release(c) afterwards, always. */
static int parse_options(PyObject *options, plan_config *c)
{
    memset(c, 0, sizeof *c);
    if (!PyTuple_Check(options) || PyTuple_GET_SIZE(options) != N_PLAN_FIELDS) {
        PyErr_Format(PyExc_TypeError, "options must be a tuple of %zd values (OPTION_FIELDS)",
                     N_PLAN_FIELDS);
        return -1;
    }
    return plan_parse(options, 0, c);
}

/* ``count`` float64 from a C-contiguous buffer of exactly that many into ``out``. */
static int read_doubles(PyObject *source, double *out, Py_ssize_t count, const char *name)
{
    if (PyBytes_CheckExact(source) && PyBytes_GET_SIZE(source) == count * 8) { /* draws' */
        memcpy(out, PyBytes_AS_STRING(source), (size_t)count * sizeof(double));
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(source, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view.format == NULL ? "B" : view.format;
    if (format[0] == '<' || format[0] == '=' || format[0] == '@')
        format++;
    int ok = strcmp(format, "d") == 0 && view.itemsize == 8 && view.len == count * 8;
    if (ok)
        memcpy(out, view.buf, (size_t)count * sizeof(double));
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd float64 values", name, count);
        return -1;
    }
    return 0;
}

static PyObject *pair(long a, long b)
{
    return Py_BuildValue("(ll)", a, b);
}

/* The SamplePlan fields of ``p`` as a tuple. */
static PyObject *plan_tuple(const full_plan *p)
{
    const double *m = p->matrix;
    PyObject *affine = p->affine ? Py_BuildValue("((ddd)(ddd))(ll)", m[0], m[1], m[2], m[3], m[4],
                                                 m[5], p->affine_h, p->affine_w)
                                 : Py_NewRef(Py_None);
    PyObject *upscale = p->upscale ? pair(p->up_h, p->up_w) : Py_NewRef(Py_None);
    PyObject *hls = p->has_hls ? Py_BuildValue("(lll)", p->hls[0], p->hls[1], p->hls[2])
                               : Py_NewRef(Py_None);
    PyObject *pca = p->has_pca ? Py_BuildValue("(ddd)", (double)p->pca[0], (double)p->pca[1],
                                               (double)p->pca[2])
                               : Py_NewRef(Py_None);
    PyObject *colour = PyTuple_New(p->n_colour);
    for (int i = 0; colour != NULL && i < p->n_colour; i++) {
        PyObject *op = Py_BuildValue("(id)", p->colour_op[i], p->colour_alpha[i]);
        if (op == NULL)
            Py_CLEAR(colour);
        else
            PyTuple_SET_ITEM(colour, i, op);
    }
    if (affine == NULL || upscale == NULL || hls == NULL || pca == NULL || colour == NULL) {
        Py_XDECREF(affine);
        Py_XDECREF(upscale);
        Py_XDECREF(hls);
        Py_XDECREF(pca);
        Py_XDECREF(colour);
        return NULL;
    }
    return Py_BuildValue("((ll)(ll)N(ll)N(llll)N(iii)NNNNddy#)", p->src_h, p->src_w, p->res_h,
                         p->res_w, affine, p->work_h, p->work_w, upscale, p->x, p->y, p->w, p->h,
                         PyBool_FromLong(p->resize_crop), p->inter[0], p->inter[1], p->inter[2],
                         PyBool_FromLong(p->mirror), hls, colour, pca, p->contrast,
                         p->illumination, (const char *)p, (Py_ssize_t)sizeof *p);
}

static PyObject *plan_plan(PyObject *self, PyObject *args)
{
    PyObject *options, *uniforms, *normals_obj, *result = NULL;
    long height, width;
    double u[N_UNIFORM], normals[3] = {0.0, 0.0, 0.0};
    plan_config config;
    full_plan p;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOll:plan", &options, &uniforms, &normals_obj, &height, &width))
        return NULL;
    if (parse_options(options, &config) || read_doubles(uniforms, u, N_UNIFORM, "uniforms"))
        goto done;
    if (config.pca_noise > 0) {
        if (normals_obj == Py_None) {
            PyErr_SetString(PyExc_ValueError, "normals must hold 3 float64 values when "
                                              "pca_noise > 0");
            goto done;
        }
        if (read_doubles(normals_obj, normals, 3, "normals"))
            goto done;
    }
    memset(&p, 0, sizeof p);
    int status = plan_full(&config, u, normals, height, width, &p);
    if (status == PLAN_OK)
        result = plan_tuple(&p);
    else if (status == PLAN_UNDER_CROP)
        result = Py_BuildValue("(ill)", status, p.work_h, p.work_w);
    else
        result = Py_BuildValue("(ill)", status, height, width);
done:
    plan_release(&config);
    return result;
}

static PyObject *plan_geometry(PyObject *self, PyObject *args)
{
    Py_buffer packed;
    geo_config g;
    full_plan p;
    unsigned den = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*lllipp|I:geometry", &packed, &g.out_h, &g.out_w, &g.pad,
                          &g.scales, &g.dct_scaling, &g.resize_kernel, &den))
        return NULL;
    if (den != 0 && den != 1 && den != 2 && den != 4 && den != 8) {
        PyBuffer_Release(&packed);
        PyErr_SetString(PyExc_ValueError, "den must be 1, 2, 4 or 8 (0: the planner's choice)");
        return NULL;
    }
    int ok = packed.len == (Py_ssize_t)sizeof p;
    if (ok)
        memcpy(&p, packed.buf, sizeof p);
    PyBuffer_Release(&packed);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "plan must be a C plan (plan's last field)");
        return NULL;
    }
    if (den == 0)
        den = geo_decode_scale(&g, &p);
    long box[4];
    if (!geo_decode_box(&g, &p, den, box))
        return Py_BuildValue("IO", den, Py_None);
    return Py_BuildValue("I(llll)", den, box[0], box[1], box[2], box[3]);
}

static PyObject *plan_resolve_inter(PyObject *self, PyObject *args)
{
    int method;
    long old_h, old_w, new_h, new_w;
    (void)self;
    if (!PyArg_ParseTuple(args, "illll:resolve_inter", &method, &old_h, &old_w, &new_h, &new_w))
        return NULL;
    return PyLong_FromLong(geo_resolve_inter(method, old_h, old_w, new_h, new_w));
}

static PyObject *plan_check(PyObject *self, PyObject *args)
{
    PyObject *options;
    plan_config config;
    (void)self;
    if (!PyArg_ParseTuple(args, "O:check", &options))
        return NULL;
    int failed = parse_options(options, &config);
    plan_release(&config);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *plan_resize_shorter(PyObject *self, PyObject *args)
{
    long height, width, size, rows, cols;
    (void)self;
    if (!PyArg_ParseTuple(args, "lll:resize_shorter", &height, &width, &size))
        return NULL;
    if (height < 1 || width < 1 || size < 1 || height > PLAN_MAX_SIDE || width > PLAN_MAX_SIDE
        || size > 65535) {
        PyErr_SetString(PyExc_ValueError, "resize_shorter: sizes must be positive (size at most "
                                          "65535, sides at most 2**31 - 1)");
        return NULL;
    }
    plan_shorter_edge(height, width, size, &rows, &cols);
    return pair(rows, cols);
}


/* draws(key_lo, key_hi, sample, epoch, normals) -> (uniforms, normals): plan/draws.h */
static PyObject *plan_draws(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "draws() takes exactly 5 arguments (%zd given)", nargs);
        return NULL;
    }
    uint64_t words[4];
    for (int i = 0; i < 4; i++) { /* key_lo, key_hi, sample, epoch: taken modulo 2**64 */
        words[i] = (uint64_t)PyLong_AsUnsignedLongLongMask(args[i]);
        if (words[i] == (uint64_t)-1 && PyErr_Occurred())
            return NULL;
    }
    int want_normals = PyObject_IsTrue(args[4]);
    if (want_normals < 0)
        return NULL;
    PyObject *uniforms = PyBytes_FromStringAndSize(NULL, N_UNIFORM * sizeof(double));
    if (uniforms == NULL)
        return NULL;
    double normals[3];
    uint64_t key[2] = {words[0], words[1]};
    int drawn = sample_draws(key, words[2], words[3], (double *)PyBytes_AS_STRING(uniforms),
                             want_normals ? normals : NULL);
    if (!want_normals || !drawn)
        return Py_BuildValue("(NO)", uniforms, Py_None);
    PyObject *out = PyBytes_FromStringAndSize((const char *)normals, sizeof normals);
    if (out == NULL) {
        Py_DECREF(uniforms);
        return NULL;
    }
    return Py_BuildValue("(NN)", uniforms, out);
}

static PyMethodDef plan_methods[] = {
    {"draws", (PyCFunction)(void (*)(void))plan_draws, METH_FASTCALL,
     "draws(key_lo, key_hi, sample, epoch, normals) -> (uniforms, normals): the random draws "
     "of one sample (plan/draws.h, the ones recpipe._batch plans with): the first N_UNIFORM "
     "doubles of its Philox stream (numpy's Generator.random(N_UNIFORM)) as bytes of native "
     "float64, and when ``normals`` is true the 3 standard normals PCA lighting draws after "
     "them (numpy's ziggurat) as bytes of 3 float64, or None when PCA_NATIVE is 0."},
    {"plan", plan_plan, METH_VARARGS,
     "plan(options, uniforms, normals, height, width) -> the SamplePlan fields of one sample "
     "(the last: the C plan, as bytes), or (status, rows, cols) when it cannot be planned."},
    {"geometry", plan_geometry, METH_VARARGS,
     "geometry(plan, out_h, out_w, pad, scales, dct_scaling, resize_kernel, den=0) -> (den, "
     "box): the DCT scale 1/den to decode the planned sample at (scales: bits 1, 2, 4 for 1/2, "
     "1/4, 1/8 offered; den given: that one) and the box (x0, y0, x1, y1) of that decode "
     "rendering reads, or None for the whole image."},
    {"resolve_inter", plan_resolve_inter, METH_VARARGS,
     "resolve_inter(method, old_h, old_w, new_h, new_w) -> int: MXNet's choice for inter_method "
     "9 (auto) by the sizes (2 bicubic up, 3 area down, else 1 bilinear); others as they are."},
    {"check", plan_check, METH_VARARGS,
     "check(options) -> None: the planning options parsed and validated as plan does."},
    {"resize_shorter", plan_resize_shorter, METH_VARARGS,
     "resize_shorter(height, width, size) -> (rows, cols): MXNet's resize step, the shorter "
     "edge to size, the other size * long // short."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef plan_module = {
    PyModuleDef_HEAD_INIT, "recpipe._plan",
    "The one planner: every random decision of a sample, for both decode paths.", -1,
    plan_methods,
};

/* OPTION_FIELDS (the option names in order), DRAW_SLOTS (where planning reads its uniforms) and
 * the statuses of plan. */
static int add_contract(PyObject *module)
{
    if (plan_add_contract(module, NULL, NULL, 0) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "BAD_SIZE", PLAN_BAD_SIZE) < 0
        || PyModule_AddIntConstant(module, "UNDER_CROP", PLAN_UNDER_CROP) < 0
        || PyModule_AddIntConstant(module, "TOO_LARGE", PLAN_TOO_LARGE) < 0
        || PyModule_AddIntConstant(module, "PCA_NATIVE", PCA_NATIVE) < 0)
        return -1;
    return 0;
}

PyMODINIT_FUNC PyInit__plan(void)
{
    PyObject *module = PyModule_Create(&plan_module);
    if (module != NULL && add_contract(module) < 0)
        Py_CLEAR(module);
    return module;
}
