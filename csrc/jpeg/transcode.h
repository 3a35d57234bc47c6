/*
 * Lossless restart markers: a baseline JPEG's DCT coefficients read and written back with
 * restart intervals (libjpeg's transcoding API, what jpegtran -restart does), optionally with
 * optimal Huffman tables, every APPn and COM segment kept. The coefficients and quantisation
 * tables are the same, so every decoder gives the same pixels; rst_transcode checks it by
 * reading the written file's coefficients back and comparing them with the source's.
 *
 * The interval (jpeg/restart.h decodes only the intervals a region touches): ``rows`` MCU rows,
 * or the divisor of a row's MCU count nearest ``mcus`` (intervals that divide a row let a region
 * skip columns too). Runs without the GIL; memory through PyMem_Raw*.
 */
#ifndef RECPIPE_JPEG_TRANSCODE_H
#define RECPIPE_JPEG_TRANSCODE_H

#include <Python.h> /* PyMem_Raw* */

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

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

/* a warning (corrupt data) stops the transcoding: coefficients libjpeg guessed are not written */
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
    (void)cinfo; /* never print to stderr */
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
    unsigned rows; /* > 0: one interval every ``rows`` MCU rows */
    unsigned mcus; /* rows == 0: the divisor of a row's MCUs nearest this (both 0: no markers) */
    int optimize;  /* optimal Huffman tables (a second pass over the coefficients) */
} rst_options;

/* A destination in memory we own (jpeg_mem_dest's buffer is lost when an error stops it after it
 * grew). */
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
    unsigned char *grown = cap > d->cap ? (unsigned char *)PyMem_RawRealloc(d->bytes, cap) : NULL;
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
    struct jpeg_decompress_struct src, check;
    struct jpeg_compress_struct dst;
    rst_error_mgr err;
    int src_created, check_created, dst_created;
    jvirt_barray_ptr *coefficients;
    rst_dest out;      /* out.bytes (PyMem_RawFree it), out.size */
    unsigned interval; /* the DRI written (MCUs; 0: none) */
    int differs;       /* the written coefficients are not the source's */
} rst_transcoding;

/* The restart interval (MCUs; 0: none; -1 when a row is longer than a DRI can count) of an
 * image ``width`` pixels wide with ``components`` components, the widest sampled ``max_h_samp``
 * times (one component: its MCU is one block). The transcoder and an encoder writing the
 * markers itself (recpipe.packing's re-encode, through ``restart_interval``) both ask here. */
static long rst_interval(unsigned width, int components, unsigned max_h_samp,
                         const rst_options *opt)
{
    unsigned mcus_per_row;
    if (components == 1 || max_h_samp == 0)
        mcus_per_row = (width + 7) / 8;
    else
        mcus_per_row = (width + 8 * max_h_samp - 1) / (8 * max_h_samp);
    if (opt->rows > 0) {
        unsigned long interval = (unsigned long)opt->rows * mcus_per_row;
        return interval > 65535 ? -1 : (long)interval;
    }
    if (opt->mcus > 0) {
        unsigned interval = rst_divisor_near(mcus_per_row, opt->mcus);
        return interval > 65535 ? -1 : (long)interval;
    }
    return 0;
}

/* The restart interval for ``src`` (rst_interval of its size and sampling). */
static long rst_interval_for(const struct jpeg_decompress_struct *src, const rst_options *opt)
{
    return rst_interval(src->image_width, src->num_components,
                        (unsigned)src->max_h_samp_factor, opt);
}

static int rst_same_table(const JQUANT_TBL *a, const JQUANT_TBL *b)
{
    return a != NULL && b != NULL && memcmp(a->quantval, b->quantval, sizeof a->quantval) == 0;
}

/* Reads the written file's coefficients back: t->differs when anything a decoder's pixels
 * depend on (size, colour space, sampling, quantisation, coefficients) is not the source's. */
