/*
 * RecordIO records as recpipe._batch reads them without the GIL (MXNet's format, see
 * docs/recordio-compat.md; the Python side is recpipe/io/format.py, io/header.py and
 * decode/labels.py): a record's framing (magic, continuation flag, length, 4-byte padding),
 * its image header (IRHeader: flag, label, id, id2, then ``flag`` float labels) and the labels
 * ImageRecordIter takes (``label_width``), or an imglist's labels looked up by the header's id.
 * Anything unusual (a multi-part record, a malformed one) is left to the Python path, which
 * raises its precise error.
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
#define IMAGE_HEADER 24 /* IRHeader: flag u32, label f32, id u64, id2 u64 */

static int read_span(int fd, unsigned char *into, size_t length, int64_t offset)
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

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float le_float(const unsigned char *p)
{
    uint32_t bits = le32(p);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* The payload of the single-part record filling ``span`` bytes (a following record head may
 * end it); NULL for anything the Python path must look at. */
static const unsigned char *record_payload(const unsigned char *record, size_t span, size_t *length)
{
    if (span < 8)
        return NULL;
    uint32_t magic = le32(record), word = le32(record + 4);
    uint32_t cflag = word >> 29, size = word & ((1u << 29) - 1);
    size_t next = 8 + (((size_t)size + 3) & ~(size_t)3);
    if (magic != RECORD_MAGIC || cflag != 0 || next > span)
        return NULL;
    if (next < span) { /* the index's next offset is further: a record head must follow */
        if (next + 8 > span || le32(record + next) != RECORD_MAGIC
            || (le32(record + next + 4) >> 29) > 1)
            return NULL;
    }
    *length = size;
    return record + 8;
}

/* How many bytes of the ``span`` at ``start`` ``record_payload`` looks at: the record its head
 * announces and the head after it, not the whole span (unindexed records may follow the record
 * up to the next indexed offset). Small spans are read whole in one call; 0 on a read error. */
static size_t record_extent(int fd, int64_t start, size_t span)
{
    unsigned char head[8];
    if (span <= (64u << 10))
        return span;
    if (read_span(fd, head, sizeof head, start))
        return 0;
    size_t size = le32(head + 4) & ((1u << 29) - 1);
    size_t extent = 8 + ((size + 3) & ~(size_t)3) + 8;
    return extent < span ? extent : span;
}

/* Labels into ``out`` (label_width floats) by ImageRecordIter's rules; -1: Python's to say. */
static int record_labels(const unsigned char *payload, size_t length, long label_width, float *out,
                     size_t *image_at)
{
    if (length < IMAGE_HEADER)
        return -1;
    uint32_t flag = le32(payload);
    if (flag == 0) {
        if (label_width != 1)
            return -1;
        out[0] = le_float(payload + 4);
        *image_at = IMAGE_HEADER;
        return 0;
    }
    if ((size_t)flag > (length - IMAGE_HEADER) / 4 || (long)flag < label_width)
        return -1;
    for (long i = 0; i < label_width; i++)
        out[i] = le_float(payload + IMAGE_HEADER + 4 * i);
    *image_at = IMAGE_HEADER + 4 * (size_t)flag;
    return 0;
}

/* Labels by the header's image id (an imglist's): ``ids`` (ascending, ``count``) and
 * ``values`` (``width`` floats a row); -1 when the id is not listed (Python's to say). */
static int record_id_labels(const unsigned char *payload, size_t length, const uint64_t *ids,
                            const float *values, ptrdiff_t count, long width, float *out,
                            size_t *image_at)
{
    if (length < IMAGE_HEADER)
        return -1;
    uint32_t flag = le32(payload);
    uint64_t id = (uint64_t)le32(payload + 8) | (uint64_t)le32(payload + 12) << 32;
    if ((size_t)flag > (length - IMAGE_HEADER) / 4)
        return -1;
    ptrdiff_t low = 0, high = count;
    while (low < high) { /* the first id >= id */
        ptrdiff_t mid = low + (high - low) / 2;
        if (ids[mid] < id)
            low = mid + 1;
        else
            high = mid;
    }
    if (low == count || ids[low] != id)
        return -1;
    memcpy(out, values + (size_t)low * (size_t)width, sizeof(float) * (size_t)width);
    *image_at = IMAGE_HEADER + 4 * (size_t)flag;
    return 0;
}

#endif
