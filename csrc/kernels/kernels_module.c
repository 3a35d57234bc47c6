/*
 * recpipe._kernels: recpipe's pixels, for the Python path. The same kernels recpipe._batch
 * renders with (kernels/render.h), without libjpeg:
 *
 * prepare(options) -> a prepared renderer: ``options`` is a recpipe.decode.native.RenderOptions
 *     (the planner's options, then kernels/render_fields.h's RENDER_FIELDS; OPTION_FIELDS
 *     names them in order), parsed and validated once.
 * render(prepared, plan, pixels, x, y, full_height, full_width, out) -> bool: one sample
 *     planned as ``plan`` (the C plan, recpipe._plan.plan's last field) rendered from
 *     ``pixels`` (uint8 (H, W) or (H, W, C), rows of any stride, C the renderer's channels),
 *     the window at (x, y) of a full_height x full_width decode (full_height < 0: the whole
 *     decode), into ``out`` (one C-contiguous slot of uint8, float16 or float32). False: a
 *     combination rendered elsewhere (a non-bilinear affine warp, an upscale past 16
 *     Mpixels); ValueError when the pixels do not cover what the plan needs. The GIL is
 *     released while it renders.
 *
 * finish(prepared, plan, region, out) -> None: the steps after the region (HLS shift, colour
 *     jitter, mirror, normalisation, layout) for an output-sized uint8 region made elsewhere.
 *
 * idx_lines(data) -> int and parse_idx(data, keys, offsets, first=0) -> int: the .idx parser's
 *     fast path (index/idx_parse.h) over a buffer of whole lines, without the GIL.
 *
 * decode_head, padded, image_header, label_rule, id_row: RecordIO's framing, image header
 *     and label rules (record/record.h, which recpipe._batch reads records with), for
 *     recpipe/io/format/framing.py, io/format/header.py and decode/labels.py; their constants
 *     (RECORD_MAGIC, RECORD_HEAD, MAX_RECORD_SIZE, IMAGE_HEADER) and statuses (HEADER_*,
 *     LABELS_*).
 *
 * and the probes the tests compare with OpenCV: colour_convert (HLS), warp_affine, interp.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/pyargs.h"
#include "index/idx_parse.h"
#include "kernels/render.h"
#include "kernels/render_fields.h"
#include "plan/plan.h"
#include "record/record.h"

typedef struct {
    plan_config plan;
    render_config render;
} prepared;

#define PREPARED "recpipe._kernels.prepared"

static void prepared_free(PyObject *capsule)
{
    prepared *p = PyCapsule_GetPointer(capsule, PREPARED);
    if (p == NULL)
        return;
    plan_release(&p->plan);
    PyMem_Free(p);
}

static PyObject *kernels_prepare(PyObject *self, PyObject *args)
{
    PyObject *options;
    (void)self;
    if (!PyArg_ParseTuple(args, "O:prepare", &options))
        return NULL;
    Py_ssize_t count = N_PLAN_FIELDS + N_RENDER_FIELDS;
    if (!PyTuple_Check(options) || PyTuple_GET_SIZE(options) != count) {
        PyErr_Format(PyExc_TypeError, "options must be a tuple of %zd values (OPTION_FIELDS)",
                     count);
        return NULL;
    }
    prepared *p = PyMem_Calloc(1, sizeof *p);
    if (p == NULL)
        return PyErr_NoMemory();
    if (plan_parse(options, 0, &p->plan)
        || render_parse(options, N_PLAN_FIELDS, &p->plan, &p->render)) {
        plan_release(&p->plan);
        PyMem_Free(p);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(p, PREPARED, prepared_free);
    if (capsule == NULL) {
        plan_release(&p->plan);
        PyMem_Free(p);
    }
    return capsule;
}

/* rendering's buffers, one set a thread, freed when the thread ends */
static pthread_key_t scratch_key;

static void scratch_free(void *p)
{
    if (p != NULL)
        render_scratch_free(p);
    free(p);
}

