/*
 * recpipe._batch's restart-marker methods (listed in its method table by RESTART_METHODS):
 *
 * add_restarts(data, rows=0, mcus=4, optimize=True) -> bytes or None
 *     ``data`` (a JPEG) with restart intervals, losslessly (jpeg/transcode.h: the coefficients
 *     are checked to be the source's): ``rows`` > 0 one interval every ``rows`` MCU rows, else
 *     the divisor of a row's MCU count nearest ``mcus`` (both 0: no markers, a plain
 *     re-encoding); ``optimize``: optimal Huffman tables. None when the stream cannot take them
 *     (progressive, arithmetic, lossless, not 8-bit, a row longer than a DRI can count).
 *     ValueError with libjpeg's message on an error or a corrupt-data warning. GIL released.
 *
 * restart_interval(width, components, max_h_samp, rows=0, mcus=4) -> int
 *     The interval (MCUs) add_restarts would give an image of that width and sampling: 0 for
 *     none, -1 when a row is longer than a DRI can count. An encoder that writes the markers
 *     itself (recpipe.packing's re-encode) takes it from here.
 *
 * restart_layout(data) -> None or (interval, mcus_per_row, mcu_rows, row_group, col_mcus,
 *                                  mcu_width, mcu_height)
 *     The restart intervals a region decode can use (jpeg/restart.h), None when there are none.
 */
#ifndef RECPIPE_JPEG_RESTART_METHODS_H
#define RECPIPE_JPEG_RESTART_METHODS_H

#include <Python.h>

#include "jpeg/restart.h"
#include "jpeg/transcode.h"

static PyObject *restart_add(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int rows = 0, mcus = 4;
    int optimize = 1, status;
    rst_transcoding *t;
    PyObject *result = NULL;
    (void)self;

    if (!PyArg_ParseTuple(args, "y*|IIp:add_restarts", &view, &rows, &mcus, &optimize))
        return NULL;
    t = (rst_transcoding *)PyMem_RawCalloc(1, sizeof *t);
    if (t == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    {
        rst_options opt = {rows, mcus, optimize};
        Py_BEGIN_ALLOW_THREADS
        status = rst_transcode(t, (const unsigned char *)view.buf, (size_t)view.len, &opt);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (status == 0)
        result = PyBytes_FromStringAndSize((const char *)t->out.bytes, (Py_ssize_t)t->out.size);
    else if (status == 1)
        result = Py_None, Py_INCREF(Py_None);
    else
        PyErr_SetString(PyExc_ValueError, t->err.message);
    PyMem_RawFree(t->out.bytes);
    PyMem_RawFree(t);
    return result;
}

static PyObject *restart_interval_of(PyObject *self, PyObject *args)
{
    unsigned int width, max_h_samp, rows = 0, mcus = 4;
    int components;
    (void)self;

    if (!PyArg_ParseTuple(args, "IiI|II:restart_interval", &width, &components, &max_h_samp,
                          &rows, &mcus))
        return NULL;
    if (width == 0 || components < 1 || components > 4 || max_h_samp > 4) {
        PyErr_Format(PyExc_ValueError, "restart_interval: width %u, %d components and "
                     "max_h_samp %u are not a JPEG's", width, components, max_h_samp);
        return NULL;
    }
    {
        rst_options opt = {rows, mcus, 1};
        return PyLong_FromLong(rst_interval(width, components, max_h_samp, &opt));
    }
}

static PyObject *restart_layout_of(PyObject *self, PyObject *args)
{
    Py_buffer view;
    rst_layout layout;
    int usable;
    (void)self;

    if (!PyArg_ParseTuple(args, "y*:restart_layout", &view))
        return NULL;
    usable = rst_read_layout((const unsigned char *)view.buf, (size_t)view.len, &layout);
    PyBuffer_Release(&view);
    if (!usable)
        Py_RETURN_NONE;
    return Py_BuildValue("(IIIIIII)", layout.interval, layout.mcus_per_row, layout.mcu_rows,
                         layout.row_group, layout.col_mcus, layout.mcu_w, layout.mcu_h);
}

#define RESTART_METHODS                                                                            \
    {"add_restarts", restart_add, METH_VARARGS,                                                   \
     "add_restarts(data, rows=0, mcus=4, optimize=True) -> bytes or None: the JPEG with restart " \
     "intervals, losslessly (None: it cannot take them)"},                                         \
    {"restart_interval", restart_interval_of, METH_VARARGS,                                        \
     "restart_interval(width, components, max_h_samp, rows=0, mcus=4) -> int: the interval "      \
     "add_restarts gives such an image (0: none, -1: a row too long)"},                            \
    {"restart_layout", restart_layout_of, METH_VARARGS,                                            \
     "restart_layout(data) -> None or (interval, mcus_per_row, mcu_rows, row_group, col_mcus, "    \
     "mcu_width, mcu_height)"},

#endif /* RECPIPE_JPEG_RESTART_METHODS_H */
