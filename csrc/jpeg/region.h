/*
 * recpipe._batch's region decoder: region-of-interest and DCT-scaled JPEG decoding with
 * libjpeg(-turbo), included by batch/batch.c (one libjpeg extension) and listed in its method table
 * by JPEGROI_METHODS; jpegroi_add_constants adds the library's version numbers to the module.
 *
 * decode_region(data, scale_num, scale_den, x0, y0, x1, y1, channels, fast_dct, fast_upsample,
 *        strict, max_bytes[, check_rest, max_scans, restarts])
 *     -> (buffer, height, width, depth, x, y, full_height, full_width)
 *
 * ``data`` is any C-contiguous buffer (bytes, bytearray, memoryview slice): it is not copied.
 * The image is decoded at scale ``scale_num/scale_denom``; (x0, y0, x1, y1) is the wanted
 * rectangle in SCALED output coordinates (x1/y1 < 0: up to the edge; the rectangle is clipped to
 * the image). Only that part is decoded:
 *   - jpeg_crop_scanline() limits IDCT, upsampling and colour conversion to the iMCU columns
 *     covering [x0, x1) (the returned window may start left of x0 and end right of x1),
 *   - jpeg_skip_scanlines() skips the rows above y0 (entropy-decoded, no IDCT; cheap for
 *     progressive files whose coefficients are already buffered),
 *   - decoding stops after row y1 - 1: rows below are never entropy-decoded.
 * The result is a bytearray holding ``height x width x depth`` uint8 pixels (depth 3: RGB, 1: gray
 * luma, 4: Adobe CMYK, left to the caller to convert), starting at scaled (x, y) = (x, y0).
 *
 * Errors (libjpeg's error_exit, longjmp'd back here) raise ValueError with libjpeg's message; in
 * strict mode corrupt-data warnings (emit_message level -1) are errors too, and a stream that
 * stops before its EOI marker raises "Premature end of JPEG file" even when decoding stopped
 * above the missing part. ``check_rest`` (default False): a region decode that stops above the
 * last row entropy-decodes the rest of the scan to EOI (no IDCT), so that what a full decode
 * would warn about raises too (with ``strict``). ``max_scans`` (default 0: no limit): a stream
 * with more scans raises "JPEG has more than N scans" before decoding the next.
 * ``restarts`` (default True): a stream with restart intervals that start rows (jpeg/restart.h)
 * is decoded from the cut of intervals the rectangle touches: the rows above and the MCUs beside
 * it cost no Huffman decoding; same pixels (False: the whole stream, as without markers). The GIL is released while libjpeg runs; the output is allocated with
 * the GIL held between the two released phases. Everything is freed on every path.
 */
#ifndef RECPIPE_JPEGROI_METHODS_H
#define RECPIPE_JPEGROI_METHODS_H

#include <Python.h>

#include "jpeg/roi.h"

static PyObject *roi_decode(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int num, den;
    long x0, y0, x1, y1;
    int channels, fast_dct, fast_upsample, strict, check_rest = 0, restarts = 1;
    unsigned int max_scans = 0;
    unsigned long long max_bytes;
    roi_job *job;
    PyObject *out = NULL, *result = NULL;
    int status;
    (void)self;

    if (!PyArg_ParseTuple(args, "y*IIllllipppK|pIp:decode_region", &view, &num, &den, &x0, &y0,
                          &x1, &y1, &channels, &fast_dct, &fast_upsample, &strict, &max_bytes,
                          &check_rest, &max_scans, &restarts))
        return NULL;
    if (channels != 1 && channels != 3) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "channels must be 1 or 3");
        return NULL;
    }
    if (num == 0 || den == 0 || num > 16 || den > 16) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scale must be num/den with 1 <= num, den <= 16");
        return NULL;
    }
    job = (roi_job *)PyMem_RawCalloc(1, sizeof(roi_job));
    if (job == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    job->data = (const unsigned char *)view.buf;
    job->size = (size_t)view.len;
    job->scale_num = num;
    job->scale_den = den;
    job->x0 = x0;
    job->y0 = y0;
    job->x1 = x1;
    job->y1 = y1;
    job->channels = channels;
    job->fast_dct = fast_dct;
    job->fast_upsample = fast_upsample;
    job->strict = job->err.strict = strict;
    job->max_bytes = max_bytes;
    job->check_rest = check_rest;
    job->max_scans = max_scans;
    job->whole_stream = !restarts;
    roi_init_errors(job);

    if (job->size == 0) {
        snprintf(job->err.message, JMSG_LENGTH_MAX, "empty image data");
        status = -1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = roi_guarded(job, roi_start);
        Py_END_ALLOW_THREADS
    }
    if (status == 0) {
        size_t bytes = (size_t)job->out_w * job->out_h * (size_t)job->depth;
        out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes);
        job->rows = (JSAMPROW *)PyMem_RawMalloc(sizeof(JSAMPROW) * (job->out_h ? job->out_h : 1));
        if (out == NULL || job->rows == NULL) {
            roi_free(job);
            PyMem_RawFree(job);
            Py_XDECREF(out);
            PyBuffer_Release(&view);
            return PyErr_Occurred() ? NULL : PyErr_NoMemory();
        }
        job->pixels = (unsigned char *)PyByteArray_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        status = roi_guarded(job, roi_read);
        Py_END_ALLOW_THREADS
    }
    Py_BEGIN_ALLOW_THREADS
    roi_free(job);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status != 0) {
        PyErr_SetString(PyExc_ValueError, job->err.message);
        Py_XDECREF(out);
    } else {
        result = Py_BuildValue("(NIIiIIII)", out, (unsigned)job->out_h, (unsigned)job->out_w,
                               job->depth, (unsigned)job->out_x, (unsigned)job->out_y,
                               (unsigned)job->full_h, (unsigned)job->full_w);
    }
    PyMem_RawFree(job);
    return result;
}

#define JPEGROI_METHODS                                                                            \
    {"decode_region", roi_decode, METH_VARARGS,                                                    \
     "decode_region(data, scale_num, scale_den, x0, y0, x1, y1, channels, fast_dct, "              \
     "fast_upsample, strict, max_bytes, check_rest=False, max_scans=0, restarts=True) -> "         \
     "(bytearray, height, width, depth, x, y, full_height, full_width)"},

/* LIBJPEG_TURBO_VERSION (where the headers are libjpeg-turbo's) and JPEG_LIB_VERSION. */
static int jpegroi_add_constants(PyObject *module)
{
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
    if (PyModule_AddIntConstant(module, "LIBJPEG_TURBO_VERSION", LIBJPEG_TURBO_VERSION_NUMBER) < 0)
        return -1;
#endif
    return PyModule_AddIntConstant(module, "JPEG_LIB_VERSION", JPEG_LIB_VERSION);
}

#endif /* RECPIPE_JPEGROI_METHODS_H */