static render_scratch *thread_scratch(void)
{
    render_scratch *m = pthread_getspecific(scratch_key);
    if (m == NULL) {
        m = calloc(1, sizeof *m);
        if (m != NULL && pthread_setspecific(scratch_key, m) != 0) {
            free(m);
            m = NULL;
        }
    }
    return m;
}

/* ``pixels`` as a render_image of ``channels`` channels; -1 with a ValueError. */
static int image_of(const Py_buffer *view, long channels, render_image *im)
{
    long cn = view->ndim == 3 ? (long)view->shape[2] : 1;
    if (view->itemsize != 1 || (view->ndim != 2 && view->ndim != 3) || cn != channels
        || view->shape[0] < 1 || view->shape[1] < 1 || view->strides[0] < 1
        || view->strides[1] != cn || (view->ndim == 3 && view->strides[2] != 1)
        || view->strides[0] < view->shape[1] * cn) {
        PyErr_Format(PyExc_ValueError, "pixels must be uint8 (H, W, %ld) with packed pixels",
                     channels);
        return -1;
    }
    im->pixels = view->buf;
    im->stride = (size_t)view->strides[0];
    im->h = (long)view->shape[0];
    im->w = (long)view->shape[1];
    return 0;
}

static PyObject *kernels_render(PyObject *self, PyObject *args)
{
    PyObject *capsule, *pixels_obj, *result = NULL;
    Py_buffer plan = {0}, pixels = {0}, out = {0};
    long x, y, full_h, full_w;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy*Ollllw*:render", &capsule, &plan, &pixels_obj, &x, &y,
                          &full_h, &full_w, &out))
        return NULL;
    prepared *p = PyCapsule_GetPointer(capsule, PREPARED);
    render_image im;
    if (p == NULL || PyObject_GetBuffer(pixels_obj, &pixels, PyBUF_STRIDES) < 0)
        goto done;
    const render_config *rc = &p->render;
    if (plan.len != (Py_ssize_t)sizeof(full_plan)) {
        PyErr_SetString(PyExc_ValueError, "plan must be a C plan (recpipe._plan.plan's last "
                                          "field)");
        goto done;
    }
    if (image_of(&pixels, rc->channels, &im))
        goto done;
    im.win.whole = full_h < 0;
    im.win.x = im.win.whole ? 0 : x;
    im.win.y = im.win.whole ? 0 : y;
    im.win.full_h = im.win.whole ? im.h : full_h;
    im.win.full_w = im.win.whole ? im.w : full_w;
    if (!PyBuffer_IsContiguous(&out, 'C')
        || (out.itemsize != 1 && out.itemsize != 2 && out.itemsize != 4)
        || out.len != rc->out_h * rc->out_w * rc->channels * out.itemsize) {
        PyErr_Format(PyExc_ValueError, "out must be one C-contiguous slot of %ld x %ld x %ld "
                     "uint8, float16 or float32 values", rc->out_h, rc->out_w, rc->channels);
        goto done;
    }
    full_plan fp;
    memcpy(&fp, plan.buf, sizeof fp);
    render_config config = *rc;
    config.itemsize = (int)out.itemsize;
    render_scratch *m = thread_scratch();
    if (m == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = render_sample(&config, &fp, &im, m, out.buf);
    render_scratch_trim(m, 4u << 20);
    Py_END_ALLOW_THREADS
    if (status == RENDER_NO_MEMORY)
        PyErr_NoMemory();
    else if (status == RENDER_BAD_WINDOW)
        PyErr_Format(PyExc_ValueError, "the pixels (%ld x %ld at %ld, %ld of %ld x %ld) do not "
                     "cover what the plan needs", im.h, im.w, im.win.x, im.win.y,
                     im.win.full_h, im.win.full_w);
    else
        result = PyBool_FromLong(status == RENDER_DONE);
done:
    PyBuffer_Release(&plan);
    if (pixels.obj != NULL)
        PyBuffer_Release(&pixels);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *kernels_colour_convert(PyObject *self, PyObject *args)
{
    int code;
    Py_buffer pixels = {0};
    Py_ssize_t width;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*n:colour_convert", &code, &pixels, &width))
        return NULL;
    PyObject *result = NULL;
    if ((code != 0 && code != 1) || width < 1 || width > PY_SSIZE_T_MAX / 3
        || pixels.len % (3 * width) != 0) {
        PyErr_SetString(PyExc_ValueError, "code must be 0 or 1, pixels whole rows of width");
    } else if ((result = PyBytes_FromStringAndSize(NULL, pixels.len)) != NULL) {
        const uint8_t *src = pixels.buf;
        uint8_t *dst = (uint8_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t at = 0; at < pixels.len; at += 3 * width)
            convert_row(code, src + at, dst + at, (long)width);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&pixels);
    return result;
}

/* warp_affine(src, forward, out_h, out_w, fill, lanes) -> bytes: cv2.warpAffine of a
 * C-contiguous uint8 (H, W, channels) image (channels 1 or 3) by the forward 2x3 matrix (six
 * floats, float32 values) with INTER_LINEAR and BORDER_CONSTANT fill, as recpipe computes
 * it (out_h x out_w x channels bytes); for tests and the gate's check of ``lanes``. */
static PyObject *kernels_warp_affine(PyObject *self, PyObject *args)
{
    Py_buffer src = {0};
    long height, width, channels, out_h, out_w;
    int fill, lanes;
    double forward[6];
    (void)self;
    if (!PyArg_ParseTuple(args, "y*lll(dddddd)llii:warp_affine", &src, &height, &width,
                          &channels, &forward[0], &forward[1], &forward[2], &forward[3],
                          &forward[4], &forward[5], &out_h, &out_w, &fill, &lanes))
        return NULL;
    PyObject *result = NULL;
    if ((channels != 1 && channels != 3) || height < 1 || width < 1 || out_h < 1 || out_w < 1
        || out_h > 65535 || out_w > 65535 || height > 65535 || width > 65535
        || src.len != height * width * channels || fill < 0 || fill > 255
        || (lanes != 8 && lanes != 16 && lanes != 32)) {
        PyErr_SetString(PyExc_ValueError, "warp_affine: bad sizes, fill or lanes");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(out_h * out_w * channels));
    if (result == NULL)
        goto done;
    warp_job j = {src.buf, height, width, (size_t)(width * channels), (int)channels, out_w,
                  0, 0, out_w, out_h, (uint8_t *)PyBytes_AS_STRING(result),
                  (size_t)(out_w * channels), {0}, (uint8_t)fill, lanes};
    warp_invert(forward, j.inverse);
    Py_BEGIN_ALLOW_THREADS
    warp_affine_linear(&j);
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&src);
    return result;
}

