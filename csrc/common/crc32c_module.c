/* recpipe._crc32c: CRC32C of a bytes-like object (see common/crc32c.h), without the GIL on big
 * ones. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/crc32c.h"

#define RELEASE_GIL_FROM 65536

static PyObject *crc32c_py(PyObject *self, PyObject *args)
{
    Py_buffer data = {0};
    unsigned long long value = 0;
    uint32_t crc;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*|K:crc32c", &data, &value))
        return NULL;
    if (value > 0xFFFFFFFFull) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "value must be a 32-bit CRC");
        return NULL;
    }
    if (data.len >= RELEASE_GIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c_extend((uint32_t)value, data.buf, (size_t)data.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = crc32c_extend((uint32_t)value, data.buf, (size_t)data.len);
    }
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *crc32c_software_py(PyObject *self, PyObject *args)
{
    Py_buffer data = {0};
    unsigned int value = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*|I:software", &data, &value))
        return NULL;
    uint32_t crc = ~crc32c_software(~(uint32_t)value, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *crc32c_hardware_py(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(crc32c_hardware);
}

static PyMethodDef crc32c_methods[] = {
    {"crc32c", crc32c_py, METH_VARARGS,
     "crc32c(data, value=0) -> int: the CRC32C of data, continuing value."},
    {"software", crc32c_software_py, METH_VARARGS,
     "software(data, value=0) -> int: crc32c by the table, whatever the CPU (for tests)."},
    {"hardware", crc32c_hardware_py, METH_NOARGS,
     "hardware() -> bool: True when the SSE4.2 CRC32 instruction is used."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef crc32c_module = {
    PyModuleDef_HEAD_INIT, "recpipe._crc32c", "CRC32C (Castagnoli), hardware-accelerated.", -1,
    crc32c_methods,
};

PyMODINIT_FUNC PyInit__crc32c(void)
{
    crc32c_init();
    return PyModule_Create(&crc32c_module);
}
