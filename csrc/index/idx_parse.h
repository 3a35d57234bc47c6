/* The .idx parser's fast path: plain ``key<TAB>offset`` lines of decimal integers (MXNet's
 * write_idx, im2rec, recpipe's writers) into int64 keys and offsets, at memory speed, with no
 * Python object per line.
 *
 * What it takes: lines ``[+-]?digits TAB [+-]?digits``, each ended by ``\n`` (or ``\r\n``;
 * the last line may have no ending), every value within int64 and every offset >= 0. Anything
 * else (blank lines, spaces, string keys, a key outside int64, junk) is refused as a whole:
 * the caller's text parse then reads the file line by line and names the first bad line, so
 * the precise errors stay in one place (recpipe/io/sidecars/index.py).
 *
 * idx_count_lines(data, size) -> the number of lines; idx_parse(data, size, keys, offsets,
 * count, first) fills ``count`` lines (the lines ``first``.. of the file: a file may come in
 * chunks cut at line ends) and returns IDX_IDENTITY (every key is its line's number from 0),
 * IDX_KEYED (not) or IDX_REFUSED. Neither touches Python: the binding releases the
 * GIL around them.
 */
#ifndef RECPIPE_INDEX_IDX_PARSE_H
#define RECPIPE_INDEX_IDX_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { IDX_REFUSED = -1, IDX_KEYED = 0, IDX_IDENTITY = 1 };

/* Lines in data[0, size): its newlines, plus one for a last line without one. */
static inline int64_t idx_count_lines(const char *data, size_t size)
{
    int64_t lines = 0;
    const char *p = data, *end = data + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        lines++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return lines;
}

/* One signed decimal int64 at *p (before ``end``), stopped by ``stop``: 0 and the value in
 * *out, *p moved past it; -1 when there are no digits, another character, more than 19
 * digits (which leading zeros may make: the text parse decides those) or a value outside
 * int64. Up to 19 digits fit in a uint64: no overflow check a digit. */
static inline int idx_number(const char **p, const char *end, char stop, int64_t *out)
{
    const char *s = *p;
    int negative = 0;
    if (s < end && (*s == '+' || *s == '-')) {
        negative = *s == '-';
        s++;
    }
    const char *digits = s;
    uint64_t value = 0;
    while (s < end) {
        unsigned digit = (unsigned)(unsigned char)*s - '0';
        if (digit > 9)
            break;
        value = value * 10 + digit;
        s++;
    }
    if (s == digits || s - digits > 19)
        return -1;
    /* the number ends the field: at ``stop``, at a line's end, or at the end of the data */
    if (s < end && *s != stop && !(stop == '\n' && *s == '\r'))
        return -1;
    if (negative ? value > (uint64_t)INT64_MAX + 1 : value > (uint64_t)INT64_MAX)
        return -1;
    *out = negative ? (int64_t)(0 - value) : (int64_t)value;
    *p = s;
    return 0;
}

/* Parse ``count`` lines (idx_count_lines) of data[0, size), lines ``first``.. of the file,
 * into keys[] and offsets[]. */
static inline int idx_parse(const char *data, size_t size, int64_t *keys, int64_t *offsets,
                            int64_t count, int64_t first)
{
    const char *p = data, *end = data + size;
    int identity = 1;
    for (int64_t i = 0; i < count; i++) {
        int64_t key, offset;
        if (idx_number(&p, end, '\t', &key) || p >= end || *p != '\t')
            return IDX_REFUSED;
        p++;
        if (idx_number(&p, end, '\n', &offset) || offset < 0)
            return IDX_REFUSED;
        if (p < end && *p == '\r') {
            p++;
            if (p >= end || *p != '\n')
                return IDX_REFUSED; /* a lone carriage return: the text parse decides */
        }
        if (p < end)
            p++; /* the newline */
        else if (i != count - 1)
            return IDX_REFUSED;
        keys[i] = key;
        offsets[i] = offset;
        identity &= key == first + i;
    }
    return p == end ? (identity ? IDX_IDENTITY : IDX_KEYED) : IDX_REFUSED;
}

#endif
