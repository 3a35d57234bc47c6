/*
 * Restart intervals of baseline JPEGs (prototype): read the layout of a single-scan Huffman JPEG
 * with a DRI segment, and build the smaller JPEG that holds only the restart intervals a region
 * needs (header with the SOF's size changed, the needed intervals' entropy-coded bytes, restart
 * markers renumbered, EOI). Decoding that JPEG gives the region's pixels of the whole image
 * (intervals are independent: the DC predictions restart at every marker) once the cut keeps
 * the rows and columns the upsampler reads beside the region.
 *
 * No libjpeg here: plain byte walking. Allocation through RST_REALLOC / RST_FREE.
 */
#ifndef RECPIPE_JPEG_RESTART_H
#define RECPIPE_JPEG_RESTART_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifndef RST_REALLOC
#define RST_REALLOC realloc
#define RST_FREE free
#endif

typedef struct {
    unsigned width, height;        /* the SOF's size */
    unsigned mcu_w, mcu_h;         /* pixels of one MCU */
    unsigned mcus_per_row, mcu_rows;
    unsigned interval;             /* DRI: MCUs per restart interval (> 0) */
    unsigned intervals;            /* restart intervals in the scan */
    unsigned row_group;            /* MCU rows from one interval start at a row's start to the next */
    unsigned col_mcus;             /* MCUs of one column cut (the interval when it divides a row) */
    unsigned h_max, v_max;         /* the largest sampling factors */
    size_t sof_size_at;            /* offset of the SOF's height (2 bytes) and width (2 bytes) */
    size_t scan;                   /* first byte of the entropy-coded data */
} rst_layout;

/* MCU rows [row0, row1) and MCU columns [col0, col1) of a cut. */
typedef struct {
    unsigned row0, row1, col0, col1;
} rst_cut;

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
 * whose first scan holds every component and which has restart intervals that let a region skip
 * something (rows or columns); ``layout`` is then filled. 0 otherwise (no DRI, progressive,
 * arithmetic, lossless, DNL, several scans, a malformed header): decode it whole as usual. */
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
            return 0; /* TEM, RSTn, SOI or EOI in a header: not ours to fix */
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
    if (components == 1) { /* one component: its MCU is one block */
        h_max = v_max = 1;
    }
    layout->h_max = h_max;
    layout->v_max = v_max;
    layout->mcu_w = 8 * h_max;
    layout->mcu_h = 8 * v_max;
    layout->mcus_per_row = (layout->width + layout->mcu_w - 1) / layout->mcu_w;
    layout->mcu_rows = (layout->height + layout->mcu_h - 1) / layout->mcu_h;
    layout->interval = interval;
    {
        unsigned long long mcus = (unsigned long long)layout->mcus_per_row * layout->mcu_rows;
        layout->intervals = (unsigned)((mcus + interval - 1) / interval);
    }
    layout->row_group = interval / rst_gcd(interval, layout->mcus_per_row);
    layout->col_mcus = layout->mcus_per_row % interval == 0 ? interval : layout->mcus_per_row;
    return layout->row_group < layout->mcu_rows || layout->col_mcus < layout->mcus_per_row;
}

/* The cut that holds source pixels [x0, x1) x [y0, y1) (clipped to the image), widened to where
 * restart intervals start a row (rows) and to whole intervals (columns). */
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
    cut->row1 = ((unsigned)((y1 + l->mcu_h - 1) / l->mcu_h) + g - 1) / g * g;
    if (cut->row1 > l->mcu_rows)
        cut->row1 = l->mcu_rows;
    cut->col0 = (unsigned)(x0 / l->mcu_w) / c * c;
    cut->col1 = ((unsigned)((x1 + l->mcu_w - 1) / l->mcu_w) + c - 1) / c * c;
    if (cut->col1 > l->mcus_per_row)
        cut->col1 = l->mcus_per_row;
}

/* 1 when ``cut`` is the whole image (nothing to skip). */
static int rst_cut_is_whole(const rst_layout *l, const rst_cut *cut)
{
    return cut->row0 == 0 && cut->row1 == l->mcu_rows && cut->col0 == 0
           && cut->col1 == l->mcus_per_row;
}

