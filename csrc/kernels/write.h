/*
 * The writers of a batch slot from rendered pixels, recpipe's one definition of the output
 * values (the Python path's renderer and recpipe._batch both write through them):
 *
 * - float_table/floats_of: uint8 values (a region already mirrored and laid out) to float32,
 *   per value and channel: NCHW ``fmaf(x, gain, offset)`` in blocks of 256 values, a block
 *   shorter than 8 values ``x * gain`` rounded, plus offset; NHWC ``(float)(x * gain_in_double)``
 *   plus offset (OpenCV's addWeighted and multiply/add arithmetic on this machine, where
 *   tests/decode checks them against cv2);
 * - half_table/halves_of: the same values rounded to float16 (nearest even, overflow to inf,
 *   subnormals rounded): portable C, no F16C needed;
 * - write_half_planes: colour-jittered float32 planes to float16;
 * - kernels/chw_rows.h (uint8 RGB rows to float32 CHW in one pass, mirror fused) and
 *   kernels/planes.h's write_planes (float32 planes to any slot) are the others.
 */
#ifndef RECPIPE_KERNELS_WRITE_H
#define RECPIPE_KERNELS_WRITE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/chw_rows.h"
#include "kernels/planes.h"

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

/* The float32 value of each pixel value 0-255 in each channel (``table``). NCHW planes are
 * cv2.addWeighted's: it converts and computes a plane in blocks of ARITH_BLOCK values (1024
 * bytes of float32), fmaf(x, gain, offset) in registers of ARITH_LANES values (a block's last,
 * partial register redone over the block's last ARITH_LANES values), so only a block shorter
 * than one register is computed by its scalar loop, as x * gain rounded, plus offset
 * (``tail``): the last plane % 256 values when that is 1 to 7. */
#define ARITH_BLOCK 256
#define ARITH_LANES 8

static void float_table(const float gains[3], const float offsets[3],
                        const double exact_gains[3], int nchw, float table[3][256],
                        float tail[3][256])
{
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 256; x++) {
            volatile float product = (float)x * gains[c];
            table[c][x] = nchw ? fmaf((float)x, gains[c], offsets[c])
                               : (float)((double)x * exact_gains[c]) + offsets[c];
            tail[c][x] = product + offsets[c];
        }
}

static void floats_of(const uint8_t *restrict from, float *restrict to, long plane, int nchw,
                      long channels, const float table[3][256], const float tail[3][256])
{
    if (nchw) {
        long rest = plane % ARITH_BLOCK;
        long tail_from = rest > 0 && rest < ARITH_LANES ? plane - rest : plane;
        for (long c = 0; c < channels; c++) {
            const uint8_t *src = from + c * plane;
            float *dst = to + c * plane;
            for (long i = 0; i < tail_from; i++)
                dst[i] = table[c][src[i]];
            for (long i = tail_from; i < plane; i++)
                dst[i] = tail[c][src[i]];
        }
        return;
    }
    for (long i = 0; i < plane; i++)
        for (long c = 0; c < channels; c++)
            to[channels * i + c] = table[c][from[channels * i + c]];
}


/* float_table's values as float16 (OpenCV converts them so: cv2.addWeighted to CV_16F rounds
 * every value the same way, last block included). */
static void half_table(const float gains[3], const float offsets[3], const double exact_gains[3],
                       int nchw, uint16_t table[3][256])
{
    float values[3][256], tail[3][256];
    float_table(gains, offsets, exact_gains, nchw, values, tail);
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 256; x++)
            table[c][x] = half_of(values[c][x]);
}

/* uint8 values (channels x plane or plane x channels) -> float16 through the table. */
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

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define WRITE_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define WRITE_FMA_CLONES
#endif

/* Jittered planes (3 x h x w float32 values in [0, 255]) into a float16 slot: NCHW one fused
 * float32 multiply-add (cv2.addWeighted to CV_16F), NHWC value * gain in double rounded to
 * float32, plus the offset in float32 (cv2.multiply then cv2.add); then float16. */
WRITE_FMA_CLONES static void write_half_planes(const float *planes, long h, long w,
                                               const float gains[3], const float offsets[3],
                                               const double exact_gains[3], int nchw, int mirror,
                                               uint16_t *dst)
{
    long n = h * w;
    for (long c = 0; c < 3; c++) {
        float gain = gains[c], offset = offsets[c];
        double exact = exact_gains[c];
        for (long y = 0; y < h; y++) {
            const float *row = planes + c * n + y * w;
            for (long x = 0; x < w; x++) {
                float v = row[x];
                float value = nchw ? fmaf(v, gain, offset) : (float)((double)v * exact) + offset;
                long column = mirror ? w - 1 - x : x;
                long at = nchw ? c * n + y * w + column : (y * w + column) * 3 + c;
                dst[at] = half_of(value);
            }
        }
    }
}

#endif
