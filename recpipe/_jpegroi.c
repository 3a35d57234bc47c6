/*
 * recpipe._jpegroi: region-of-interest and DCT-scaled JPEG decoding with libjpeg(-turbo).
 *
 * decode(data, scale_num, scale_den, x0, y0, x1, y1, channels, fast_dct, fast_upsample,
 *        strict, max_bytes) -> (buffer, height, width, depth, x, y, full_height, full_width)
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
 * above the missing part. The GIL is released while libjpeg runs; the output is allocated with
 * the GIL held between the two released phases. Everything is freed on every path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

/* jpeg_crop_scanline / jpeg_skip_scanlines are libjpeg-turbo (>= 1.5) extensions: against IJG
 * libjpeg the build fails to link and recpipe falls back to full decodes. */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int strict;
    int warnings;
    char message[JMSG_LENGTH_MAX];
} roi_error_mgr;

typedef struct {
    struct jpeg_decompress_struct cinfo;
    roi_error_mgr err;
    int created;
    /* request */
    const unsigned char *data;
    size_t size;
    unsigned int scale_num, scale_den;
    long x0, y0, x1, y1;
    int channels, fast_dct, fast_upsample, strict;
    unsigned long long max_bytes;
    /* result of phase 1 */
    int depth;
    JDIMENSION full_w, full_h, out_x, out_w, out_y, out_h;
    /* output */
    unsigned char *pixels;
    JSAMPROW *rows;
} roi_job;

static void roi_error_exit(j_common_ptr cinfo)
{
    roi_error_mgr *err = (roi_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void roi_emit_message(j_common_ptr cinfo, int level)
{
    roi_error_mgr *err = (roi_error_mgr *)cinfo->err;
    if (level >= 0)
        return; /* trace messages */
    err->warnings++;
    cinfo->err->num_warnings++;
    if (err->strict) {
        (*cinfo->err->format_message)(cinfo, err->message);
        longjmp(err->jump, 1);
    }
}

static void roi_output_message(j_common_ptr cinfo)
{
    (void)cinfo; /* never print to stderr */
}

/* True when an EOI marker (FF D9) follows the first scan header. FF D9 cannot occur inside
 * entropy-coded data (FF bytes are stuffed), so for a truncated stream this is false. */
static int has_eoi_after(const unsigned char *start, const unsigned char *end)
{
    const unsigned char *p = end;
    while (p - start >= 2) {
        p--;
        if (p[0] == 0xD9 && p[-1] == 0xFF)
            return 1;
    }
    return 0;
}

/* Where the entropy decoder stopped reading (a little before, to catch a marker it saw). */
static const unsigned char *resume_point(roi_job *job)
{
    const unsigned char *next = job->cinfo.src->next_input_byte;
    if (next == NULL || next < job->data + 2 || next > job->data + job->size)
        return job->data;
    return next - 2;
}

static JDIMENSION clip(long value, JDIMENSION limit)
{
    if (value < 0)
        return 0;
    if ((unsigned long)value > limit)
        return limit;
    return (JDIMENSION)value;
}

/* Phase 1 (no GIL): header, parameters, start, crop. Returns 0, or -1 with err.message set;
 * libjpeg errors longjmp to roi_guarded(). */
static int roi_start(roi_job *job)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    JDIMENSION x0, x1, y0, y1, width;
    unsigned long long bytes;

    jpeg_create_decompress(cinfo);
    job->created = 1;
    /* caps libjpeg's own buffers (e.g. a progressive file's coefficients): beyond it, libjpeg
     * fails with "Backing store not supported" instead of allocating what a header claims */
    if (job->max_bytes)
        cinfo->mem->max_memory_to_use =
            job->max_bytes > (unsigned long long)LONG_MAX ? LONG_MAX : (long)job->max_bytes;
    jpeg_mem_src(cinfo, (unsigned char *)job->data, (unsigned long)job->size);
    jpeg_read_header(cinfo, TRUE);

    switch (cinfo->jpeg_color_space) {
    case JCS_CMYK:
    case JCS_YCCK:
        cinfo->out_color_space = JCS_CMYK;
        job->depth = 4;
        break;
    default:
        if (job->channels == 1) {
            cinfo->out_color_space = JCS_GRAYSCALE;
            job->depth = 1;
        } else {
            cinfo->out_color_space = JCS_RGB;
            job->depth = 3;
        }
    }
    cinfo->scale_num = job->scale_num;
    cinfo->scale_denom = job->scale_den;
    cinfo->dct_method = job->fast_dct ? JDCT_IFAST : JDCT_ISLOW;
    cinfo->do_fancy_upsampling = job->fast_upsample ? FALSE : TRUE;
    jpeg_calc_output_dimensions(cinfo);
    job->full_w = cinfo->output_width;
    job->full_h = cinfo->output_height;

    x0 = clip(job->x0, job->full_w);
    y0 = clip(job->y0, job->full_h);
    x1 = job->x1 < 0 ? job->full_w : clip(job->x1, job->full_w);
    y1 = job->y1 < 0 ? job->full_h : clip(job->y1, job->full_h);
    if (x1 <= x0 || y1 <= y0) {
        snprintf(job->err.message, JMSG_LENGTH_MAX,
                 "empty region (%ld, %ld, %ld, %ld) for a %ux%u image", job->x0, job->y0,
                 job->x1, job->y1, (unsigned)job->full_w, (unsigned)job->full_h);
        return -1;
    }
    /* refuse before libjpeg allocates anything proportional to the image */
    bytes = (unsigned long long)(x1 - x0) * (y1 - y0) * (unsigned)job->depth;
    if (job->max_bytes && bytes > job->max_bytes) {
        snprintf(job->err.message, JMSG_LENGTH_MAX,
                 "region of %ux%u pixels exceeds the %llu-byte limit", (unsigned)(x1 - x0),
                 (unsigned)(y1 - y0), job->max_bytes);
        return -1;
    }

    jpeg_start_decompress(cinfo);
    job->out_x = 0;
    width = cinfo->output_width;
    /* libjpeg-turbo has had memory bugs when cropping with the merged upsampler (fast_upsample
     * on 4:2:x; upstream issue #574): crop columns only with fancy upsampling. */
    if ((x0 > 0 || x1 < job->full_w) && cinfo->do_fancy_upsampling) {
        /* Fancy upsampling replicates chroma at the window's edges, so its outermost columns
         * differ from a full decode: widen by 1 column left (libjpeg then aligns it down to an
         * iMCU boundary) and 2 right, and the pixels inside [x0, x1) match a full decode. */
        JDIMENSION left = x0 > 0 ? x0 - 1 : 0;
        JDIMENSION right = x1 + 2 < job->full_w ? x1 + 2 : job->full_w;
        JDIMENSION xoffset = left, cwidth = right - left;
        jpeg_crop_scanline(cinfo, &xoffset, &cwidth);
        job->out_x = xoffset;
        width = cwidth;
    }
    job->out_w = width;
    job->out_y = y0;
    job->out_h = y1 - y0;
    return 0;
}

/* Phase 2 (no GIL): skip, read the rows into job->pixels, stop. */
static int roi_read(roi_job *job)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    JDIMENSION done = 0, skipped = 0;
    size_t stride = (size_t)job->out_w * (size_t)job->depth;
    JDIMENSION i;

    for (i = 0; i < job->out_h; i++)
        job->rows[i] = job->pixels + stride * i;
    while (skipped < job->out_y) {
        JDIMENSION n = jpeg_skip_scanlines(cinfo, job->out_y - skipped);
        if (n == 0) {
            snprintf(job->err.message, JMSG_LENGTH_MAX, "jpeg_skip_scanlines made no progress");
            return -1;
        }
        skipped += n;
    }
    while (done < job->out_h) {
        JDIMENSION n = jpeg_read_scanlines(cinfo, job->rows + done, job->out_h - done);
        if (n == 0) {
            snprintf(job->err.message, JMSG_LENGTH_MAX, "jpeg_read_scanlines made no progress");
            return -1;
        }
        done += n;
    }
    if (cinfo->output_scanline >= cinfo->output_height && !jpeg_input_complete(cinfo)) {
        jpeg_finish_decompress(cinfo); /* reads the rest up to EOI (warns when truncated) */
    } else if (job->strict && !jpeg_input_complete(cinfo)
               && !has_eoi_after(resume_point(job), job->data + job->size)) {
        snprintf(job->err.message, JMSG_LENGTH_MAX,
                 "Premature end of JPEG file (no EOI marker after the image data)");
        return -1;
    }
    return 0;
}

