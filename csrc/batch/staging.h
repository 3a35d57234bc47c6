/* Output kernels of recpipe._batch beyond uint8/float32, kept out of batch/batch.c.
 *
 * float16 output: a sample is rendered as uint8 (the uint8 path, unchanged: the pixel values the
 * Python path normalises) and mapped through a per-run table of 3 x 256 halves computed with the
 * Python path's arithmetic and rounded to nearest even (numpy's and OpenCV's float16 rounding;
 * overflow -> inf, subnormals rounded). Portable C: no F16C needed, so the build states do not
 * grow. */
#ifndef RECPIPE_BATCH_STAGING_H
#define RECPIPE_BATCH_STAGING_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "batch/options.h"
#include "kernels/warp.h" /* float_table */

static inline uint16_t half_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) /* inf or NaN (quiet, payload's top bits kept) */
        return (uint16_t)(sign | 0x7c00u
                          | (magnitude > 0x7f800000u ? 0x0200u | ((magnitude >> 13) & 0x3ffu) : 0u));
    if (magnitude >= 0x477ff000u) /* rounds to 65520 or more: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude < 0x38800000u) { /* below 2^-14: a half subnormal (or zero) */
        if (magnitude < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t exponent = magnitude >> 23;
        uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exponent; /* 14..24: value = mantissa * 2^(exponent-150) */
        uint32_t kept = mantissa >> shift;
        uint32_t rest = mantissa & ((1u << shift) - 1u), half_way = 1u << (shift - 1u);
        if (rest > half_way || (rest == half_way && (kept & 1u)))
            kept++;
        return (uint16_t)(sign | kept);
    }
    /* normal: rebias the exponent (127 -> 15), round 13 dropped mantissa bits to even */
    uint32_t rebased = magnitude - 0x38000000u;
    uint32_t kept = rebased >> 13, rest = rebased & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (kept & 1u)))
        kept++; /* a carry into the exponent is the right result (up to inf, excluded above) */
    return (uint16_t)(sign | kept);
}

/* The options a float16 sample is rendered with first: as uint8 output (the pixel values the
 * Python path normalises, in the output's layout and mirrored), converted by halves_of or
 * floats_of. */
static run_options half_staging(const run_options *opt)
{
    run_options unit = *opt;
    unit.is_float = 0;
    unit.is_half = 0;
    return unit;
}

/* float_table's float32 values (Renderer._write's arithmetic, csrc/kernels/warp.h) as float16, as
 * OpenCV converts them (half_of): cv2.addWeighted to CV_16F rounds every value the same way,
 * last block included. */
static void half_table(const run_options *opt, uint16_t table[3][256])
{
    float values[3][256], tail[3][256];
    float_table(opt->gains, opt->offsets, opt->exact_gains, opt->nchw, values, tail);
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 256; x++)
            table[c][x] = half_of(values[c][x]);
}

/* A sample rendered as uint8 (channels x plane or plane x channels) -> float16 through the
 * table. */
static void halves_of(const uint8_t *restrict from, uint16_t *restrict to, long plane, int nchw,
                      long channels, const uint16_t (*halves)[256])
{
    long step = nchw ? 1 : channels, stride = nchw ? plane : 1;
    for (long c = 0; c < channels; c++) {
        const uint8_t *src = from + c * stride;
        uint16_t *dst = to + c * stride;
        for (long i = 0; i < plane; i++)
            dst[i * step] = halves[c][src[i * step]];
    }
}

#endif
