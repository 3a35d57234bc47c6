/* The decode ceiling with no Python at all: T threads decoding in-memory JPEGs to RGB with
 * libjpeg, nothing else, for S seconds; prints {"images": N, "seconds": S, "images_per_s": R}.
 *
 * Input: a file of length-prefixed JPEGs (uint32 little-endian length, then the bytes), as
 * benchmarks/suites/faces.py writes it from a .rec. Every thread walks all images from its own start
 * (thread i starts at image i * count / T), decoding each to a reused RGB buffer with libjpeg's
 * defaults (JDCT_ISLOW, fancy upsampling: what recpipe decodes with unless fast_dct /
 * fast_upsample are asked for).
 *
 * With OUTPUT "batch" each decoded image is also written the way recpipe's faces recipe writes
 * it: float32 (C, H, W), (x - 127.5) / 127.5, every other image mirrored, into the next slot of a
 * ring of 4 batches of 128 slots per thread (64-byte aligned), by recpipe's own writer
 * (csrc/kernels/chw_rows.h): the same job as the loader's decode threads, still with no Python.
 *
 *     cc -O2 -I csrc -o /tmp/jpeg_loop benchmarks/peers/jpeg_loop.c -ljpeg -lpthread
 *     /tmp/jpeg_loop blobs.bin THREADS SECONDS [rgb|batch]
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include <jpeglib.h>

#include "kernels/chw_rows.h"

#define BATCH_SLOTS 128
#define RING_BATCHES 4

typedef struct {
    const unsigned char **data;
    size_t *sizes;
    size_t count;
} images;

typedef struct {
    const images *all;
    size_t first;
    double deadline;
    int batch;            /* also write each image into a float32 batch slot */
    float *ring;          /* RING_BATCHES x BATCH_SLOTS slots, allocated at the first image */
    size_t slot_floats, next_slot;
    unsigned char *rgb;   /* the decoded image (in memory, not a register: setjmp below) */
    size_t rgb_cap;
    long decoded, failed;
    pthread_t thread;
} worker;

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} error_mgr;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_error(j_common_ptr cinfo)
{
    longjmp(((error_mgr *)cinfo->err)->jump, 1);
}

/* ``rgb`` (h rows of w RGB pixels) into the worker's next batch slot as recpipe's faces recipe
 * writes it; -1 when the ring cannot be allocated or the image is larger than its slots. */
static int write_slot(worker *w, const unsigned char *rgb, long h, long width, size_t index)
{
    size_t floats = (size_t)h * (size_t)width * 3;
    if (w->ring == NULL) {
        size_t bytes = floats * 4 * BATCH_SLOTS * RING_BATCHES;
        w->ring = aligned_alloc(64, (bytes + 63) / 64 * 64);
        w->slot_floats = floats;
        if (w->ring == NULL)
            return -1;
    }
    if (floats != w->slot_floats)
        return -1;
    chw_rows t = {w->ring + w->slot_floats * w->next_slot, (size_t)h * (size_t)width, width,
                  (int)((index * 2654435761u >> 16) & 1), {1 / 127.5f, 1 / 127.5f, 1 / 127.5f},
                  {-1.f, -1.f, -1.f}};
    chw_float_rows(&t, rgb, (size_t)width * 3, h);
    w->next_slot = (w->next_slot + 1) % (BATCH_SLOTS * RING_BATCHES);
    return 0;
}

static void *decode_loop(void *arg)
{
    worker *w = arg;
    struct jpeg_decompress_struct cinfo;
    error_mgr err;
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    jpeg_create_decompress(&cinfo);
    size_t i = w->first;
    while (now() < w->deadline) {
        for (volatile int k = 0; k < 16; k++, i = (i + 1) % w->all->count) { /* clock every 16 */
            if (setjmp(err.jump)) {
                jpeg_abort_decompress(&cinfo);
                w->failed++;
                continue;
            }
            jpeg_mem_src(&cinfo, w->all->data[i], w->all->sizes[i]);
            jpeg_read_header(&cinfo, TRUE);
            cinfo.out_color_space = JCS_RGB;
            jpeg_start_decompress(&cinfo);
            size_t stride = (size_t)cinfo.output_width * cinfo.output_components;
            size_t need = stride * cinfo.output_height;
            if (need > w->rgb_cap) {
                free(w->rgb);
                w->rgb = malloc(need);
                w->rgb_cap = w->rgb ? need : 0;
                if (w->rgb == NULL) {
                    jpeg_abort_decompress(&cinfo);
                    w->failed++;
                    continue;
                }
            }
            while (cinfo.output_scanline < cinfo.output_height) {
                JSAMPROW row = w->rgb + stride * cinfo.output_scanline;
                jpeg_read_scanlines(&cinfo, &row, 1);
            }
            jpeg_finish_decompress(&cinfo);
            if (w->batch && (cinfo.output_components != 3
                             || write_slot(w, w->rgb, cinfo.output_height, cinfo.output_width, i))) {
                w->failed++;
                continue;
            }
            w->decoded++;
        }
    }
    jpeg_destroy_decompress(&cinfo);
    free(w->rgb);
    free(w->ring);
    return NULL;
}

static int load(const char *path, images *out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 1024;
    out->data = malloc(cap * sizeof *out->data);
    out->sizes = malloc(cap * sizeof *out->sizes);
    out->count = 0;
    unsigned char head[4];
    while (fread(head, 1, 4, f) == 4) {
        size_t n = head[0] | head[1] << 8 | head[2] << 16 | (size_t)head[3] << 24;
        unsigned char *bytes = malloc(n ? n : 1);
        if (bytes == NULL || fread(bytes, 1, n, f) != n) {
            fclose(f);
            return -1;
        }
        if (out->count == cap) {
            cap *= 2;
            out->data = realloc(out->data, cap * sizeof *out->data);
            out->sizes = realloc(out->sizes, cap * sizeof *out->sizes);
        }
        out->data[out->count] = bytes;
        out->sizes[out->count++] = n;
    }
    fclose(f);
    return out->count ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s BLOBS THREADS SECONDS [rgb|batch]\n", argv[0]);
        return 2;
    }
    int batch = argc == 5 && strcmp(argv[4], "batch") == 0;
    if (argc == 5 && !batch && strcmp(argv[4], "rgb") != 0) {
        fprintf(stderr, "OUTPUT must be rgb or batch\n");
        return 2;
    }
    images all;
    if (load(argv[1], &all) != 0) {
        fprintf(stderr, "%s: no length-prefixed JPEGs could be read\n", argv[1]);
        return 1;
    }
    int threads = atoi(argv[2]);
    double seconds = atof(argv[3]);
    if (threads < 1 || threads > 1024 || !(seconds > 0)) {
        fprintf(stderr, "THREADS must be 1-1024 and SECONDS positive\n");
        return 2;
    }
    worker *workers = calloc((size_t)threads, sizeof *workers);
    double start = now();
    for (int t = 0; t < threads; t++) {
        workers[t].all = &all;
        workers[t].first = (size_t)t * all.count / (size_t)threads;
        workers[t].deadline = start + seconds;
        workers[t].batch = batch;
        pthread_create(&workers[t].thread, NULL, decode_loop, &workers[t]);
    }
    long decoded = 0, failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(workers[t].thread, NULL);
        decoded += workers[t].decoded;
        failed += workers[t].failed;
    }
    double wall = now() - start;
    printf("{\"images\": %ld, \"failed\": %ld, \"seconds\": %.4f, \"images_per_s\": %.1f}\n",
           decoded, failed, wall, decoded / wall);
    return failed ? 1 : 0;
}
