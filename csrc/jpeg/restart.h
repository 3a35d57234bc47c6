/*
 * Restart intervals: decode only the part of a JPEG a region needs.
 *
 * A baseline JPEG with restart markers (DRI) is a sequence of independent intervals (the DC
 * predictions restart at every RSTn marker). When the intervals start rows (and, where they
 * divide a row, columns), the intervals a region touches form a smaller JPEG of their own: the
 * header with the SOF's height and width changed to the cut's, the needed intervals'
 * entropy-coded bytes with RST0..7 renumbered between them, EOI. libjpeg decodes that cut as it
 * would the whole file, so the rows above a crop and the MCUs beside it cost no Huffman decoding
 * (experiments/restart_markers: 70% of a full decode of a ~440 px photo is entropy decoding).
 *
 * No index is stored anywhere: the intervals are found by a memchr walk for 0xFF over the
 * entropy-coded data (stuffed FF 00 and fill bytes skipped, as libjpeg reads them), 1-2% of a
 * decode. Any stream this cannot serve (no DRI, progressive, arithmetic, several scans, markers
 * missing or out of order, intervals that never start a row) is decoded whole as before.
 *
 * rst_view_region() is the whole step for a libjpeg decompressor whose header was read:
 * it builds the cut of a region (in output pixels, after jpeg_calc_output_dimensions) and points
 * the decompressor at it, the caller's decoding settings kept. Everything runs without the GIL.
 */
#ifndef RECPIPE_JPEG_RESTART_H
#define RECPIPE_JPEG_RESTART_H

#include <Python.h> /* PyMem_Raw* */

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
    unsigned width, height;   /* the SOF's size */
    unsigned mcu_w, mcu_h;    /* pixels of one MCU */
    unsigned mcus_per_row, mcu_rows;
    unsigned interval;        /* DRI: MCUs per restart interval (> 0) */
    unsigned row_group;       /* MCU rows from one interval that starts a row to the next */
    unsigned col_mcus;        /* MCUs of one column cut (the interval when it divides a row) */
    unsigned h_max, v_max;    /* the largest sampling factors */
    size_t sof_size_at;       /* offset of the SOF's height (2 bytes) then width (2 bytes) */
    size_t scan;              /* first byte of the entropy-coded data */
} rst_layout;

/* MCU rows [row0, row1) and MCU columns [col0, col1). */
typedef struct {
    unsigned row0, row1, col0, col1;
} rst_cut;

/* Bytes built here (PyMem_Raw*; rst_buffer_free). */
typedef struct {
    unsigned char *bytes;
    size_t size, cap;
} rst_buffer;