static void rst_check_written(rst_transcoding *t)
{
    struct jpeg_decompress_struct *src = &t->src, *chk = &t->check;
    jvirt_barray_ptr *written;

    jpeg_create_decompress(chk);
    t->check_created = 1;
    chk->err = &t->err.pub;
    jpeg_mem_src(chk, t->out.bytes, (unsigned long)t->out.size);
    jpeg_read_header(chk, TRUE);
    written = jpeg_read_coefficients(chk);
    t->differs = chk->image_width != src->image_width || chk->image_height != src->image_height
                 || chk->num_components != src->num_components
                 || chk->jpeg_color_space != src->jpeg_color_space
                 || chk->progressive_mode || chk->data_precision != src->data_precision;
    for (int c = 0; c < src->num_components && !t->differs; c++) {
        jpeg_component_info *a = &src->comp_info[c], *b = &chk->comp_info[c];
        t->differs = a->h_samp_factor != b->h_samp_factor || a->v_samp_factor != b->v_samp_factor
                     || a->width_in_blocks != b->width_in_blocks
                     || a->height_in_blocks != b->height_in_blocks
                     || !rst_same_table(a->quant_table, b->quant_table);
        for (JDIMENSION row = 0; row < a->height_in_blocks && !t->differs; row++) {
            JBLOCKARRAY x = (*src->mem->access_virt_barray)((j_common_ptr)src,
                                                            t->coefficients[c], row, 1, FALSE);
            JBLOCKARRAY y = (*chk->mem->access_virt_barray)((j_common_ptr)chk, written[c], row,
                                                            1, FALSE);
            t->differs = memcmp(x[0], y[0], sizeof(JBLOCK) * a->width_in_blocks) != 0;
        }
    }
    jpeg_finish_decompress(chk);
}

/* Under setjmp: 0 written (t->out), 1 the stream cannot take markers (progressive, arithmetic,
 * lossless, not 8-bit, a row too long): keep it as it is. */
static int rst_transcode_steps(rst_transcoding *t, const unsigned char *data, size_t size,
                               const rst_options *opt)
{
    long interval;

    jpeg_create_decompress(&t->src);
    t->src_created = 1;
    jpeg_mem_src(&t->src, (unsigned char *)data, (unsigned long)size);
    jpeg_save_markers(&t->src, JPEG_COM, 0xFFFF);
    for (int k = 0; k < 16; k++)
        jpeg_save_markers(&t->src, JPEG_APP0 + k, 0xFFFF);
    jpeg_read_header(&t->src, TRUE);
    if (t->src.progressive_mode || t->src.arith_code || t->src.data_precision != 8)
        return 1;
    interval = rst_interval_for(&t->src, opt);
    if (interval < 0)
        return 1;
    t->interval = (unsigned)interval;
    t->coefficients = jpeg_read_coefficients(&t->src);

    jpeg_create_compress(&t->dst);
    t->dst_created = 1;
    t->dst.err = &t->err.pub;
    t->out.cap = size + 4096;
    t->out.bytes = (unsigned char *)PyMem_RawMalloc(t->out.cap);
    if (t->out.bytes == NULL)
        ERREXIT1(&t->dst, JERR_OUT_OF_MEMORY, 1);
    t->out.pub.init_destination = rst_dest_init;
    t->out.pub.empty_output_buffer = rst_dest_empty;
    t->out.pub.term_destination = rst_dest_term;
    t->dst.dest = &t->out.pub;
    jpeg_copy_critical_parameters(&t->src, &t->dst);
    t->dst.optimize_coding = opt->optimize ? TRUE : FALSE;
    t->dst.restart_interval = t->interval;
    jpeg_write_coefficients(&t->dst, t->coefficients);
    for (jpeg_saved_marker_ptr m = t->src.marker_list; m != NULL; m = m->next) {
        if (t->dst.write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5
            && memcmp(m->data, "JFIF", 5) == 0)
            continue; /* libjpeg wrote its own */
        if (t->dst.write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5
            && memcmp(m->data, "Adobe", 5) == 0)
            continue;
        jpeg_write_marker(&t->dst, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(&t->dst);
    rst_check_written(t);
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

/* ``data`` with restart intervals. 0: t->out.bytes (PyMem_RawFree it) and t->out.size hold the
 * new file; 1: the stream cannot take them (keep it as it is); -1: libjpeg's error or warning
 * in t->err.message, or (t->differs) the written coefficients are not the source's. t is
 * zeroed here; nothing is left allocated but t->out.bytes on 0. */
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
    if (status == 0 && t->differs) {
        snprintf(t->err.message, JMSG_LENGTH_MAX,
                 "the transcoded JPEG's coefficients differ from the source's");
        status = -1;
    }
    if (t->check_created)
        jpeg_destroy_decompress(&t->check);
    if (t->dst_created)
        jpeg_destroy_compress(&t->dst);
    if (t->src_created)
        jpeg_destroy_decompress(&t->src);
    if (status != 0) {
        PyMem_RawFree(t->out.bytes);
        t->out.bytes = NULL;
        t->out.size = 0;
    }
    return status;
}

#endif