/* interp(src, dst, inv_x, inv_y, method, simd=True): csrc/kernels/interp.h's resize of a
 * C-contiguous uint8 (H, W, C) ``src`` into ``dst`` (H', W', C) as cv::hal::resize with those
 * inverse scales (for the tests that compare it with cv2.resize; simd False: scalar loops). */
static PyObject *kernels_interp(PyObject *self, PyObject *args)
{
    Py_buffer src = {0}, dst = {0};
    long sh, sw, dh, dw, cn;
    double inv_x, inv_y;
    int method, simd = 1, status = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "(lll)y*(ll)w*ddi|p:interp", &sh, &sw, &cn, &src, &dh, &dw, &dst,
                          &inv_x, &inv_y, &method, &simd))
        return NULL;
    if (sh < 1 || sw < 1 || cn < 1 || cn > 4 || dh < 1 || dw < 1 || sh > 65535 || sw > 65535
        || dh > 65535 || dw > 65535 || src.len != sh * sw * cn || dst.len != dh * dw * cn) {
        PyErr_SetString(PyExc_ValueError, "interp: sizes do not match the buffers");
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = interp_resize_simd(src.buf, (size_t)(sw * cn), (int)sw, (int)sh, (int)cn,
                                    dst.buf, (size_t)(dw * cn), (int)dw, (int)dh, inv_x, inv_y,
                                    method, simd);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(status == 0);
}

