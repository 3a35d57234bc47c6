/* Argument helpers of recpipe's C extensions: checked sizes, a float array from a Python
 * sequence of numbers. */
#ifndef RECPIPE_COMMON_PYARGS_H
#define RECPIPE_COMMON_PYARGS_H

#include <Python.h>

/* ``*out = a * b * c`` for positive sizes; -1 with a ValueError naming ``name`` when the
 * product overflows (so that a later size comparison cannot wrap around and pass). */
static inline int checked_size(Py_ssize_t *out, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c,
                               const char *name)
{
    Py_ssize_t ab;
    if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow(a, b, &ab)
        || __builtin_mul_overflow(ab, c, out)) {
        PyErr_Format(PyExc_ValueError, "%s: size %zd x %zd x %zd is negative or overflows",
                     name, a, b, c);
        return -1;
    }
    return 0;
}

/* Fill ``out`` with the ``count`` numbers of ``seq``; -1 with an exception naming ``name``
 * when it is not a sequence of exactly ``count`` numbers. */
static inline int parse_floats(PyObject *seq, float *out, Py_ssize_t count, const char *name)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of numbers");
    if (fast == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != count) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "%s needs %zd values", name, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (float)v;
    }
    Py_DECREF(fast);
    return 0;
}

#endif
