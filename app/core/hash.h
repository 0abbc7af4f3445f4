/* hash.h: FNV-1a, 64 bits: the project's one non-cryptographic hash (cache keys of dataset
 * indices, reproducibility hashes of parameters and corpora). Chainable: start from
 * HASH_FNV1A_OFFSET and feed the result back in. */
#ifndef HASH_H
#define HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_OFFSET 1469598103934665603ull
#define HASH_FNV1A_PRIME 1099511628211ull

static inline uint64_t hash_fnv1a(uint64_t hash, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) hash = (hash ^ p[i]) * HASH_FNV1A_PRIME;
    return hash;
}

/* the word-at-a-time variant: one step per 64-bit value instead of per byte (combining
 * per-rank hashes, hashing token ids) */
static inline uint64_t hash_fnv1a_word(uint64_t hash, uint64_t word) {
    return (hash ^ word) * HASH_FNV1A_PRIME;
}

#endif
