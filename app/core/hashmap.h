/* hashmap.h: a small open-addressing hash map from byte strings to int64 values, used by the
 * tokenizers (vocabularies, BPE merge ranks, the BPE word cache) and by checkpoints (tensor
 * names). Keys are copied. */
#ifndef HASHMAP_H
#define HASHMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct strmap strmap;

/* Creates an empty map sized for about expected_count keys; NULL when out of memory. */
strmap *strmap_create(size_t expected_count);
void strmap_free(strmap *map);

/* Inserts key -> value, replacing the value of an existing key. Returns 0, or -1 when out of
 * memory (the map is unchanged then). */
int strmap_put(strmap *map, const void *key, size_t key_len, int64_t value);

/* Returns 1 and stores the value when key is present, 0 when it is not. */
int strmap_get(const strmap *map, const void *key, size_t key_len, int64_t *value);

size_t strmap_count(const strmap *map);

/* Removes every key, keeping the allocated memory for reuse. */
void strmap_clear(strmap *map);

#endif