/* Runs a phase with libjpeg's errors landing here (no local state survives the longjmp). */
static int roi_guarded(roi_job *job, int (*phase)(roi_job *))
{
    if (setjmp(job->err.jump))
        return -1;
    return phase(job);
}

static void roi_free(roi_job *job)
{
    if (job->created)
        jpeg_destroy_decompress(&job->cinfo);
    job->created = 0;
    PyMem_RawFree(job->rows);
    job->rows = NULL;
}

static PyObject *roi_decode(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int num, den;
    long x0, y0, x1, y1;
    int channels, fast_dct, fast_upsample, strict;
    unsigned long long max_bytes;
    roi_job *job;
    PyObject *out = NULL, *result = NULL;
    int status;
    (void)self;

    if (!PyArg_ParseTuple(args, "y*IIllllipppK:decode", &view, &num, &den, &x0, &y0, &x1, &y1,
                          &channels, &fast_dct, &fast_upsample, &strict, &max_bytes))
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
    job->cinfo.err = jpeg_std_error(&job->err.pub);
    job->err.pub.error_exit = roi_error_exit;
    job->err.pub.emit_message = roi_emit_message;
    job->err.pub.output_message = roi_output_message;

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

static PyMethodDef roi_methods[] = {
    {"decode", roi_decode, METH_VARARGS,
     "decode(data, scale_num, scale_den, x0, y0, x1, y1, channels, fast_dct, fast_upsample, "
     "strict, max_bytes) -> (bytearray, height, width, depth, x, y, full_height, full_width)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef roi_module = {
    PyModuleDef_HEAD_INIT, "recpipe._jpegroi",
    "Region-of-interest, DCT-scaled JPEG decoding through libjpeg-turbo's libjpeg API.", -1,
    roi_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__jpegroi(void)
{
    PyObject *module = PyModule_Create(&roi_module);
    if (module == NULL)
        return NULL;
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
    PyModule_AddIntConstant(module, "LIBJPEG_TURBO_VERSION", LIBJPEG_TURBO_VERSION_NUMBER);
#endif
    PyModule_AddIntConstant(module, "JPEG_LIB_VERSION", JPEG_LIB_VERSION);
    return module;
}
