/*
 * The experiment's C side, loaded by run.py with ctypes (inside the Python process, so the
 * headers' PyMem_Raw* resolve): transcoding, pixel comparisons and timed decodes, with the
 * package's own C (csrc/jpeg/restart.h, transcode.h, roi.h; the prototypes were moved there).
 *
 *     cc -O2 -shared -fPIC -I csrc -I $(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
 *        -o /tmp/rstlab.so experiments/restart_markers/rstlab.c -ljpeg
 */
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jpeg/roi.h"
#include "jpeg/restart.h"
#include "jpeg/transcode.h"

/* This thread's CPU time: on a shared 2-core machine the time other processes take from it
 * stays out of the measurement (wall clocks varied 2x between rounds there). */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The transcoded bytes into out (cap bytes): their size, 0 when not transcodable, -1 on error,
 * -2 when out is too small. */
long lab_transcode(const unsigned char *data, size_t size, unsigned rows, unsigned mcus,
                   int optimize, unsigned char *out, size_t cap, unsigned *interval)
{
    rst_transcoding t;
    rst_options opt = {rows, mcus, optimize};
    int status = rst_transcode(&t, data, size, &opt);
    long result;
    if (status == 1)
        return 0;
    if (status != 0)
        return -1;
    *interval = t.interval;
    if (t.out.size > cap) {
        result = -2;
    } else {
        memcpy(out, t.out.bytes, t.out.size);
        result = (long)t.out.size;
    }
    PyMem_RawFree(t.out.bytes);
    return result;
}

/* Seconds to transcode ``reps`` times (-1 on error). */
double lab_transcode_time(const unsigned char *data, size_t size, unsigned rows, unsigned mcus,
                          int optimize, int reps)
{
    rst_options opt = {rows, mcus, optimize};
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        rst_transcoding t;
        if (rst_transcode(&t, data, size, &opt) != 0)
            return -1;
        PyMem_RawFree(t.out.bytes);
    }
    return now() - t0;
}

typedef struct {
    int mode;  /* 0 full image, 1 region (today), 2 region through the restart cut */
    long x0, y0, x1, y1;
    unsigned den;
    int fast_upsample, fast_dct;
} lab_request;

/* The region's decode: mode 2 through the cut of restart intervals (roi.h's hook), mode 1
 * the whole stream. */
static int region_decode(const unsigned char *data, size_t size, const lab_request *r,
                         unsigned char **pixels, unsigned *h, unsigned *w, unsigned *x,
                         unsigned *y, rst_buffer *unused)
{
    roi_job *job = (roi_job *)calloc(1, sizeof(roi_job));
    int status;
    (void)unused;
    job->data = data;
    job->size = size;
    job->scale_num = 1;
    job->scale_den = r->den;
    job->x0 = r->x0;
    job->y0 = r->y0;
    job->x1 = r->x1;
    job->y1 = r->y1;
    job->channels = 3;
    job->fast_dct = r->fast_dct;
    job->fast_upsample = r->fast_upsample;
    job->whole_stream = r->mode != 2;
    roi_init_errors(job);
    status = roi_guarded(job, roi_start);
    if (status == 0) {
        size_t bytes = (size_t)job->out_w * job->out_h * 3;
        *pixels = (unsigned char *)realloc(*pixels, bytes ? bytes : 1);
        job->pixels = *pixels;
        job->rows = (JSAMPROW *)PyMem_RawMalloc(sizeof(JSAMPROW) * (job->out_h ? job->out_h : 1));
        status = roi_guarded(job, roi_read);
        *h = job->out_h;
        *w = job->out_w;
        *x = job->out_x;
        *y = job->out_y;
    }
    roi_free(job);
    free(job);
    return status;
}

