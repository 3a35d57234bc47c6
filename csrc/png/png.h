/*
 * PNG records in recpipe._batch's runs (built with libpng: RECPIPE_PNG), so that a file with
 * some PNGs among its JPEGs stays on the native path: the PNGs whose pixels OpenCV's
 * cv2.imdecode gives without any conversion of values are decoded here, without the GIL, into
 * the same uint8 rows (RGB, or gray for gray output): 8-bit RGB, gray or palette images
 * without transparency (palette expanded, gray replicated for 3-channel output, colour to gray
 * by libpng's conversion with OpenCV's weights, interlacing undone). Everything else (16-bit
 * samples, alpha or tRNS) is left to the Python path, which decodes it with OpenCV and renders
 * it with the same kernels.
 *
 * png_decode(data, size, channels, max_pixels, &pixels, &cap, &h, &w): 0 with the image in
 * ``*pixels`` (h x w x channels, grown with realloc), -1 to leave the record to the caller.
 */
#ifndef RECPIPE_PNG_PNG_H
#define RECPIPE_PNG_PNG_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef RECPIPE_PNG
#include <png.h>

#define PNG_NATIVE 1

#define PNG_MAX_SIDE 65535L /* larger images are left to the caller */

static const unsigned char PNG_SIGNATURE[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static int png_is_png(const unsigned char *data, size_t size)
{
    return size >= 8 && memcmp(data, PNG_SIGNATURE, 8) == 0;
}

typedef struct {
    const unsigned char *data;
    size_t size, at;
} png_source;

static void png_read_bytes(png_structp png, png_bytep out, size_t length)
{
    png_source *src = png_get_io_ptr(png);
    if (length > src->size - src->at)
        png_error(png, "truncated PNG");
    memcpy(out, src->data + src->at, length);
    src->at += length;
}

static void png_quiet(png_structp png, png_const_charp message)
{
    (void)png, (void)message; /* warnings: as OpenCV, not errors; nothing printed */
}

static void png_fail(png_structp png, png_const_charp message)
{
    (void)message;
    png_longjmp(png, 1);
}

/* The state a longjmp must not lose lives in this struct, not in locals. */
typedef struct {
    png_structp png;
    png_infop info;
    png_source src;
    png_bytep *rows;
} png_job;

static int png_decode_guarded(png_job *job, long channels, unsigned long long max_pixels,
                              unsigned char **pixels, size_t *cap, long *height, long *width)
{
    png_structp png = job->png;
    png_infop info = job->info;
    if (setjmp(png_jmpbuf(png)))
        return -1;
    png_set_read_fn(png, &job->src, png_read_bytes);
    png_set_sig_bytes(png, 0);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
    if (w < 1 || h < 1 || w > PNG_MAX_SIDE || h > PNG_MAX_SIDE || depth != 8
        || png_get_valid(png, info, PNG_INFO_tRNS)
        || (max_pixels && (unsigned long long)w * h > max_pixels))
        return -1;
    if (type != PNG_COLOR_TYPE_PALETTE && type != PNG_COLOR_TYPE_GRAY
        && type != PNG_COLOR_TYPE_RGB)
        return -1; /* alpha: OpenCV strips it, the Python path does it */
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && channels == 3)
        png_set_gray_to_rgb(png);
    if (type != PNG_COLOR_TYPE_GRAY && channels == 1) /* OpenCV's IMREAD_GRAYSCALE: libpng's */
        png_set_rgb_to_gray_fixed(png, 1, 29900, 58700); /* conversion, weights 0.299, 0.587 */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t stride = (size_t)w * (size_t)channels;
    if (png_get_rowbytes(png, info) != stride)
        return -1;
    size_t bytes = stride * h;
    if (bytes > *cap) {
        unsigned char *bigger = realloc(*pixels, bytes);
        if (bigger == NULL)
            return -1;
        *pixels = bigger;
        *cap = bytes;
    }
    job->rows = malloc(sizeof(png_bytep) * h);
    if (job->rows == NULL)
        return -1;
    for (png_uint_32 y = 0; y < h; y++)
        job->rows[y] = *pixels + stride * y;
    png_read_image(png, job->rows);
    *height = (long)h;
    *width = (long)w;
    return 0;
}

static int png_decode(const unsigned char *data, size_t size, long channels,
                      unsigned long long max_pixels, unsigned char **pixels, size_t *cap,
                      long *height, long *width)
{
    png_job job = {NULL, NULL, {data, size, 0}, NULL};
    job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, png_fail, png_quiet);
    if (job.png == NULL)
        return -1;
    job.info = png_create_info_struct(job.png);
    int status = job.info == NULL ? -1
                                  : png_decode_guarded(&job, channels, max_pixels, pixels, cap,
                                                       height, width);
    png_destroy_read_struct(&job.png, job.info ? &job.info : NULL, NULL);
    free(job.rows);
    return status;
}

#else /* built without libpng: every PNG is the Python path's */

#define PNG_NATIVE 0

static int png_is_png(const unsigned char *data, size_t size)
{
    (void)data, (void)size;
    return 0;
}

static int png_decode(const unsigned char *data, size_t size, long channels,
                      unsigned long long max_pixels, unsigned char **pixels, size_t *cap,
                      long *height, long *width)
{
    (void)data, (void)size, (void)channels, (void)max_pixels, (void)pixels, (void)cap;
    (void)height, (void)width;
    return -1;
}

#endif

#endif
