/*
 * Region-of-interest, DCT-scaled JPEG decoding with libjpeg(-turbo), shared by recpipe._batch's
 * decode_region (one image per call) and fill (a run of records per call). See
 * jpeg/region.h for the
 * behaviour; every function here runs without the GIL.
 *
 * A roi_job is filled with the request (data, size, scale, region, channels, options), then:
 * roi_guarded(job, roi_header) -> the declared size is in job->cinfo.image_width/height;
 * roi_guarded(job, roi_begin) -> job->out_* say which window will be decoded; the caller
 * points job->pixels at out_h x out_w x depth bytes and job->rows at out_h row pointers;
 * roi_guarded(job, roi_read); roi_free(job) on every path.
 *
 * Integrity: with ``strict`` libjpeg's corrupt-data warnings are errors in whatever is decoded;
 * with ``check_rest`` too, a region decode that stops above the last row entropy-decodes the
 * rest of the scan (jpeg_skip_scanlines: Huffman decoding without IDCT) and reads to EOI, so a
 * warning a full decode would give is an error here too. ``max_scans`` (0: none) stops a
 * stream after that many scans (a progressive "scan bomb" costs a full pass per scan).
 */
#ifndef RECPIPE_ROI_CORE_H
#define RECPIPE_ROI_CORE_H

#include <Python.h> /* PyMem_Raw* */

#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

#include "jpeg/restart.h"

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
    int channels, fast_dct, fast_upsample, strict, check_rest;
    unsigned int max_scans;
    unsigned long long max_bytes;
    struct jpeg_progress_mgr progress; /* counts scans when max_scans > 0 */
    /* result of phase 1 */
    int depth;
    JDIMENSION full_w, full_h, out_x, out_w, out_y, out_h;
    /* output */
    unsigned char *pixels;
    JSAMPROW *rows;
    int borrowed_rows; /* rows belong to the caller: roi_free leaves them */
    unsigned char *spare_row; /* check_rest's last row (PyMem_RawMalloc'd, freed by roi_free) */
    /* restart intervals (jpeg/restart.h): the cut of the stream a region is decoded from */
    int whole_stream; /* request: decode the whole stream even when a cut would do */
    rst_view cut;     /* cut.active: libjpeg reads cut.buffer, whose output starts at cut.x/y */
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

/* libjpeg calls this before each iMCU row it reads (and between scans): a stream past its
 * max_scans-th scan stops here, before that scan costs anything. ``cinfo`` is the job's first
 * member. */