static int full_decode(const unsigned char *data, size_t size, const lab_request *r,
                       unsigned char **pixels, unsigned *h, unsigned *w)
{
    lab_request whole = *r;
    unsigned x, y;
    rst_buffer none = {0};
    whole.mode = 1;
    whole.x0 = whole.y0 = 0;
    whole.x1 = whole.y1 = -1;
    return region_decode(data, size, &whole, pixels, h, w, &x, &y, &none);
}

/* One decode into out (cap bytes): 0 and the window, or -1. */
int lab_region(const unsigned char *data, size_t size, int mode, long x0, long y0, long x1,
               long y1, unsigned den, int fast_upsample, unsigned char *out, size_t cap,
               unsigned *hwxy)
{
    lab_request r = {mode, x0, y0, x1, y1, den, fast_upsample, 0};
    unsigned char *pixels = NULL;
    rst_buffer cut = {0};
    int status = mode == 0 ? full_decode(data, size, &r, &pixels, &hwxy[0], &hwxy[1])
                           : region_decode(data, size, &r, &pixels, &hwxy[0], &hwxy[1],
                                           &hwxy[2], &hwxy[3], &cut);
    if (mode == 0)
        hwxy[2] = hwxy[3] = 0;
    if (status == 0) {
        size_t bytes = (size_t)hwxy[0] * hwxy[1] * 3;
        if (bytes > cap)
            status = -2;
        else
            memcpy(out, pixels, bytes);
    }
    free(pixels);
    rst_buffer_free(&cut);
    return status;
}

/* Seconds for ``n`` decodes: image i of ``n`` with its own box (boxes: n x 4 longs). */
double lab_time(const unsigned char *const *datas, const size_t *sizes, const long *boxes,
                int n, int mode, unsigned den)
{
    unsigned char *pixels = NULL;
    rst_buffer cut = {0};
    double t0 = now();
    for (int i = 0; i < n; i++) {
        lab_request r = {mode, boxes[4 * i], boxes[4 * i + 1], boxes[4 * i + 2],
                         boxes[4 * i + 3], den, 0, 0};
        unsigned h, w, x, y;
        int status = mode == 0 ? full_decode(datas[i], sizes[i], &r, &pixels, &h, &w)
                               : region_decode(datas[i], sizes[i], &r, &pixels, &h, &w, &x, &y,
                                               &cut);
        if (status != 0) {
            free(pixels);
            rst_buffer_free(&cut);
            return -1;
        }
    }
    double t = now() - t0;
    free(pixels);
    rst_buffer_free(&cut);
    return t;
}

/* Seconds for ``n`` cut builds only (layout, index walk, copy), no decoding; the bytes of the
 * cuts built in *bytes (those that fell back count 0). */
double lab_time_cut(const unsigned char *const *datas, const size_t *sizes, const long *boxes,
                    int n, unsigned den, double *bytes)
{
    rst_buffer cut = {0};
    double total = 0, t0 = now();
    for (int i = 0; i < n; i++) {
        rst_layout l;
        rst_cut c;
        if (!rst_read_layout(datas[i], sizes[i], &l))
            continue;
        long m = 2 * (long)(l.h_max > l.v_max ? l.h_max : l.v_max);
        rst_cut_of(&l, (boxes[4 * i] - m) * (long)den, (boxes[4 * i + 1] - m) * (long)den,
                   (boxes[4 * i + 2] + m) * (long)den, (boxes[4 * i + 3] + m) * (long)den, &c);
        if (!rst_cut_is_whole(&l, &c) && rst_build(datas[i], sizes[i], &l, &c, &cut) == 0)
            total += (double)cut.size;
    }
    double t = now() - t0;
    rst_buffer_free(&cut);
    *bytes = total;
    return t;
}

/* Seconds to find every restart marker of ``n`` images (a memchr walk of the whole scan): what
 * recomputing the index at decode costs at most. */
