/*
 * numpy's Philox4x64-10 bit generator, as ``numpy.random.Philox(key=(key_hi << 64) | key_lo,
 * counter=[0, 0, sample, epoch])`` makes it, and ``Generator.random``'s doubles from it: the
 * random stream of one sample of one epoch, read without the GIL (plan/draws.h: the draws of
 * both decode paths). tests/decode/test_draws.py checks it against numpy's, the reference.
 */
#ifndef RECPIPE_COMMON_PHILOX_H
#define RECPIPE_COMMON_PHILOX_H

#include <stdint.h>
#include <string.h>

static inline uint64_t mulhilo(uint64_t a, uint64_t b, uint64_t *hi)
{
    __uint128_t product = (__uint128_t)a * b;
    *hi = (uint64_t)(product >> 64);
    return (uint64_t)product;
}

static inline void philox_block(const uint64_t counter[4], const uint64_t key_in[2],
                                uint64_t out[4])
{
    uint64_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
    uint64_t key[2] = {key_in[0], key_in[1]};
    for (int round = 0; round < 10; round++) {
        uint64_t hi0, hi1;
        uint64_t lo0 = mulhilo(0xD2E7470EE14C6C93ULL, c[0], &hi0);
        uint64_t lo1 = mulhilo(0xCA5A826395121157ULL, c[2], &hi1);
        uint64_t next[4] = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
        memcpy(c, next, sizeof c);
        key[0] += 0x9E3779B97F4A7C15ULL;
        key[1] += 0xBB67AE8584CAA73BULL;
    }
    memcpy(out, c, sizeof c);
}

/* Uniform ``which`` of Generator(Philox(key, counter=[0, 0, sample, epoch])).random(n): a new
 * Philox increments the counter before each block of four 64-bit outputs. */
static inline double philox_uniform(const uint64_t key[2], uint64_t sample, uint64_t epoch,
                                    unsigned which)
{
    uint64_t counter[4] = {0, 0, sample, epoch}, block[4];
    uint64_t step = which / 4 + 1;
    counter[0] = step; /* no carry: which < 2**64 - 1 */
    philox_block(counter, key, block);
    return (double)(block[which % 4] >> 11) * (1.0 / 9007199254740992.0);
}

/* The first ``count`` uniforms of the sample's stream (Generator.random(count)). */
static inline void philox_uniforms(const uint64_t key[2], uint64_t sample, uint64_t epoch,
                                   double *u, unsigned count)
{
    uint64_t counter[4] = {0, 0, sample, epoch}, block[4];
    for (unsigned i = 0; i < count; i++) {
        if (i % 4 == 0) {
            counter[0] = i / 4 + 1;
            philox_block(counter, key, block);
        }
        u[i] = (double)(block[i % 4] >> 11) * (1.0 / 9007199254740992.0);
    }
}

#endif