static PyObject *kernels_finish(PyObject *self, PyObject *args)
{
    PyObject *capsule, *result = NULL;
    Py_buffer plan = {0}, region = {0}, out = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy*y*w*:finish", &capsule, &plan, &region, &out))
        return NULL;
    prepared *p = PyCapsule_GetPointer(capsule, PREPARED);
    if (p == NULL)
        goto done;
    const render_config *rc = &p->render;
    if (plan.len != (Py_ssize_t)sizeof(full_plan)
        || region.len != rc->out_h * rc->out_w * rc->channels || !PyBuffer_IsContiguous(&out, 'C')
        || (out.itemsize != 1 && out.itemsize != 2 && out.itemsize != 4)
        || out.len != rc->out_h * rc->out_w * rc->channels * out.itemsize) {
        PyErr_SetString(PyExc_ValueError, "finish: a C plan, an output-sized uint8 region and "
                                          "one slot");
        goto done;
    }
    full_plan fp;
    memcpy(&fp, plan.buf, sizeof fp);
    render_config config = *rc;
    config.itemsize = (int)out.itemsize;
    render_scratch *m = thread_scratch();
    if (m == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = render_region(&config, &fp, region.buf, m, out.buf);
    Py_END_ALLOW_THREADS
    if (status == RENDER_NO_MEMORY)
        PyErr_NoMemory();
    else if (status != RENDER_DONE)
        PyErr_SetString(PyExc_ValueError, "finish: this region cannot be rendered");
    else
        result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&plan);
    PyBuffer_Release(&region);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *kernels_idx_lines(PyObject *self, PyObject *args)
{
    Py_buffer data = {0};
    int64_t lines;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*:idx_lines", &data))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    lines = idx_count_lines(data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromLongLong(lines);
}

static PyObject *kernels_parse_idx(PyObject *self, PyObject *args)
{
    Py_buffer data = {0}, keys = {0}, offsets = {0};
    PyObject *result = NULL;
    long long first = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*w*|L:parse_idx", &data, &keys, &offsets, &first))
        return NULL;
    int64_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    count = idx_count_lines(data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    if (keys.len != offsets.len || keys.len != count * (Py_ssize_t)sizeof(int64_t)
        || ((uintptr_t)keys.buf | (uintptr_t)offsets.buf) % sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "keys and offsets must be aligned int64 buffers of the "
                     "%lld lines (idx_lines)", (long long)count);
        goto done;
    }
    int outcome;
    Py_BEGIN_ALLOW_THREADS
    outcome = idx_parse(data.buf, (size_t)data.len, keys.buf, offsets.buf, count, first);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(outcome);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&offsets);
    return result;
}


/* --- records: framing, the image header, labels (record/record.h) -------------------------- */

static PyObject *struct_error; /* struct.error: what struct.unpack_from raised for a short head */

/* decode_head(data, pos) -> (magic, cflag, length) of the part head at data[pos:pos + 8] */
static PyObject *kernels_decode_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "decode_head() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t pos = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t at = pos < 0 ? pos + data.len : pos;
    if (at < 0 || data.len - at < RECORD_HEAD) {
        PyErr_Format(struct_error, "a part head needs %d bytes at offset %zd of a buffer of "
                     "%zd bytes", RECORD_HEAD, pos, data.len);
        PyBuffer_Release(&data);
        return NULL;
    }
    record_head h = record_head_at((const unsigned char *)data.buf + at);
    PyBuffer_Release(&data);
    return Py_BuildValue("(kkk)", (unsigned long)h.magic, (unsigned long)h.cflag,
                         (unsigned long)h.length);
}

/* padded(length) -> length rounded up to a multiple of 4 */
static PyObject *kernels_padded(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "padded() takes exactly 1 argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *length = args[0];
    long long value = PyLong_AsLongLong(length);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong(record_padded(value));
}

/* image_header(payload) -> (flag, label, id, id2, labels_end); labels_end HEADER_SHORT (the
 * other fields zero) or HEADER_LABELS_PAST_END when the payload cannot hold the header */
