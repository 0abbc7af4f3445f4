/* hashmap.c: open-addressing (linear probing) string -> int64 map; key bytes live in one arena. */
#include "app/core/hashmap.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t hash; /* 0 marks an empty slot */
    size_t key_offset;
    size_t key_len;
    int64_t value;
} strmap_slot;

struct strmap {
    strmap_slot *slots;
    size_t capacity; /* power of two */
    size_t count;
    char *arena;
    size_t arena_used, arena_cap;
};

static uint64_t mix64(uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_bytes(const unsigned char *bytes, size_t len) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8);
        h = mix64(h ^ word);
        bytes += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, bytes, len);
    h = mix64(h ^ tail ^ 0xa5a5a5a5a5a5a5a5ull);
    return h ? h : 1;
}

strmap *strmap_create(size_t expected_count) {
    strmap *map = calloc(1, sizeof *map);
    if (!map) return NULL;
    size_t capacity = 16;
    while (capacity < expected_count * 2) capacity *= 2;
    map->slots = calloc(capacity, sizeof *map->slots);
    if (!map->slots) {
        free(map);
        return NULL;
    }
    map->capacity = capacity;
    return map;
}

void strmap_free(strmap *map) {
    if (!map) return;
    free(map->slots);
    free(map->arena);
    free(map);
}

size_t strmap_count(const strmap *map) { return map->count; }

void strmap_clear(strmap *map) {
    memset(map->slots, 0, map->capacity * sizeof *map->slots);
    map->count = 0;
    map->arena_used = 0;
}

static strmap_slot *find_slot(const strmap *map, const void *key, size_t key_len, uint64_t hash) {
    size_t mask = map->capacity - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        strmap_slot *slot = &map->slots[i];
        if (slot->hash == 0) return slot;
        /* an empty key has no bytes in the arena, which may still be NULL (found by the
         * wordpiece_vocab fuzz target: an empty line in vocab.txt) */
        if (slot->hash == hash && slot->key_len == key_len &&
            (key_len == 0 || memcmp(map->arena + slot->key_offset, key, key_len) == 0))
            return slot;
    }
}

static int grow_slots(strmap *map) {
    size_t new_capacity = map->capacity * 2;
    strmap_slot *new_slots = calloc(new_capacity, sizeof *new_slots);
    if (!new_slots) return -1;
    for (size_t i = 0; i < map->capacity; i++) {
        strmap_slot *old = &map->slots[i];
        if (old->hash == 0) continue;
        size_t j = old->hash & (new_capacity - 1);
        while (new_slots[j].hash != 0) j = (j + 1) & (new_capacity - 1);
        new_slots[j] = *old;
    }
    free(map->slots);
    map->slots = new_slots;
    map->capacity = new_capacity;
    return 0;
}

int strmap_put(strmap *map, const void *key, size_t key_len, int64_t value) {
    uint64_t hash = hash_bytes(key, key_len);
    strmap_slot *slot = find_slot(map, key, key_len, hash);
    if (slot->hash != 0) {
        slot->value = value;
        return 0;
    }
    if ((map->count + 1) * 10 > map->capacity * 7) {
        if (grow_slots(map) != 0) return -1;
        slot = find_slot(map, key, key_len, hash);
    }
    if (map->arena_used + key_len > map->arena_cap) {
        size_t new_cap = map->arena_cap ? map->arena_cap : 4096;
        while (new_cap < map->arena_used + key_len) new_cap *= 2;
        char *new_arena = realloc(map->arena, new_cap);
        if (!new_arena) return -1;
        map->arena = new_arena;
        map->arena_cap = new_cap;
    }
    if (key_len) memcpy(map->arena + map->arena_used, key, key_len);
    slot->hash = hash;
    slot->key_offset = map->arena_used;
    slot->key_len = key_len;
    slot->value = value;
    map->arena_used += key_len;
    map->count++;
    return 0;
}

int strmap_get(const strmap *map, const void *key, size_t key_len, int64_t *value) {
    const strmap_slot *slot = find_slot(map, key, key_len, hash_bytes(key, key_len));
    if (slot->hash == 0) return 0;
    if (value) *value = slot->value;
    return 1;
}