static unsigned rst_gcd(unsigned a, unsigned b)
{
    while (b) {
        unsigned t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static unsigned rst_be16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* 1 when ``data`` is a baseline or extended-sequential Huffman JPEG (8-bit, 1-4 components)
 * whose first scan holds every component (the only scan) and whose restart intervals let a
 * region skip something (rows or columns); ``layout`` is then filled. 0 otherwise. */
static int rst_read_layout(const unsigned char *data, size_t size, rst_layout *layout)
{
    size_t pos = 2;
    unsigned components = 0, interval = 0, h_max = 1, v_max = 1;
    int have_sof = 0;

    memset(layout, 0, sizeof *layout);
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return 0;
    for (;;) {
        unsigned marker;
        size_t length;
        const unsigned char *body;
        if (pos >= size || data[pos] != 0xFF)
            return 0;
        while (pos < size && data[pos] == 0xFF)
            pos++;
        if (pos + 3 > size)
            return 0;
        marker = data[pos++];
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9))
            return 0; /* TEM, RSTn, SOI or EOI in a header: left to libjpeg */
        length = rst_be16(data + pos);
        if (length < 2 || pos + length > size)
            return 0;
        body = data + pos + 2;
        length -= 2;
        if (marker == 0xC0 || marker == 0xC1) {
            if (have_sof || length < 6 || body[0] != 8)
                return 0;
            layout->height = rst_be16(body + 1);
            layout->width = rst_be16(body + 3);
            components = body[5];
            if (components < 1 || components > 4 || length < 6 + 3 * (size_t)components)
                return 0;
            for (unsigned c = 0; c < components; c++) {
                unsigned h = body[7 + 3 * c] >> 4, v = body[7 + 3 * c] & 15;
                if (h < 1 || h > 4 || v < 1 || v > 4)
                    return 0;
                h_max = h > h_max ? h : h_max;
                v_max = v > v_max ? v : v_max;
            }
            layout->sof_size_at = pos + 3;
            have_sof = 1;
        } else if ((marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xCC)
                   || marker == 0xDC) {
            return 0; /* progressive, lossless, hierarchical, arithmetic; DNL */
        } else if (marker == 0xDD) {
            if (length < 2)
                return 0;
            interval = rst_be16(body);
        } else if (marker == 0xDA) {
            if (!have_sof || length < 1 || body[0] != components)
                return 0; /* a scan without every component: several scans */
            layout->scan = pos + 2 + length;
            break;
        }
        pos += 2 + length;
    }
    if (interval == 0 || layout->width == 0 || layout->height == 0)
        return 0;
    if (components == 1) /* one component: its MCU is one block */
        h_max = v_max = 1;
    layout->h_max = h_max;
    layout->v_max = v_max;
    layout->mcu_w = 8 * h_max;
    layout->mcu_h = 8 * v_max;
    layout->mcus_per_row = (layout->width + layout->mcu_w - 1) / layout->mcu_w;
    layout->mcu_rows = (layout->height + layout->mcu_h - 1) / layout->mcu_h;
    layout->interval = interval;
    layout->row_group = interval / rst_gcd(interval, layout->mcus_per_row);
    layout->col_mcus = layout->mcus_per_row % interval == 0 ? interval : layout->mcus_per_row;
    return layout->row_group < layout->mcu_rows || layout->col_mcus < layout->mcus_per_row;
}

/* The cut that holds source pixels [x0, x1) x [y0, y1) (clipped to the image; an empty box:
 * the whole image), widened to interval starts that begin a row and to whole intervals. */
static void rst_cut_of(const rst_layout *l, long x0, long y0, long x1, long y1, rst_cut *cut)
{
    unsigned g = l->row_group, c = l->col_mcus;
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > (long)l->width ? (long)l->width : x1;
    y1 = y1 > (long)l->height ? (long)l->height : y1;
    if (x1 <= x0 || y1 <= y0) {
        x0 = y0 = 0;
        x1 = l->width;
        y1 = l->height;
    }
    cut->row0 = (unsigned)(y0 / l->mcu_h) / g * g;
    cut->row1 = (unsigned)(((y1 + l->mcu_h - 1) / l->mcu_h + g - 1) / g * g);
    if (cut->row1 > l->mcu_rows)
        cut->row1 = l->mcu_rows;
    cut->col0 = (unsigned)(x0 / l->mcu_w) / c * c;
    cut->col1 = (unsigned)(((x1 + l->mcu_w - 1) / l->mcu_w + c - 1) / c * c);
    if (cut->col1 > l->mcus_per_row)
        cut->col1 = l->mcus_per_row;
}

static int rst_cut_is_whole(const rst_layout *l, const rst_cut *cut)
{
    return cut->row0 == 0 && cut->row1 == l->mcu_rows && cut->col0 == 0
           && cut->col1 == l->mcus_per_row;
}

/* The cut's first pixel and size, in source pixels. */
static void rst_cut_box(const rst_layout *l, const rst_cut *cut, unsigned *x, unsigned *y,
                        unsigned *w, unsigned *h)
{
    unsigned right = cut->col1 * l->mcu_w, bottom = cut->row1 * l->mcu_h;
    *x = cut->col0 * l->mcu_w;
    *y = cut->row0 * l->mcu_h;
    *w = (right < l->width ? right : l->width) - *x;
    *h = (bottom < l->height ? bottom : l->height) - *y;
}

static int rst_put(rst_buffer *out, const unsigned char *bytes, size_t n)
{
    if (n > ((size_t)-1) / 4 - out->size)
        return -1;
    if (out->size + n > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->size + n)
            cap *= 2;
        unsigned char *grown = (unsigned char *)PyMem_RawRealloc(out->bytes, cap);
        if (grown == NULL)
            return -1;
        out->bytes = grown;
        out->cap = cap;
    }
    memcpy(out->bytes + out->size, bytes, n);
    out->size += n;
    return 0;
}

