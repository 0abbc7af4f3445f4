/* memory_stats.c: bytes a backend holds through ops->alloc, now and at most so far (see "memory
 * statistics" in kernels/kernels.h). Both backends record every allocation and release here; a
 * small open-addressing table maps each live pointer to its size. The peak is what the
 * training log reports as peak memory, comparable to PyTorch's torch.cuda.max_memory_allocated
 * (allocations the program asked for; the CUDA context, cuBLAS and NCCL internals not counted). */
#include <stdint.h>
#include <stdlib.h>

#include "kernels/kernels.h"

typedef struct live_block {
    void *ptr; /* NULL: empty slot; TOMBSTONE: released */
    size_t bytes;
} live_block;

#define TOMBSTONE ((void *)1)

static live_block *table;
static size_t capacity, used; /* used counts live entries and tombstones */
static size_t allocated, peak, live; /* live: allocations not yet released */

static size_t slot_of(const void *ptr) {
    uint64_t h = (uint64_t)(uintptr_t)ptr;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (capacity - 1);
}

static void insert(void *ptr, size_t bytes);

static void grow(void) {
    live_block *old = table;
    size_t old_capacity = capacity;
    capacity = capacity ? capacity * 2 : 256;
    table = calloc(capacity, sizeof *table);
    if (table == NULL) KERNELS_FATAL("out of memory growing the allocation table to %zu entries", capacity);
    used = 0;
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i].ptr != NULL && old[i].ptr != TOMBSTONE) insert(old[i].ptr, old[i].bytes);
    free(old);
}

static void insert(void *ptr, size_t bytes) {
    if ((used + 1) * 2 > capacity) grow();
    size_t i = slot_of(ptr);
    while (table[i].ptr != NULL && table[i].ptr != TOMBSTONE) i = (i + 1) & (capacity - 1);
    if (table[i].ptr == NULL) used++;
    table[i].ptr = ptr;
    table[i].bytes = bytes;
}

void kernels_memory_record_alloc(void *ptr, size_t bytes) {
    insert(ptr, bytes);
    allocated += bytes;
    live++;
    if (allocated > peak) peak = allocated;
}

void kernels_memory_record_release(void *ptr) {
    if (ptr == NULL || capacity == 0) return;
    for (size_t i = slot_of(ptr);; i = (i + 1) & (capacity - 1)) {
        if (table[i].ptr == NULL) return; /* not ours (never recorded): nothing to count */
        if (table[i].ptr == ptr) {
            allocated -= table[i].bytes;
            live--;
            table[i].ptr = TOMBSTONE;
            return;
        }
    }
}

size_t kernels_memory_allocated(void) { return allocated; }
size_t kernels_memory_peak(void) { return peak; }
size_t kernels_memory_count(void) { return live; }