double lab_time_scan(const unsigned char *const *datas, const size_t *sizes, int n,
                     long *markers)
{
    long found = 0;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        rst_layout l;
        if (!rst_read_layout(datas[i], sizes[i], &l))
            continue;
        size_t pos = l.scan;
        const unsigned char *d = datas[i];
        for (;;) {
            const unsigned char *ff = memchr(d + pos, 0xFF, sizes[i] - pos);
            if (ff == NULL || (size_t)(ff - d) + 1 >= sizes[i])
                break;
            pos = (size_t)(ff - d) + 1;
            if (d[pos] >= 0xD0 && d[pos] <= 0xD7)
                found++;
            else if (d[pos] != 0x00 && d[pos] != 0xFF)
                break;
        }
    }
    *markers = found;
    return now() - t0;
}

/* Seconds to entropy-decode ``n`` whole images without IDCT (jpeg_skip_scanlines to the last
 * row, which is then read): the Huffman share of a full decode. */
double lab_time_entropy(const unsigned char *const *datas, const size_t *sizes, int n)
{
    unsigned char *row = (unsigned char *)malloc(3 * 65536);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        roi_job *job = (roi_job *)calloc(1, sizeof(roi_job));
        job->data = datas[i];
        job->size = sizes[i];
        job->scale_num = job->scale_den = 1;
        job->x1 = job->y1 = -1;
        job->channels = 3;
        roi_init_errors(job);
        if (roi_guarded(job, roi_start) == 0) {
            job->out_y = job->cinfo.output_height - 1;
            job->out_h = 1;
            job->pixels = row;
            job->rows = (JSAMPROW *)PyMem_RawMalloc(sizeof(JSAMPROW));
            roi_guarded(job, roi_read);
        }
        roi_free(job);
        free(job);
    }
    double t = now() - t0;
    free(row);
    return t;
}

/* The cut's JPEG for source box [x0, x1) x [y0, y1) into out: its size, 0 when no cut applies. */
long lab_cut(const unsigned char *data, size_t size, long x0, long y0, long x1, long y1,
             unsigned char *out, size_t cap)
{
    rst_layout l;
    rst_cut c;
    rst_buffer cut = {0};
    long n = 0;
    if (!rst_read_layout(data, size, &l))
        return 0;
    rst_cut_of(&l, x0, y0, x1, y1, &c);
    if (rst_build(data, size, &l, &c, &cut) == 0 && cut.size <= cap) {
        memcpy(out, cut.bytes, cut.size);
        n = (long)cut.size;
    }
    rst_buffer_free(&cut);
    return n;
}

/* Paired timing of ``m`` measurements over the same ``n`` images: image i is decoded by every
 * measurement in turn (the order rotated with i), each decode timed alone. datas/sizes: m x n;
 * boxes: m x n x 5 (den, x0, y0, x1, y1); modes: m; seconds: m totals. 0, or -1 when a decode
 * failed. */
int lab_time_paired(int m, int n, const unsigned char *const *datas, const size_t *sizes,
                    const long *boxes, const int *modes, double *seconds)
{
    unsigned char *pixels = NULL;
    rst_buffer cut = {0};
    int status = 0;
    for (int k = 0; k < m; k++)
        seconds[k] = 0;
    for (int i = 0; i < n && status == 0; i++) {
        for (int j = 0; j < m && status == 0; j++) {
            int k = (i + j) % m;
            size_t at = (size_t)k * n + i;
            const long *b = boxes + 5 * at;
            lab_request r = {modes[k], b[1], b[2], b[3], b[4], (unsigned)b[0], 0, 0};
            unsigned h, w, x, y;
            double t0 = now();
            status = modes[k] == 0 ? full_decode(datas[at], sizes[at], &r, &pixels, &h, &w)
                                   : region_decode(datas[at], sizes[at], &r, &pixels, &h, &w,
                                                   &x, &y, &cut);
            seconds[k] += now() - t0;
        }
    }
    free(pixels);
    rst_buffer_free(&cut);
    return status;
}
