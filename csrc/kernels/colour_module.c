/*
 * recpipe._colour: ImageRecordIter's colour jitter, PCA lighting, mirror, normalisation and
 * layout in one call, straight into a batch slot.
 *
 * jitter(src, height, width, dst, ops, pca, mirror, nchw, gains, offsets, scratch)
 *
 * ``src`` is a C-contiguous ``height x width x 3`` uint8 RGB buffer. ``dst`` is a writable
 * C-contiguous buffer of ``height x width x 3`` uint8 or float32 values (its item size says
 * which), (C, H, W) when ``nchw`` is true, else (H, W, C). ``ops`` is a sequence of
 * ``(op, alpha)`` applied in order, each followed by clipping to [0, 255]:
 *   0 brightness  p *= alpha
 *   1 contrast    p = p * alpha + (1 - alpha) * mean(gray)   (gray over the whole image)
 *   2 saturation  p = p * alpha + (1 - alpha) * gray          (per pixel)
 * with gray = 0.299 R + 0.587 G + 0.114 B; ``pca`` is None or three RGB offsets added last (then
 * clipped). ``mirror`` flips horizontally. uint8 output rounds to nearest; float32 output is
 * ``p * gains[c] + offsets[c]``. Arithmetic is float32 on channel planes (the mean in double),
 * matching recpipe's NumPy path to float rounding. ``scratch`` is a writable buffer of at least
 * 3 x height x width float32 values (the caller keeps one per thread: no allocation per call).
 * The GIL is released while it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/pyargs.h"

#include <math.h>
#include <stdint.h>

#include "kernels/planes.h"

typedef struct {
    const uint8_t *src;
    plane_target out;             /* size, destination, layout, mirror, gains and offsets */
    int n_ops, has_pca;
    colour_op ops[MAX_OPS];
    float pca[3];
    float *planes;                /* 3 x height x width scratch */
} job;

static void run_job(job *j)
{
    Py_ssize_t n = j->out.height * j->out.width;
    to_planes(j->src, j->planes, j->planes + n, j->planes + 2 * n, n);
    colour_planes(j->planes, n, j->ops, j->n_ops, j->has_pca ? j->pca : NULL);
    write_planes(j->planes, &j->out);
}

static int parse_ops(PyObject *seq, job *j)
{
    PyObject *fast = PySequence_Fast(seq, "ops must be a sequence of (op, alpha)");
    if (fast == NULL)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    if (count > MAX_OPS) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "at most %d ops", MAX_OPS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int op;
        double alpha;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "id", &op, &alpha)) {
            Py_DECREF(fast);
            return -1;
        }
        if (op < 0 || op > 2) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "op must be 0 (brightness), 1 (contrast) or 2 "
                                              "(saturation)");
            return -1;
        }
        j->ops[i].op = op;
        j->ops[i].alpha = (float)alpha;
    }
    j->n_ops = (int)count;
    Py_DECREF(fast);
    return 0;
}

static PyObject *colour_jitter(PyObject *self, PyObject *args)
{
    Py_buffer src = {0}, dst = {0}, scratch = {0};
    PyObject *ops, *pca, *gains, *offsets, *result = NULL;
    job j = {0};
    if (!PyArg_ParseTuple(args, "y*nnw*OOppOOw*:jitter", &src, &j.out.height, &j.out.width, &dst, &ops,
                          &pca, &j.out.mirror, &j.out.nchw, &gains, &offsets, &scratch))
        return NULL;
    Py_ssize_t n, bytes, float_bytes;
    if (checked_size(&n, j.out.height, j.out.width, 1, "src") || checked_size(&bytes, n, 3, 1, "src")
        || checked_size(&float_bytes, n, 3, 4, "dst"))
        goto done;
    if (j.out.height < 1 || j.out.width < 1 || src.len != bytes) {
        PyErr_SetString(PyExc_ValueError, "src must hold height x width x 3 bytes");
        goto done;
    }
    if (dst.len == float_bytes && dst.itemsize == 4)
        j.out.is_float = 1;
    else if (dst.len != bytes || dst.itemsize != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "dst must hold height x width x 3 uint8 or float32 values");
        goto done;
    }
    if (parse_ops(ops, &j) || parse_floats(gains, j.out.gains, 3, "gains")
        || parse_floats(offsets, j.out.offsets, 3, "offsets"))
        goto done;
    if (pca != Py_None) {
        if (parse_floats(pca, j.pca, 3, "pca"))
            goto done;
        j.has_pca = 1;
    }
    if (scratch.len < float_bytes) {
        PyErr_SetString(PyExc_ValueError, "scratch must hold 3 x height x width float32 values");
        goto done;
    }
    j.planes = scratch.buf;
    j.src = src.buf;
    j.out.dst = dst.buf;
    Py_BEGIN_ALLOW_THREADS
    run_job(&j);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&scratch);
    return result;
}

static PyMethodDef colour_methods[] = {
    {"jitter", colour_jitter, METH_VARARGS,
     "jitter(src, height, width, dst, ops, pca, mirror, nchw, gains, offsets, scratch): colour "
     "jitter, PCA lighting, mirror and normalisation into dst (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef colour_module = {
    PyModuleDef_HEAD_INIT, "recpipe._colour",
    "Colour jitter, PCA lighting, mirror and normalisation straight into a batch slot.", -1,
    colour_methods,
};

PyMODINIT_FUNC PyInit__colour(void)
{
    return PyModule_Create(&colour_module);
}
