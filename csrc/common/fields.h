/*
 * The one field-table parser of recpipe's option tuples: a table lists each field's name, kind
 * and place in a C struct (FIELD(type, member, kind)), in tuple order; fields_parse fills the
 * struct from a tuple, naming the field in its errors, and fields_names exports the names (the
 * extensions' OPTION_FIELDS). The planner's options (plan/plan.h, PLAN_FIELDS) and the run's
 * (batch/options.h, RUN_FIELDS) are both parsed here.
 */
#ifndef RECPIPE_COMMON_FIELDS_H
#define RECPIPE_COMMON_FIELDS_H

#include <Python.h>

#include <limits.h>
#include <stddef.h>

#include "common/pyargs.h"

typedef enum {
    FIELD_LONG,   /* long */
    FIELD_INT,    /* int (OverflowError outside int's range) */
    FIELD_BOOL,   /* int, 0 or 1 (any object's truth) */
    FIELD_ULL,    /* unsigned long long */
    FIELD_DOUBLE, /* double */
    FIELD_FLOAT3, /* float[3], from a sequence of three numbers */
    FIELD_LONGS   /* field_longs, from a tuple of ints within +-10^9 (PyMem; fields_release) */
} field_kind;

/* FIELD_LONGS' destination: a tuple of ints copied into PyMem. */
typedef struct {
    long *values;
    long count;
} field_longs;

#define FIELD_LONGS_LIMIT 1000000000L

typedef struct {
    const char *name;
    field_kind kind;
    size_t offset; /* of the member in the struct the table describes */
} field;

/* A table row: the member ``member`` of ``type``, named as the member is. */
#define FIELD(type, member, kind) {#member, kind, offsetof(type, member)}
/* A table row whose tuple name differs from the member (e.g. an array element). */
#define FIELD_AS(type, name, member, kind) {name, kind, offsetof(type, member)}
#define FIELD_COUNT(table) ((Py_ssize_t)(sizeof(table) / sizeof((table)[0])))

static inline int field_longs_parse(PyObject *item, field_longs *out, const char *name)
{
    if (!PyTuple_Check(item)) {
        PyErr_Format(PyExc_TypeError, "options.%s must be a tuple of ints", name);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(item);
    out->count = 0;
    out->values = n > 0 ? PyMem_New(long, (size_t)n) : NULL;
    if (n > 0 && out->values == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long value = PyLong_AsLong(PyTuple_GET_ITEM(item, i));
        if (value == -1 && PyErr_Occurred())
            return -1;
        if (value < -FIELD_LONGS_LIMIT || value > FIELD_LONGS_LIMIT) {
            PyErr_Format(PyExc_ValueError, "options.%s: a value is out of range", name);
            return -1;
        }
        out->values[out->count++] = value;
    }
    return 0;
}

/* ``item`` into the field's member of ``base``; -1 with an exception. */
static inline int field_parse(PyObject *item, const field *f, void *base)
{
    char *dst = (char *)base + f->offset;
    long value;
    int truth;
    switch (f->kind) {
    case FIELD_LONG:
    case FIELD_INT:
        value = PyLong_AsLong(item);
        if (value == -1 && PyErr_Occurred())
            return -1;
        if (f->kind == FIELD_LONG) {
            *(long *)dst = value;
        } else if (value < INT_MIN || value > INT_MAX) {
            PyErr_Format(PyExc_OverflowError, "options.%s is out of range", f->name);
            return -1;
        } else {
            *(int *)dst = (int)value;
        }
        return 0;
    case FIELD_BOOL:
        truth = PyObject_IsTrue(item);
        if (truth < 0)
            return -1;
        *(int *)dst = truth;
        return 0;
    case FIELD_ULL:
        *(unsigned long long *)dst = PyLong_AsUnsignedLongLong(item);
        return PyErr_Occurred() ? -1 : 0;
    case FIELD_DOUBLE:
        *(double *)dst = PyFloat_AsDouble(item);
        return PyErr_Occurred() ? -1 : 0;
    case FIELD_FLOAT3:
        return parse_floats(item, (float *)dst, 3, f->name);
    case FIELD_LONGS:
        return field_longs_parse(item, (field_longs *)dst, f->name);
    }
    return -1;
}

/* ``tuple[first:first + n]`` into ``base`` by ``table``; -1 with an exception naming the field
 * (a TypeError says which field has the wrong type). fields_release afterwards, always. */
static inline int fields_parse(PyObject *tuple, Py_ssize_t first, const field *table,
                               Py_ssize_t n, void *base)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (field_parse(PyTuple_GET_ITEM(tuple, first + i), &table[i], base)) {
            if (PyErr_ExceptionMatches(PyExc_TypeError))
                PyErr_Format(PyExc_TypeError, "options.%s has the wrong type", table[i].name);
            return -1;
        }
    }
    return 0;
}

/* Frees what fields_parse allocated (FIELD_LONGS); safe on a zeroed or half-parsed struct. */
static inline void fields_release(const field *table, Py_ssize_t n, void *base)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (table[i].kind != FIELD_LONGS)
            continue;
        field_longs *list = (field_longs *)((char *)base + table[i].offset);
        PyMem_Free(list->values);
        list->values = NULL;
        list->count = 0;
    }
}

/* The names of ``n_tables`` tables, in order, as one tuple (an extension's OPTION_FIELDS). */
static inline PyObject *fields_names(const field *const *tables, const Py_ssize_t *counts,
                                     int n_tables)
{
    Py_ssize_t total = 0, at = 0;
    for (int t = 0; t < n_tables; t++)
        total += counts[t];
    PyObject *names = PyTuple_New(total);
    for (int t = 0; names != NULL && t < n_tables; t++)
        for (Py_ssize_t i = 0; i < counts[t]; i++) {
            PyObject *name = PyUnicode_FromString(tables[t][i].name);
            if (name == NULL) {
                Py_CLEAR(names);
                break;
            }
            PyTuple_SET_ITEM(names, at++, name);
        }
    return names;
}

#endif
