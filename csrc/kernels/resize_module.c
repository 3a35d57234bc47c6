/*
 * recpipe._resize: bilinear resize of part of an image straight into a batch slot.
 *
 * linear(src, height, width, channels, dst, out_h, out_w, y_axis, x_axis, mirror, nchw,
 *        gains, offsets)
 *
 * ``src`` is a C-contiguous ``height x width x channels`` uint8 buffer (channels 1 or 3).
 * ``dst`` is a writable C-contiguous buffer of ``out_h x out_w x channels`` uint8 or float32
 * values (its item size says which), in (C, H, W) order when ``nchw`` is true, else (H, W, C).
 * Each axis is ``(offset, length, shift, scale)``: output index i samples the source at
 *
 *     pos = (float)((i + shift + 0.5) * scale - 0.5),  clamped to [0, length - 1],
 *
 * which is OpenCV's INTER_LINEAR sampling of a ``length``-pixel line resized by ``1 / scale``
 * (``shift`` > 0 starts the output ``shift`` pixels into the resized line: resize-then-crop
 * without computing the cropped-away pixels); the line starts at ``offset`` in ``src``.
 * Weights are OpenCV's 11-bit fixed-point steps; both passes run in float32 with one rounding
 * at the end, so values equal cv2.resize's within 1. ``mirror`` flips the output
 * horizontally. float32 output is ``value * gains[c] + offsets[c]``; uint8 output ignores them.
 *
 * Every sampled pixel must lie inside ``src`` (ValueError otherwise). The GIL is released while
 * it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/pyargs.h"

#include "kernels/resize.h"

static int parse_axis(PyObject *obj, axis_spec *a, const char *name)
{
    if (!PyArg_ParseTuple(obj, "nndd", &a->offset, &a->length, &a->shift, &a->scale)) {
        PyErr_Format(PyExc_TypeError, "%s must be (offset, length, shift, scale)", name);
        return -1;
    }
    if (a->length < 1 || !(a->scale > 0) || !isfinite(a->scale) || !isfinite(a->shift)) {
        PyErr_Format(PyExc_ValueError, "%s: length must be >= 1 and scale finite and > 0", name);
        return -1;
    }
    return 0;
}

static PyObject *resize_linear(PyObject *self, PyObject *args)
{
    Py_buffer src = {0}, dst = {0};
    PyObject *y_obj, *x_obj, *gains_obj, *offsets_obj, *result = NULL;
    axis_spec ya, xa;
    resize_job j = {0};
    if (!PyArg_ParseTuple(args, "y*nnnw*nnOOppOO:linear", &src, &j.height, &j.width, &j.channels,
                          &dst, &j.out_h, &j.out_w, &y_obj, &x_obj, &j.mirror, &j.nchw,
                          &gains_obj, &offsets_obj))
        return NULL;
    if (j.channels != 1 && j.channels != 3) {
        PyErr_SetString(PyExc_ValueError, "channels must be 1 or 3");
        goto done;
    }
    Py_ssize_t src_bytes, values, value_bytes;
    if (checked_size(&src_bytes, j.height, j.width, j.channels, "src")
        || checked_size(&values, j.out_h, j.out_w, j.channels, "dst")
        || checked_size(&value_bytes, values, 4, 1, "dst"))
        goto done;
    if (j.height < 1 || j.width < 1 || j.out_h < 1 || j.out_w < 1 || src.len != src_bytes) {
        PyErr_SetString(PyExc_ValueError, "src must hold height x width x channels bytes");
        goto done;
    }
    if (dst.len == value_bytes && dst.itemsize == 4)
        j.is_float = 1;
    else if (dst.len != values || dst.itemsize != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "dst must hold out_h x out_w x channels uint8 or float32 values");
        goto done;
    }
    if (parse_axis(y_obj, &ya, "y_axis") || parse_axis(x_obj, &xa, "x_axis")
        || parse_floats(gains_obj, j.gains, j.channels, "gains")
        || parse_floats(offsets_obj, j.offsets, j.channels, "offsets"))
        goto done;
    int prepared = resize_prepare(&j, &ya, &xa);
    if (prepared == -1) {
        PyErr_NoMemory();
        goto free;
    }
    if (prepared == -2) {
        PyErr_SetString(PyExc_ValueError, "src does not cover the pixels the resize samples");
        goto free;
    }
    j.src = src.buf;
    j.dst = dst.buf;
    Py_BEGIN_ALLOW_THREADS
    resize_run(&j);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
free:
    resize_release(&j);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyMethodDef resize_methods[] = {
    {"linear", resize_linear, METH_VARARGS,
     "linear(src, height, width, channels, dst, out_h, out_w, y_axis, x_axis, mirror, nchw, "
     "gains, offsets): bilinear resize of part of src into dst (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef resize_module = {
    PyModuleDef_HEAD_INIT, "recpipe._resize",
    "Bilinear resize of part of an image straight into a batch slot.", -1, resize_methods,
};

PyMODINIT_FUNC PyInit__resize(void)
{
    return PyModule_Create(&resize_module);
}