/* The cut's first pixel (source pixels) and size. */
static void rst_cut_box(const rst_layout *l, const rst_cut *cut, unsigned *x, unsigned *y,
                        unsigned *w, unsigned *h)
{
    unsigned right = cut->col1 * l->mcu_w, bottom = cut->row1 * l->mcu_h;
    *x = cut->col0 * l->mcu_w;
    *y = cut->row0 * l->mcu_h;
    *w = (right < l->width ? right : l->width) - *x;
    *h = (bottom < l->height ? bottom : l->height) - *y;
}

typedef struct {
    unsigned char *bytes;
    size_t size, cap;
} rst_buffer;

static int rst_put(rst_buffer *out, const unsigned char *bytes, size_t n)
{
    if (out->size + n > out->cap) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap < out->size + n)
            cap *= 2;
        unsigned char *grown = (unsigned char *)RST_REALLOC(out->bytes, cap);
        if (grown == NULL)
            return -1;
        out->bytes = grown;
        out->cap = cap;
    }
    memcpy(out->bytes + out->size, bytes, n);
    out->size += n;
    return 0;
}

/* The header of the cut's JPEG: the segments before the entropy-coded data, without APP1-APP13,
 * APP15 and COM (libjpeg reads only APP0 JFIF and APP14 Adobe), the SOF's size changed. */
static int rst_put_header(rst_buffer *out, const unsigned char *data, const rst_layout *l,
                          unsigned w, unsigned h)
{
    size_t pos = 2, sof = 0;
    if (rst_put(out, data, 2) != 0)
        return -1;
    while (pos < l->scan) {
        size_t start = pos, length;
        unsigned marker;
        while (data[pos] == 0xFF)
            pos++;
        marker = data[pos++];
        length = rst_be16(data + pos);
        pos += length;
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

/* 1 when interval ``index`` is part of ``cut``. */
static int rst_needed(const rst_layout *l, const rst_cut *cut, unsigned index)
{
    unsigned long long mcu = (unsigned long long)index * l->interval;
    unsigned row = (unsigned)(mcu / l->mcus_per_row), col = (unsigned)(mcu % l->mcus_per_row);
    return row >= cut->row0 && row < cut->row1 && col >= cut->col0 && col < cut->col1;
}

/* ``out`` (empty, or a buffer to reuse) := the JPEG of ``cut``: header, the needed intervals'
 * bytes with RST0..7 renumbered between them, EOI. Walks the entropy-coded data from its start
 * with memchr (stuffed FF 00 bytes and fill bytes skipped, as libjpeg reads them) up to the end
 * of the cut's last interval. 0 when built; 1 when the markers are not where the layout says
 * (missing, out of order, the scan ends early: decode the whole stream as usual, which warns
 * as it always did); -1 when out of memory. */
static int rst_build(const unsigned char *data, size_t size, const rst_layout *l,
                     const rst_cut *cut, rst_buffer *out)
{
    unsigned w, h, x, y, index, last, written = 0;
    size_t pos = l->scan, start = l->scan;
    unsigned long long last_mcu;

    out->size = 0;
    rst_cut_box(l, cut, &x, &y, &w, &h);
    if (rst_put_header(out, data, l, w, h) != 0)
        return -1;
    last_mcu = (unsigned long long)(cut->row1 - 1) * l->mcus_per_row + cut->col1 - 1;
    last = (unsigned)(last_mcu / l->interval);
    index = (unsigned)(((unsigned long long)cut->row0 * l->mcus_per_row + cut->col0)
                       / l->interval);
    /* intervals before the first needed one: only their markers are looked for */
    for (unsigned i = 0;;) {
        const unsigned char *ff = (const unsigned char *)memchr(data + pos, 0xFF, size - pos);
        size_t at, next;
        unsigned char marker;
        if (ff == NULL)
            return 1;
        at = (size_t)(ff - data);
        next = at + 1;
        while (next < size && data[next] == 0xFF)
            next++;
        if (next >= size)
            return 1;
        marker = data[next];
        if (marker == 0x00) { /* a stuffed FF data byte */
            pos = next + 1;
            continue;
        }
        if (i >= index && rst_needed(l, cut, i)) {
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
    {
        unsigned char eoi[2] = {0xFF, 0xD9};
        if (rst_put(out, eoi, 2) != 0)
            return -1;
    }
    return 0;
}

#endif
