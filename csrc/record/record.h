/*
 * RecordIO records (MXNet's format, docs/recordio-compat.md), defined once: a part's framing
 * (magic, continuation flag, length, 4-byte padding), the image header (IRHeader: flag, label,
 * id, id2, then ``flag`` float labels), the label rule ImageRecordIter applies (``label_width``)
 * and an imglist's labels looked up by the header's id. recpipe._batch reads its records with
 * them without the GIL; recpipe._kernels binds them for the Python side (io/format/framing.py's
 * decode_head and padded, io/format/header.py's unpack_header, decode/labels.py's
 * header_labels and IdLabels), which only turns their statuses into its precise errors.
 * Anything unusual in a run (a multi-part record, a malformed one) is left to the Python
 * path, which raises that error.
 */
#ifndef RECPIPE_RECORD_RECORD_H
#define RECPIPE_RECORD_RECORD_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define RECORD_MAGIC 0xced7230aU
#define RECORD_HEAD 8                          /* a part head: magic u32, lrec u32 */
#define RECORD_MAX_LENGTH ((1u << 29) - 1)     /* lrec's low 29 bits */
#define IMAGE_HEADER 24 /* IRHeader: flag u32, label f32, id u64, id2 u64 */

static inline int read_span(int fd, unsigned char *into, size_t length, int64_t offset)
{
    size_t got = 0;
    while (got < length) {
        ssize_t n = pread(fd, into + got, length - got, (off_t)(offset + (int64_t)got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline float le_float(const unsigned char *p)
{
    uint32_t bits = le32(p);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* ``length`` rounded up to a multiple of 4: a part's bytes on disk after its head. */
static inline int64_t record_padded(int64_t length)
{
    return (int64_t)(((uint64_t)length + 3) & ~(uint64_t)3);
}

/* The part head at ``p`` (RECORD_HEAD bytes): its magic word, continuation flag (0 whole,
 * 1 first, 2 middle, 3 last) and length. */
typedef struct {
    uint32_t magic, cflag, length;
} record_head;

static inline record_head record_head_at(const unsigned char *p)
{
    uint32_t lrec = le32(p + 4);
    record_head h = {le32(p), lrec >> 29, lrec & RECORD_MAX_LENGTH};
    return h;
}

/* The image header at the start of a payload of ``length`` bytes. */
typedef struct {
    uint32_t flag;  /* 0: one label (``label``); else the number of packed float labels */
    float label;
    uint64_t id, id2;
    size_t labels_end; /* where the image starts: after the header and the packed labels */
} image_header;

enum { HEADER_OK = 0, HEADER_SHORT = -1, HEADER_LABELS_PAST_END = -2 };

/* HEADER_OK with ``h`` filled; HEADER_SHORT when the payload is shorter than the header (``h``
 * untouched); HEADER_LABELS_PAST_END when its flag announces more labels than the payload has
 * (``h`` filled but for labels_end). */
static inline int image_header_of(const unsigned char *payload, size_t length, image_header *h)
{
    if (length < IMAGE_HEADER)
        return HEADER_SHORT;
    h->flag = le32(payload);
    h->label = le_float(payload + 4);
    h->id = le64(payload + 8);
    h->id2 = le64(payload + 16);
    if ((size_t)h->flag > (length - IMAGE_HEADER) / 4)
        return HEADER_LABELS_PAST_END;
    h->labels_end = IMAGE_HEADER + 4 * (size_t)h->flag;
    return HEADER_OK;
}

/* ImageRecordIter's labels of a header with ``flag`` for ``label_width``: the header's one
 * label (LABELS_SCALAR, flag 0 and width 1) or the first ``label_width`` packed ones
 * (LABELS_PACKED; MXNet wants exactly label_width, extra trailing labels are ignored here);
 * LABELS_NOT_SCALAR (flag 0, width > 1) and LABELS_TOO_FEW (fewer packed than the width) are
 * the setting's errors, not the record's. */
enum { LABELS_SCALAR = 0, LABELS_PACKED = 1, LABELS_NOT_SCALAR = -1, LABELS_TOO_FEW = -2 };

static inline int label_rule(int64_t flag, int64_t label_width)
{
    if (flag == 0)
        return label_width == 1 ? LABELS_SCALAR : LABELS_NOT_SCALAR;
    return flag < label_width ? LABELS_TOO_FEW : LABELS_PACKED;
}

/* The row of ``id`` in ``ids`` (``count``, ascending): the first equal one, or -1. */
static inline ptrdiff_t id_row(const uint64_t *ids, ptrdiff_t count, uint64_t id)
{
    ptrdiff_t low = 0, high = count;
    while (low < high) { /* the first id >= id */
        ptrdiff_t mid = low + (high - low) / 2;
        if (ids[mid] < id)
            low = mid + 1;
        else
            high = mid;
    }
    return low < count && ids[low] == id ? low : -1;
}

/* The payload of the single-part record filling ``span`` bytes (a following record head may
 * end it); NULL for anything the Python path must look at. */
static inline const unsigned char *record_payload(const unsigned char *record, size_t span,
                                                  size_t *length)
{
    if (span < RECORD_HEAD)
        return NULL;
    record_head h = record_head_at(record);
    size_t next = RECORD_HEAD + (size_t)record_padded(h.length);
    if (h.magic != RECORD_MAGIC || h.cflag != 0 || next > span)
        return NULL;
    if (next < span) { /* the index's next offset is further: a record head must follow */
        if (next + RECORD_HEAD > span)
            return NULL;
        record_head after = record_head_at(record + next);
        if (after.magic != RECORD_MAGIC || after.cflag > 1)
            return NULL;
    }
    *length = h.length;
    return record + RECORD_HEAD;
}

/* How many bytes of the ``span`` at ``start`` ``record_payload`` looks at: the record its head
 * announces and the head after it, not the whole span (unindexed records may follow the record
 * up to the next indexed offset). Small spans are read whole in one call; 0 on a read error. */
static inline size_t record_extent(int fd, int64_t start, size_t span)
{
    unsigned char head[RECORD_HEAD];
    if (span <= (64u << 10))
        return span;
    if (read_span(fd, head, sizeof head, start))
        return 0;
    size_t extent = RECORD_HEAD + (size_t)record_padded(record_head_at(head).length) + RECORD_HEAD;
    return extent < span ? extent : span;
}

/* Labels into ``out`` (label_width floats) by ImageRecordIter's rules; -1: Python's to say. */
static inline int record_labels(const unsigned char *payload, size_t length, long label_width,
                                float *out,
                         size_t *image_at)
{
    image_header h;
    if (image_header_of(payload, length, &h) != HEADER_OK)
        return -1;
    switch (label_rule(h.flag, label_width)) {
    case LABELS_SCALAR:
        out[0] = h.label;
        break;
    case LABELS_PACKED:
        for (long i = 0; i < label_width; i++)
            out[i] = le_float(payload + IMAGE_HEADER + 4 * i);
        break;
    default:
        return -1;
    }
    *image_at = h.labels_end;
    return 0;
}

/* Labels by the header's image id (an imglist's): ``ids`` (ascending, ``count``) and
 * ``values`` (``width`` floats a row); -1 when the id is not listed (Python's to say). */
static inline int record_id_labels(const unsigned char *payload, size_t length,
                                   const uint64_t *ids,
                            const float *values, ptrdiff_t count, long width, float *out,
                            size_t *image_at)
{
    image_header h;
    if (image_header_of(payload, length, &h) != HEADER_OK)
        return -1;
    ptrdiff_t row = id_row(ids, count, h.id);
    if (row < 0)
        return -1;
    memcpy(out, values + (size_t)row * (size_t)width, sizeof(float) * (size_t)width);
    *image_at = h.labels_end;
    return 0;
}

#endif