static PyObject *kernels_image_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "image_header() takes exactly 1 argument (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *payload = args[0];
    Py_buffer data;
    if (PyObject_GetBuffer(payload, &data, PyBUF_SIMPLE) < 0)
        return NULL;
    image_header h = {0, 0.0f, 0, 0, 0};
    int status = image_header_of(data.buf, (size_t)data.len, &h);
    PyBuffer_Release(&data);
    long long end = status == HEADER_OK ? (long long)h.labels_end : (long long)status;
    return Py_BuildValue("(kdKKL)", (unsigned long)h.flag, (double)h.label,
                         (unsigned long long)h.id, (unsigned long long)h.id2, end);
}

/* label_rule(flag, label_width) -> LABELS_SCALAR, LABELS_PACKED or an error status */
static PyObject *kernels_label_rule(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "label_rule() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    long long flag = PyLong_AsLongLong(args[0]);
    if (flag == -1 && PyErr_Occurred())
        return NULL;
    long long width = PyLong_AsLongLong(args[1]);
    if (width == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(label_rule(flag, width));
}

/* id_row(ids, id) -> the row of ``id`` in ``ids`` (ascending uint64), or -1 (also for an id
 * that is no uint64: it matches no header) */
static PyObject *kernels_id_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "id_row() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *index = PyNumber_Index(args[1]);
    unsigned long long id = 0;
    int listed = index != NULL;
    if (listed) {
        id = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
        listed = !(id == (unsigned long long)-1 && PyErr_Occurred());
    }
    if (!listed) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    Py_buffer ids;
    if (PyObject_GetBuffer(args[0], &ids, PyBUF_SIMPLE) < 0)
        return NULL;
    if (ids.len % (Py_ssize_t)sizeof(uint64_t) || (uintptr_t)ids.buf % sizeof(uint64_t)) {
        PyBuffer_Release(&ids);
        PyErr_SetString(PyExc_ValueError, "ids must be an aligned buffer of uint64");
        return NULL;
    }
    ptrdiff_t row = id_row(ids.buf, ids.len / (Py_ssize_t)sizeof(uint64_t), (uint64_t)id);
    PyBuffer_Release(&ids);
    return PyLong_FromSsize_t(row);
}

static int add_record_contract(PyObject *module)
{
    PyObject *structs = PyImport_ImportModule("struct");
    if (structs == NULL)
        return -1;
    struct_error = PyObject_GetAttrString(structs, "error");
    Py_DECREF(structs);
    if (struct_error == NULL)
        return -1;
    static const struct {
        const char *name;
        long long value;
    } constants[] = {
        {"RECORD_MAGIC", RECORD_MAGIC}, {"RECORD_HEAD", RECORD_HEAD},
        {"MAX_RECORD_SIZE", RECORD_MAX_LENGTH}, {"IMAGE_HEADER", IMAGE_HEADER},
        {"HEADER_SHORT", HEADER_SHORT}, {"HEADER_LABELS_PAST_END", HEADER_LABELS_PAST_END},
        {"LABELS_SCALAR", LABELS_SCALAR}, {"LABELS_PACKED", LABELS_PACKED},
        {"LABELS_NOT_SCALAR", LABELS_NOT_SCALAR}, {"LABELS_TOO_FEW", LABELS_TOO_FEW},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        PyObject *value = PyLong_FromLongLong(constants[i].value);
        if (value == NULL || PyModule_AddObject(module, constants[i].name, value) < 0) {
            Py_XDECREF(value);
            return -1;
        }
    }
    return 0;
}

