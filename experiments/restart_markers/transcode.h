/*
 * Lossless restart markers (prototype): a baseline JPEG's coefficients read and written back
 * with restart intervals (libjpeg's transcoding API: the coefficients are the same, so every
 * decoder gives the same pixels), every APPn and COM segment kept.
 */
#ifndef RECPIPE_JPEG_TRANSCODE_H
#define RECPIPE_JPEG_TRANSCODE_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#ifndef RST_REALLOC
#define RST_REALLOC realloc
#define RST_FREE free
#endif

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} rst_error_mgr;

static void rst_error_exit(j_common_ptr cinfo)
{
    rst_error_mgr *err = (rst_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

/* any warning (corrupt data) stops the transcoding: the file is kept as it is */
static void rst_emit_message(j_common_ptr cinfo, int level)
{
    rst_error_mgr *err = (rst_error_mgr *)cinfo->err;
    if (level < 0) {
        (*cinfo->err->format_message)(cinfo, err->message);
        longjmp(err->jump, 1);
    }
}

static void rst_output_message(j_common_ptr cinfo)
{
    (void)cinfo;
}

/* The divisor of ``n`` nearest ``target`` by ratio (the smaller of two as near). */
static unsigned rst_divisor_near(unsigned n, unsigned target)
{
    unsigned best = 1;
    double best_off = 1e300;
    for (unsigned d = 1; d <= n; d++) {
        if (n % d != 0)
            continue;
        double off = d > target ? (double)d / target : (double)target / d;
        if (off < best_off) {
            best = d;
            best_off = off;
        }
    }
    return best;
}

typedef struct {
    unsigned rows;  /* > 0: one interval every ``rows`` MCU rows */
    unsigned mcus;  /* rows == 0: MCUs per interval, the divisor of a row's MCUs nearest this
                     * (both 0: no restart intervals) */
    int optimize;   /* optimal Huffman tables (a second pass over the coefficients) */
} rst_options;

/* A destination in memory we own (jpeg_mem_dest's buffer can be lost when an error stops it
 * after it grew). */
typedef struct {
    struct jpeg_destination_mgr pub;
    unsigned char *bytes;
    size_t cap, size;
} rst_dest;

static void rst_dest_init(j_compress_ptr cinfo)
{
    rst_dest *d = (rst_dest *)cinfo->dest;
    d->pub.next_output_byte = d->bytes;
    d->pub.free_in_buffer = d->cap;
}

static boolean rst_dest_empty(j_compress_ptr cinfo)
{
    rst_dest *d = (rst_dest *)cinfo->dest;
    size_t cap = d->cap * 2;
    unsigned char *grown = (unsigned char *)RST_REALLOC(d->bytes, cap);
    if (grown == NULL)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    d->pub.next_output_byte = grown + d->cap;
    d->pub.free_in_buffer = cap - d->cap;
    d->bytes = grown;
    d->cap = cap;
    return TRUE;
}

static void rst_dest_term(j_compress_ptr cinfo)
{
    rst_dest *d = (rst_dest *)cinfo->dest;
    d->size = d->cap - d->pub.free_in_buffer;
}

typedef struct {
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    rst_error_mgr err;
    int src_created, dst_created;
    rst_dest out;        /* out.bytes (RST_REALLOC'd; the caller frees it), out.size */
    unsigned interval;   /* the DRI written (MCUs) */
} rst_transcoding;

/* 1 when a transcoding can apply: baseline/extended Huffman, 8 bits, one scan per component
 * set. Read after jpeg_read_header. */
static int rst_transcodable(const struct jpeg_decompress_struct *src)
{
    return !src->progressive_mode && !src->arith_code && src->data_precision == 8;
}

/* Phase run under setjmp: 0 done (t->out.bytes / t->out.size), 1 not transcodable (kept as is). */
static int rst_transcode_steps(rst_transcoding *t, const unsigned char *data, size_t size,
                               const rst_options *opt)
{
    jvirt_barray_ptr *coefficients;
    jpeg_saved_marker_ptr m;
    unsigned mcus_per_row;

    jpeg_create_decompress(&t->src);
    t->src_created = 1;
    jpeg_mem_src(&t->src, (unsigned char *)data, (unsigned long)size);
    jpeg_save_markers(&t->src, JPEG_COM, 0xFFFF);
    for (int k = 0; k < 16; k++)
        jpeg_save_markers(&t->src, JPEG_APP0 + k, 0xFFFF);
    jpeg_read_header(&t->src, TRUE);
    if (!rst_transcodable(&t->src))
        return 1;
    coefficients = jpeg_read_coefficients(&t->src);

    jpeg_create_compress(&t->dst);
    t->dst_created = 1;
    t->dst.err = &t->err.pub;
    t->out.cap = size + 4096;
    t->out.bytes = (unsigned char *)RST_REALLOC(NULL, t->out.cap);
    if (t->out.bytes == NULL)
        ERREXIT1(&t->dst, JERR_OUT_OF_MEMORY, 1);
    t->out.pub.init_destination = rst_dest_init;
    t->out.pub.empty_output_buffer = rst_dest_empty;
    t->out.pub.term_destination = rst_dest_term;
    t->dst.dest = &t->out.pub;
    jpeg_copy_critical_parameters(&t->src, &t->dst);
    t->dst.optimize_coding = opt->optimize ? TRUE : FALSE;
    if (t->src.num_components == 1)
        mcus_per_row = (t->src.image_width + 7) / 8;
    else
        mcus_per_row = (t->src.image_width + 8 * t->src.max_h_samp_factor - 1)
                       / (8 * t->src.max_h_samp_factor);
    if (opt->rows > 0) {
        unsigned long interval = (unsigned long)opt->rows * mcus_per_row;
        if (interval > 65535)
            return 1; /* a row longer than a DRI can count */
        t->interval = (unsigned)interval;
    } else if (opt->mcus > 0) {
        t->interval = rst_divisor_near(mcus_per_row, opt->mcus);
    }
    t->dst.restart_interval = t->interval; /* 0: none (a plain re-encoding) */
    jpeg_write_coefficients(&t->dst, coefficients);
    for (m = t->src.marker_list; m != NULL; m = m->next) {
        if (t->dst.write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5
            && memcmp(m->data, "JFIF", 5) == 0)
            continue; /* libjpeg writes its own */
        if (t->dst.write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5
            && memcmp(m->data, "Adobe", 5) == 0)
            continue;
        jpeg_write_marker(&t->dst, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(&t->dst);
    jpeg_finish_decompress(&t->src);
    return 0;
}

static int rst_transcode_guarded(rst_transcoding *t, const unsigned char *data, size_t size,
                                 const rst_options *opt)
{
    if (setjmp(t->err.jump))
        return -1;
    return rst_transcode_steps(t, data, size, opt);
}

/* ``data`` with restart intervals: 0 with t->out.bytes (RST_FREE it) and t->out.size; 1 when the file
 * cannot take them (progressive, arithmetic, 12-bit: keep it as it is); -1 with t->err.message
 * on a libjpeg error or warning. t is zeroed here. */
static int rst_transcode(rst_transcoding *t, const unsigned char *data, size_t size,
                         const rst_options *opt)
{
    int status;
    memset(t, 0, sizeof *t);
    t->src.err = jpeg_std_error(&t->err.pub);
    t->err.pub.error_exit = rst_error_exit;
    t->err.pub.emit_message = rst_emit_message;
    t->err.pub.output_message = rst_output_message;
    status = rst_transcode_guarded(t, data, size, opt);
    if (t->dst_created)
        jpeg_destroy_compress(&t->dst);
    if (t->src_created)
        jpeg_destroy_decompress(&t->src);
    if (status != 0) {
        RST_FREE(t->out.bytes);
        t->out.bytes = NULL;
        t->out.size = 0;
    }
    return status;
}

#endif
