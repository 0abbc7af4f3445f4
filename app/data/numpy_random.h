/* numpy_random.h: numpy.random.RandomState(seed) as Megatron's datasets use it: the MT19937
 * generator seeded from an integer (numpy's mt19937_seed, Matsumoto-Nishimura init_genrand),
 * its tempered 32-bit output, the legacy bounded integer draw (random_interval: smallest bit
 * mask, rejection), random(), randint, geometric and the legacy in-place shuffle of a 1-D array
 * or list, so that the index arrays built here equal the ones Megatron-Core's gpt_dataset.py
 * builds and the BERT and T5 samples equal masked_dataset.py's, draw for draw. */
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

/* RandomState.random(): a double in [0, 1) from two draws (numpy's mt19937 next_double:
 * (a >> 5) 2^26 + (b >> 6), over 2^53) */
double numpy_random_double(numpy_random_state *s);

/* RandomState.randint(low, high) for int64 (the legacy masked draw: low + interval(high-1-low)) */
int64_t numpy_random_randint(numpy_random_state *s, int64_t low, int64_t high);

/* RandomState.shuffle(a) of a 1-D array of n int64 values: Fisher-Yates from the back,
 * j = random_interval(i) for i = n-1 .. 1 */
void numpy_random_shuffle(numpy_random_state *s, int64_t *a, int64_t n);

/* RandomState.geometric(p) for 0 < p <= 1 (numpy's random_geometric, which the legacy
 * generator calls): p >= 1/3 searches the cdf with one double; below, the inversion
 * ceil(log(1 - U) / log(1 - p)) */
int64_t numpy_random_geometric(numpy_random_state *s, double p);

#endif