static void roi_progress(j_common_ptr cinfo)
{
    roi_job *job = (roi_job *)cinfo;
    int scans = job->cinfo.input_scan_number;
    if (job->max_scans && scans > 0 && (unsigned int)scans > job->max_scans) {
        snprintf(job->err.message, JMSG_LENGTH_MAX,
                 "JPEG has more than %u scans (a progressive scan bomb?); raise max_scans to "
                 "decode it", job->max_scans);
        longjmp(job->err.jump, 1);
    }
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

static JDIMENSION clip_dimension(long value, JDIMENSION limit)
{
    if (value < 0)
        return 0;
    if ((unsigned long)value > limit)
        return limit;
    return (JDIMENSION)value;
}

/* The scans of the stream, counting up to ``stop`` + 1: 1 (the scan whose header was just read)
 * plus the SOS segments after ``from`` (its entropy-coded data), found without decoding by
 * walking the markers (FF bytes inside entropy-coded data are stuffed; segments are skipped by
 * their lengths, so table bytes are never taken for markers). */
static unsigned long count_scans(const unsigned char *data, size_t size, size_t from,
                                 unsigned long stop)
{
    unsigned long scans = 1;
    size_t pos = from;
    while (pos + 1 < size && scans <= stop) {
        const unsigned char *ff = memchr(data + pos, 0xFF, size - pos);
        if (ff == NULL)
            break;
        pos = (size_t)(ff - data);
        if (pos + 1 >= size)
            break;
        unsigned char marker = data[pos + 1];
        if (marker == 0xFF) { /* fill byte */
            pos += 1;
            continue;
        }
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {
            pos += 2; /* stuffing, restarts, standalone markers */
            continue;
        }
        if (marker == 0xD9 || pos + 4 > size)
            break;
        if (marker == 0xDA)
            scans++;
        pos += 2 + ((size_t)data[pos + 2] << 8 | data[pos + 3]);
    }
    return scans;
}

/* Phase 1a (no GIL): read the header (cinfo.image_width/height then hold the declared size)
 * and choose the output colour space. Returns 0, or -1 with err.message set (too many scans);
 * libjpeg errors longjmp to roi_guarded(). */
static int roi_header(roi_job *job)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;

    jpeg_create_decompress(cinfo);
    job->created = 1;
    /* caps libjpeg's own buffers (e.g. a progressive file's coefficients): beyond it, libjpeg
     * fails with "Backing store not supported" instead of allocating what a header claims */
    if (job->max_bytes)
        cinfo->mem->max_memory_to_use =
            job->max_bytes > (unsigned long long)LONG_MAX ? LONG_MAX : (long)job->max_bytes;
    if (job->max_scans) {
        job->progress.progress_monitor = roi_progress;
        cinfo->progress = &job->progress;
    }
    jpeg_mem_src(cinfo, (unsigned char *)job->data, (unsigned long)job->size);
    jpeg_read_header(cinfo, TRUE);
    /* a multi-scan stream's scans are counted before any is decoded (a bomb is refused in
     * microseconds, not after max_scans passes); the progress monitor stays the backstop */
    if (job->max_scans && jpeg_has_multiple_scans(cinfo)
        && cinfo->src->next_input_byte >= job->data
        && count_scans(job->data, job->size, (size_t)(cinfo->src->next_input_byte - job->data),
                       job->max_scans) > job->max_scans) {
        snprintf(job->err.message, JMSG_LENGTH_MAX,
                 "JPEG has more than %u scans (a progressive scan bomb?); raise max_scans to "
                 "decode it", job->max_scans);
        return -1;
    }

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
    return 0;
}

/* Phase 1b (no GIL, after roi_header): scale, region and start. Returns 0, or -1 with
 * err.message set; libjpeg errors longjmp to roi_guarded(). */
static int roi_begin(roi_job *job)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    JDIMENSION x0, x1, y0, y1, width;
    unsigned long long bytes;

    cinfo->scale_num = job->scale_num;
    cinfo->scale_denom = job->scale_den;
    cinfo->dct_method = job->fast_dct ? JDCT_IFAST : JDCT_ISLOW;
    cinfo->do_fancy_upsampling = job->fast_upsample ? FALSE : TRUE;
    jpeg_calc_output_dimensions(cinfo);
    job->full_w = cinfo->output_width;
    job->full_h = cinfo->output_height;

    x0 = clip_dimension(job->x0, job->full_w);
    y0 = clip_dimension(job->y0, job->full_h);
    x1 = job->x1 < 0 ? job->full_w : clip_dimension(job->x1, job->full_w);
    y1 = job->y1 < 0 ? job->full_h : clip_dimension(job->y1, job->full_h);
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

    /* --- restart intervals: decode only the cut of the stream the region needs (from here
     * on x0..y1 are in the cut's output pixels; check_rest reads the whole stream) --- */
    if (!job->whole_stream && !job->check_rest) {
        int cut = rst_view_region(cinfo, job->data, job->size, x0, y0, x1, y1, &job->cut,
                                  job->err.message, JMSG_LENGTH_MAX);
        if (cut < 0)
            return -1;
        x0 -= job->cut.x;
        x1 -= job->cut.x;
        y0 -= job->cut.y;
        y1 -= job->cut.y;
    }

    jpeg_start_decompress(cinfo);
    job->out_x = 0;
    width = cinfo->output_width;
    /* libjpeg-turbo has had memory bugs when cropping with the merged upsampler (fast_upsample
     * on 4:2:x; upstream issue #574): crop columns only with fancy upsampling. */
    if ((x0 > 0 || x1 < cinfo->output_width) && cinfo->do_fancy_upsampling) {
        /* Fancy upsampling replicates chroma at the window's edges, so its outermost columns
         * differ from a full decode: widen by 1 column left (libjpeg then aligns it down to an
         * iMCU boundary) and 2 right, and the pixels inside [x0, x1) match a full decode. */
        JDIMENSION left = x0 > 0 ? x0 - 1 : 0;
        JDIMENSION right = x1 + 2 < cinfo->output_width ? x1 + 2 : cinfo->output_width;
        JDIMENSION xoffset = left, cwidth = right - left;
        jpeg_crop_scanline(cinfo, &xoffset, &cwidth);
        job->out_x = xoffset;
        width = cwidth;
    }
    job->out_x += job->cut.x;
    job->out_w = width;
    job->out_y = y0 + job->cut.y;
    job->out_h = y1 - y0;
    return 0;
}

