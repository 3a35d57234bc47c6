/*
 * The random draws of a run's samples: numpy's Philox stream of each sample (common/philox.h)
 * and, for PCA lighting, Generator.standard_normal(3) drawn after the sample's N_UNIFORM
 * uniforms through numpy's own ziggurat (random_standard_normal from numpy's libnpyrandom,
 * linked when setup.py finds it: RECPIPE_NPYRANDOM; PCA_NATIVE says whether it was), so that a
 * sample's plan equals the Python path's (recpipe.decode.augment.rng).
 */
#ifndef RECPIPE_BATCH_DRAWS_H
#define RECPIPE_BATCH_DRAWS_H

#include <stdint.h>

#include "common/philox.h"
#include "plan/plan.h"

#ifdef RECPIPE_NPYRANDOM
#include <numpy/random/distributions.h>
#define PCA_NATIVE 1

/* numpy's Philox state for the outputs after the sample's first ``next`` 64-bit words (the
 * uniforms): counter [block + 1, 0, sample, epoch], four words a block. */
typedef struct {
    const uint64_t *key;
    uint64_t sample, epoch, next, cached_block;
    uint64_t block[4];
} philox_stream;

static uint64_t stream_next64(void *state)
{
    philox_stream *s = state;
    uint64_t block_index = s->next / 4;
    if (block_index != s->cached_block) {
        uint64_t counter[4] = {block_index + 1, 0, s->sample, s->epoch};
        philox_block(counter, s->key, s->block);
        s->cached_block = block_index;
    }
    return s->block[s->next++ % 4];
}

static uint32_t stream_next32(void *state) /* not used by the normal sampler */
{
    return (uint32_t)(stream_next64(state) >> 32);
}

static double stream_double(void *state)
{
    return (double)(stream_next64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Planner.plan's ``rng.standard_normal(3)`` after ``rng.random(N_UNIFORM)``. */
static void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch, double out[3])
{
    philox_stream s = {key, sample, epoch, N_UNIFORM, UINT64_MAX, {0}};
    bitgen_t bitgen = {&s, stream_next64, stream_next32, stream_double, stream_next64};
    for (int i = 0; i < 3; i++)
        out[i] = random_standard_normal(&bitgen);
}
#else
#define PCA_NATIVE 0
static void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch, double out[3])
{
    (void)key, (void)sample, (void)epoch;
    out[0] = out[1] = out[2] = 0.0;
}
#endif

#endif