static void rst_buffer_free(rst_buffer *buffer)
{
    PyMem_RawFree(buffer->bytes);
    buffer->bytes = NULL;
    buffer->size = buffer->cap = 0;
}

/* The cut's header: the segments before the entropy-coded data less APP1-APP13, APP15 and COM
 * (libjpeg reads only APP0 JFIF and APP14 Adobe), the SOF's size changed to w x h. The segments
 * were checked by rst_read_layout. */
static int rst_put_header(rst_buffer *out, const unsigned char *data, const rst_layout *l,
                          unsigned w, unsigned h)
{
    size_t pos = 2, sof = 0;
    if (rst_put(out, data, 2) != 0)
        return -1;
    while (pos < l->scan) {
        size_t start = pos;
        unsigned marker;
        while (data[pos] == 0xFF)
            pos++;
        marker = data[pos++];
        pos += rst_be16(data + pos);
        if ((marker >= 0xE1 && marker <= 0xED) || marker == 0xEF || marker == 0xFE)
            continue;
        if (start <= l->sof_size_at && l->sof_size_at < pos)
            sof = out->size + (l->sof_size_at - start);
        if (rst_put(out, data + start, pos - start) != 0)
            return -1;
    }
    out->bytes[sof] = (unsigned char)(h >> 8);
    out->bytes[sof + 1] = (unsigned char)h;
    out->bytes[sof + 2] = (unsigned char)(w >> 8);
    out->bytes[sof + 3] = (unsigned char)w;
    return 0;
}

/* 1 when interval ``index`` is part of ``cut`` (its first MCU is inside: intervals of a cut
 * never straddle its edges). */
static int rst_needed(const rst_layout *l, const rst_cut *cut, unsigned index)
{
    unsigned long long mcu = (unsigned long long)index * l->interval;
    unsigned long long row = mcu / l->mcus_per_row, col = mcu % l->mcus_per_row;
    return row >= cut->row0 && row < cut->row1 && col >= cut->col0 && col < cut->col1;
}

/* ``out`` (empty, or a buffer to reuse) := the JPEG of ``cut``. Walks the entropy-coded data
 * from its start up to the end of the cut's last interval. 0 when built; 1 when the markers are
 * not where the layout says (missing, out of order, the data ends early: the caller decodes the
 * whole stream, which warns as it always did); -1 when out of memory. */
static int rst_build(const unsigned char *data, size_t size, const rst_layout *l,
                     const rst_cut *cut, rst_buffer *out)
{
    static const unsigned char eoi[2] = {0xFF, 0xD9};
    unsigned w, h, x, y, first, last, written = 0;
    size_t pos = l->scan, start = l->scan;

    out->size = 0;
    if (out->cap < size) { /* a cut is never longer than the stream: one allocation */
        PyMem_RawFree(out->bytes);
        out->cap = 0;
        out->bytes = (unsigned char *)PyMem_RawMalloc(size);
        if (out->bytes == NULL)
            return -1;
        out->cap = size;
    }
    rst_cut_box(l, cut, &x, &y, &w, &h);
    if (rst_put_header(out, data, l, w, h) != 0)
        return -1;
    first = (unsigned)(((unsigned long long)cut->row0 * l->mcus_per_row + cut->col0)
                       / l->interval);
    last = (unsigned)(((unsigned long long)(cut->row1 - 1) * l->mcus_per_row + cut->col1 - 1)
                      / l->interval);
    for (unsigned i = 0;;) {
        const unsigned char *ff = (const unsigned char *)memchr(data + pos, 0xFF, size - pos);
        size_t at, next;
        unsigned char marker;
        if (ff == NULL)
            return 1;
        at = (size_t)(ff - data);
        next = at + 1;
        while (next < size && data[next] == 0xFF)
            next++; /* fill bytes */
        if (next >= size)
            return 1;
        marker = data[next];
        if (marker == 0x00) { /* a stuffed FF data byte */
            pos = next + 1;
            continue;
        }
        if (i >= first && rst_needed(l, cut, i)) {
            unsigned char rst[2] = {0xFF, (unsigned char)(0xD0 + ((written - 1) & 7))};
            if ((written > 0 && rst_put(out, rst, 2) != 0)
                || rst_put(out, data + start, at - start) != 0)
                return -1;
            written++;
        }
        if (i == last)
            break;
        if (marker != 0xD0 + (i & 7))
            return 1;
        i++;
        start = pos = next + 1;
    }
    return rst_put(out, eoi, 2) != 0 ? -1 : 0;
}

