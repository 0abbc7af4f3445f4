/* numpy_random.h: numpy.random.RandomState(seed) as Megatron's datasets use it: the MT19937
 * generator seeded from an integer (numpy's mt19937_seed, Matsumoto-Nishimura init_genrand),
 * its tempered 32-bit output, the legacy bounded integer draw (random_interval: smallest bit
 * mask, rejection) and the legacy in-place shuffle of a 1-D array, so that index arrays built
 * here equal the ones Megatron-Core's gpt_dataset.py builds, draw for draw. */
#ifndef NUMPY_RANDOM_H
#define NUMPY_RANDOM_H

#include <stdint.h>

enum { MT19937_STATE = 624 };

typedef struct numpy_random_state {
    uint32_t key[MT19937_STATE];
    int pos;
} numpy_random_state;

/* RandomState(seed) for an integer seed in [0, 2^32) */
void numpy_random_seed(numpy_random_state *s, uint32_t seed);

/* the next tempered 32-bit output */
uint32_t numpy_random_next32(numpy_random_state *s);

/* a uniform integer in [0, max] (numpy's legacy random_interval) */
uint64_t numpy_random_interval(numpy_random_state *s, uint64_t max);

/* RandomState.shuffle(a) of a 1-D array of n int64 values: Fisher-Yates from the back,
 * j = random_interval(i) for i = n-1 .. 1 */
void numpy_random_shuffle(numpy_random_state *s, int64_t *a, int64_t n);

#endif
