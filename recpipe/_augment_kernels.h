/* Output kernels of recpipe._batch beyond uint8/float32 (issue 21 item 2), kept out of _batch.c.
 *
 * float16 output: a sample is rendered as float32 (the float32 path, unchanged) and each value
 * converted to IEEE half with round-to-nearest-even, which is what numpy's float32 -> float16
 * cast and OpenCV's CV_16F conversion do (overflow -> inf, NaN kept quiet, subnormals rounded).
 * Portable C: no F16C needed, so the build states do not grow. */
#ifndef RECPIPE_AUGMENT_KERNELS_H
#define RECPIPE_AUGMENT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

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

/* The options a float16 sample is rendered with first: unit gains, so that the float32 writers
 * (mirror, layout) leave the pixel values themselves for halves_of. */
static run_options half_staging(const run_options *opt)
{
    run_options unit = *opt;
    for (int c = 0; c < 3; c++) {
        unit.gains[c] = 1.0f;
        unit.offsets[c] = 0.0f;
    }
    return unit;
}

/* A rendered sample (pixel values as float32, 3 x plane or plane x 3) normalised into float16
 * with the Python path's (OpenCV's) arithmetic: NCHW, cv2.addWeighted to CV_16F, is one fused
 * float32 multiply-add then float16; NHWC, cv2.multiply to CV_32F then cv2.add to CV_16F,
 * rounds value * gain (in double) to float32, adds the float32 offset in float32, then float16. */
static void halves_of(const float *restrict from, uint16_t *restrict to, long plane, int nchw,
                      const float *gains, const float *offsets, const double *exact_gains)
{
    if (nchw) {
        for (long c = 0; c < 3; c++)
            for (long i = c * plane; i < (c + 1) * plane; i++)
                to[i] = half_of(fmaf(from[i], gains[c], offsets[c]));
        return;
    }
    for (long i = 0; i < 3 * plane; i++) {
        long c = i % 3;
        float scaled = (float)((double)from[i] * exact_gains[c]);
        to[i] = half_of(scaled + offsets[c]);
    }
}

#endif