/* The cut a region is decoded from: its buffer (kept by the caller between images), and where
 * it starts in output pixels of the whole image. */
typedef struct {
    rst_buffer buffer;
    unsigned x, y; /* the cut's first output pixel */
    int active;    /* the decompressor reads the cut */
} rst_view;

/* With the whole stream's header read into ``cinfo`` and its output size computed
 * (jpeg_calc_output_dimensions), a region [x0, x1) x [y0, y1) in output pixels (clipped): when
 * the stream's restart intervals let that region skip some of it, builds the cut, reads the
 * cut's header into ``cinfo`` (the scale, DCT method, upsampling and output colour space set
 * before are kept) and returns 1, view->x/y saying where the cut starts (the region then starts
 * at x0 - view->x, y0 - view->y in the cut's output). 0: decode the whole stream as usual (the
 * decompressor untouched); -1: out of memory (message set). libjpeg errors longjmp as usual.
 *
 * The cut keeps a margin of 2 x the largest sampling factor output pixels around the region: the
 * fancy upsampler reads one chroma sample beside each pixel, so the pixels of the region equal
 * those of the whole image's decode. Output pixels map to source pixels exactly: libjpeg's
 * scales are k/8 and the cut starts on MCU boundaries (multiples of 8 source pixels). */
static int rst_view_region(struct jpeg_decompress_struct *cinfo, const unsigned char *data,
                           size_t size, unsigned long x0, unsigned long y0, unsigned long x1,
                           unsigned long y1, rst_view *view, char *message, size_t message_size)
{
    rst_layout l;
    rst_cut cut;
    unsigned cx, cy, cw, ch, num, den;
    long margin;
    int status;

    view->active = 0;
    view->x = view->y = 0;
    if (!rst_read_layout(data, size, &l) || l.width != cinfo->image_width
        || l.height != cinfo->image_height)
        return 0;
    /* the scale libjpeg chose: num/8 (num: the luma's DCT scaled size) */
#if JPEG_LIB_VERSION >= 70
    num = (unsigned)cinfo->min_DCT_h_scaled_size;
#else
    num = (unsigned)cinfo->min_DCT_scaled_size;
#endif
    den = 8;
    if (num == 0 || num > 16 || (cinfo->image_width * num + den - 1) / den != cinfo->output_width
        || (cinfo->image_height * num + den - 1) / den != cinfo->output_height)
        return 0;
    margin = 2 * (long)(l.h_max > l.v_max ? l.h_max : l.v_max);
    rst_cut_of(&l, ((long)x0 - margin) * (long)den / (long)num,
               ((long)y0 - margin) * (long)den / (long)num,
               ((long)x1 + margin) * (long)den / (long)num + 1,
               ((long)y1 + margin) * (long)den / (long)num + 1, &cut);
    if (rst_cut_is_whole(&l, &cut))
        return 0;
    status = rst_build(data, size, &l, &cut, &view->buffer);
    if (status < 0) {
        snprintf(message, message_size, "out of memory");
        return -1;
    }
    if (status > 0)
        return 0;
    rst_cut_box(&l, &cut, &cx, &cy, &cw, &ch);
    {
        J_COLOR_SPACE out_color_space = cinfo->out_color_space;
        unsigned int scale_num = cinfo->scale_num, scale_denom = cinfo->scale_denom;
        J_DCT_METHOD dct_method = cinfo->dct_method;
        boolean fancy = cinfo->do_fancy_upsampling;
        jpeg_abort_decompress(cinfo);
        jpeg_mem_src(cinfo, view->buffer.bytes, (unsigned long)view->buffer.size);
        jpeg_read_header(cinfo, TRUE);
        cinfo->out_color_space = out_color_space;
        cinfo->scale_num = scale_num;
        cinfo->scale_denom = scale_denom;
        cinfo->dct_method = dct_method;
        cinfo->do_fancy_upsampling = fancy;
        jpeg_calc_output_dimensions(cinfo);
    }
    view->x = cx * num / den;
    view->y = cy * num / den;
    view->active = 1;
    return 1;
}

#endif
