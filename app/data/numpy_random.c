/* numpy_random.c: MT19937 and numpy's legacy RandomState draws (see numpy_random.h). */
#include "app/data/numpy_random.h"

#include <math.h>

enum { MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void numpy_random_seed(numpy_random_state *s, uint32_t seed) {
    for (int i = 0; i < MT19937_STATE; i++) {
        s->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)(i + 1);
    }
    s->pos = MT19937_STATE;
}

/* regenerate the 624 words of state (the twist) */
static void generate(numpy_random_state *s) {
    uint32_t *k = s->key;
    int i;
    for (i = 0; i < MT19937_STATE - MT_M; i++) {
        uint32_t y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + MT_M] ^ (y >> 1) ^ (-(y & 1) & MT_MATRIX_A);
    }
    for (; i < MT19937_STATE - 1; i++) {
        uint32_t y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + (MT_M - MT19937_STATE)] ^ (y >> 1) ^ (-(y & 1) & MT_MATRIX_A);
    }
    uint32_t y = (k[MT19937_STATE - 1] & MT_UPPER) | (k[0] & MT_LOWER);
    k[MT19937_STATE - 1] = k[MT_M - 1] ^ (y >> 1) ^ (-(y & 1) & MT_MATRIX_A);
    s->pos = 0;
}

uint32_t numpy_random_next32(numpy_random_state *s) {
    if (s->pos == MT19937_STATE) generate(s);
    uint32_t y = s->key[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t numpy_random_interval(numpy_random_state *s, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffull) {
        while ((value = (numpy_random_next32(s) & mask)) > max) {}
    } else {
        /* numpy's mt19937 next64: the first draw is the high word */
        for (;;) {
            uint64_t high = numpy_random_next32(s);
            value = ((high << 32) | numpy_random_next32(s)) & mask;
            if (value <= max) break;
        }
    }
    return value;
}

double numpy_random_double(numpy_random_state *s) {
    uint32_t a = numpy_random_next32(s) >> 5, b = numpy_random_next32(s) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

int64_t numpy_random_geometric(numpy_random_state *s, double p) {
    if (p >= 0.333333333333333333333333) {
        double u = numpy_random_double(s), prod = p, sum = p, q = 1.0 - p;
        int64_t x = 1;
        while (u > sum) {
            prod *= q;
            sum += prod;
            x++;
        }
        return x;
    }
    return (int64_t)ceil(log(1.0 - numpy_random_double(s)) / log(1.0 - p));
}

int64_t numpy_random_randint(numpy_random_state *s, int64_t low, int64_t high) {
    return low + (int64_t)numpy_random_interval(s, (uint64_t)(high - 1 - low));
}

void numpy_random_shuffle(numpy_random_state *s, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)numpy_random_interval(s, (uint64_t)i);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