static PyMethodDef kernels_methods[] = {
    {"decode_head", (PyCFunction)(void (*)(void))kernels_decode_head, METH_FASTCALL,
     "decode_head(data, pos) -> (magic, cflag, length) of the RecordIO part head at "
     "data[pos:pos + 8] (struct.error when the buffer ends first)."},
    {"padded", (PyCFunction)(void (*)(void))kernels_padded, METH_FASTCALL,
     "padded(length) -> length rounded up to a multiple of 4 (a part's bytes after its head)."},
    {"image_header", (PyCFunction)(void (*)(void))kernels_image_header, METH_FASTCALL,
     "image_header(payload) -> (flag, label, id, id2, labels_end): the IRHeader at the start "
     "of a record payload; labels_end is HEADER_SHORT or HEADER_LABELS_PAST_END when the "
     "payload cannot hold it."},
    {"label_rule", (PyCFunction)(void (*)(void))kernels_label_rule, METH_FASTCALL,
     "label_rule(flag, label_width) -> LABELS_SCALAR (the header's label), LABELS_PACKED (the "
     "first label_width packed labels), or LABELS_NOT_SCALAR / LABELS_TOO_FEW (the setting does "
     "not fit the record): ImageRecordIter's rule."},
    {"id_row", (PyCFunction)(void (*)(void))kernels_id_row, METH_FASTCALL,
     "id_row(ids, id) -> the row of image id ``id`` in ``ids`` (an ascending uint64 buffer), or "
     "-1 when it is not there."},
    {"finish", kernels_finish, METH_VARARGS,
     "finish(prepared, plan, region, out) -> None: the steps after the region (HLS shift, "
     "colour jitter, mirror, normalisation, layout) for a region made elsewhere (an "
     "output-sized uint8 region, rows packed), without the GIL."},
    {"prepare", kernels_prepare, METH_VARARGS,
     "prepare(options) -> a prepared renderer: options (a recpipe.decode.native.RenderOptions) "
     "parsed and validated once."},
    {"render", kernels_render, METH_VARARGS,
     "render(prepared, plan, pixels, x, y, full_height, full_width, out) -> bool: one sample "
     "rendered into its batch slot without the GIL (False: rendered elsewhere)."},
    {"idx_lines", kernels_idx_lines, METH_VARARGS,
     "idx_lines(data) -> int: the lines of .idx bytes (its newlines, plus a last line without "
     "one), the length of the arrays parse_idx fills."},
    {"parse_idx", kernels_parse_idx, METH_VARARGS,
     "parse_idx(data, keys, offsets, first=0) -> int: plain key<TAB>offset lines of .idx bytes "
     "(lines first.. of the file) into the int64 buffers keys and offsets (idx_lines items "
     "each), without the GIL: 1 when every key is its line's number, 0 when not, -1 when the "
     "bytes are not exactly such lines (the text parse then names the bad line)."},
    {"colour_convert", kernels_colour_convert, METH_VARARGS,
     "colour_convert(code, pixels, width) -> bytes: rows of ``width`` uint8 pixels converted as "
     "cv2.cvtColor does (code 0: RGB2HLS, 1: HLS2RGB; for tests)."},
    {"warp_affine", kernels_warp_affine, METH_VARARGS,
     "warp_affine(src, height, width, channels, forward, out_h, out_w, fill, lanes) -> bytes: "
     "cv2.warpAffine (INTER_LINEAR, BORDER_CONSTANT) as recpipe computes it (for tests)."},
    {"interp", kernels_interp, METH_VARARGS,
     "interp(src_shape, src, dst_shape, dst, inv_x, inv_y, method, simd=True) -> True when "
     "resized (src_shape: (h, w, c), dst_shape: (h2, w2); for tests: csrc/kernels/interp.h "
     "against cv2.resize; simd False: its scalar loops only)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "recpipe._kernels",
    "recpipe's pixels: one decoded image and its plan rendered into a batch slot.", -1,
    kernels_methods,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    static int key_made = 0;
    if (!key_made) {
        if (pthread_key_create(&scratch_key, scratch_free) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "recpipe._kernels: no thread-specific key");
            return NULL;
        }
        key_made = 1;
    }
    PyObject *module = PyModule_Create(&kernels_module);
    const field *more[1] = {RENDER_FIELDS};
    Py_ssize_t counts[1] = {N_RENDER_FIELDS};
    if (module != NULL
        && (plan_add_contract(module, more, counts, 1) < 0 || add_record_contract(module) < 0))
        Py_CLEAR(module);
    return module;
}