/* Phase 1 (no GIL): roi_header then roi_begin. */
static inline int roi_start(roi_job *job)
{
    if (roi_header(job) != 0)
        return -1;
    return roi_begin(job);
}

/* check_rest: entropy-decode the rows below the region (skipping them decodes no pixels),
 * read the last row into a spare buffer (skipping to the bottom would stop without decoding),
 * then read to EOI, so every warning of a full decode is raised. 0, or -1 with err.message. */
static int roi_read_rest(roi_job *job, size_t stride)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    JDIMENSION last = cinfo->output_height - 1;
    JSAMPROW row;

    job->spare_row = (unsigned char *)PyMem_RawMalloc(stride ? stride : 1);
    if (job->spare_row == NULL) {
        snprintf(job->err.message, JMSG_LENGTH_MAX, "out of memory");
        return -1;
    }
    row = job->spare_row;
    /* libjpeg-turbo's merged 2x2 upsampler (fast_upsample on 4:2:0) makes rows two at a time
     * and keeps the second in its own spare row until the next read. jpeg_skip_scanlines
     * neither returns nor clears that row, so a skip right after an odd number of rows leaves
     * the upsampler one row behind the output counter: at the bottom it asks for an iMCU row
     * past the last one (baseline: "premature end of data segment"; progressive: libjpeg waits
     * for input that never comes). Reading the pending row first keeps them in step. */
    if ((cinfo->output_scanline & 1) && cinfo->output_scanline < last
        && jpeg_read_scanlines(cinfo, &row, 1) == 0) {
        snprintf(job->err.message, JMSG_LENGTH_MAX, "jpeg_read_scanlines made no progress");
        return -1;
    }
    while (cinfo->output_scanline < last) {
        if (jpeg_skip_scanlines(cinfo, last - cinfo->output_scanline) == 0) {
            snprintf(job->err.message, JMSG_LENGTH_MAX, "jpeg_skip_scanlines made no progress");
            return -1;
        }
    }
    while (cinfo->output_scanline < cinfo->output_height) {
        if (jpeg_read_scanlines(cinfo, &row, 1) == 0) {
            snprintf(job->err.message, JMSG_LENGTH_MAX, "jpeg_read_scanlines made no progress");
            return -1;
        }
    }
    jpeg_finish_decompress(cinfo);
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
    while (skipped < job->out_y - job->cut.y) { /* the rows above, in the stream read */
        JDIMENSION n = jpeg_skip_scanlines(cinfo, job->out_y - job->cut.y - skipped);
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
    } else if (job->check_rest && cinfo->output_scanline < cinfo->output_height) {
        return roi_read_rest(job, stride);
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

/* Destroys the decompressor; frees job->rows when the job owns them (PyMem_RawMalloc'd). */
static void roi_free(roi_job *job)
{
    if (job->created)
        jpeg_destroy_decompress(&job->cinfo);
    job->created = 0;
    if (!job->borrowed_rows)
        PyMem_RawFree(job->rows);
    job->rows = NULL;
    PyMem_RawFree(job->spare_row);
    job->spare_row = NULL;
    rst_buffer_free(&job->cut.buffer);
    job->cut.active = 0;
}

/* Sets up the error manager of a zeroed job. */
static void roi_init_errors(roi_job *job)
{
    job->cinfo.err = jpeg_std_error(&job->err.pub);
    job->err.pub.error_exit = roi_error_exit;
    job->err.pub.emit_message = roi_emit_message;
    job->err.pub.output_message = roi_output_message;
}

#endif
