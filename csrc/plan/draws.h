/*
 * The random draws of a sample, defined once for both decode paths (recpipe._plan.draws for the
 * Python path's Planner, recpipe._batch for its runs): the sample's Philox stream
 * (common/philox.h: numpy's Philox4x64-10 keyed by the seed, its counter at (sample, epoch)),
 * its first N_UNIFORM doubles as Generator.random(N_UNIFORM) gives them and, for PCA lighting,
 * Generator.standard_normal(3) drawn after them through numpy's own ziggurat
 * (random_standard_normal from numpy's libnpyrandom, linked when setup.py finds it:
 * RECPIPE_NPYRANDOM; PCA_NATIVE says whether it was; without it the Python path draws the
 * normals with numpy and recpipe._batch leaves PCA lighting to it). numpy's Generator is the
 * tests' reference (tests/decode/test_draws.py), not a second source of recpipe's draws.
 */
#ifndef RECPIPE_PLAN_DRAWS_H
#define RECPIPE_PLAN_DRAWS_H

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

static inline uint64_t stream_next64(void *state)
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

static inline uint32_t stream_next32(void *state) /* not used by the normal sampler */
{
    return (uint32_t)(stream_next64(state) >> 32);
}

static inline double stream_double(void *state)
{
    return (double)(stream_next64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Planner.plan's ``rng.standard_normal(3)`` after ``rng.random(N_UNIFORM)``. */
static inline void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch,
                               double out[3])
{
    philox_stream s = {key, sample, epoch, N_UNIFORM, UINT64_MAX, {0}};
    bitgen_t bitgen = {&s, stream_next64, stream_next32, stream_double, stream_next64};
    for (int i = 0; i < 3; i++)
        out[i] = random_standard_normal(&bitgen);
}
#else
#define PCA_NATIVE 0
static inline void pca_normals(const uint64_t key[2], uint64_t sample, uint64_t epoch,
                               double out[3])
{
    (void)key, (void)sample, (void)epoch;
    out[0] = out[1] = out[2] = 0.0;
}
#endif

/* The draws of sample ``sample`` of ``epoch``: its N_UNIFORM uniforms into ``u`` and, when
 * ``normals`` is not NULL, PCA lighting's three normals; 0 when the normals could not be drawn
 * here (PCA_NATIVE 0: numpy's sampler is not linked). */
static inline int sample_draws(const uint64_t key[2], uint64_t sample, uint64_t epoch,
                               double u[N_UNIFORM], double normals[3])
{
    philox_uniforms(key, sample, epoch, u, N_UNIFORM);
    if (normals == NULL)
        return 1;
    pca_normals(key, sample, epoch, normals);
    return PCA_NATIVE;
}

#endif
