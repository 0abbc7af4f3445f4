/* sharded_state.c: see sharded_state.h. */
#include "app/checkpoint/sharded_state.h"
#include "app/core/error.h"
#include "app/core/hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_of(const char *name, int size) {
    return (size_t)(hash_fnv1a(HASH_FNV1A_OFFSET, name, strlen(name)) & (uint64_t)(size - 1));
}

/* index of the tensor called name, or the free slot where it would go (-1 - slot) */
static int find(const sharded_state *s, const char *name) {
    for (size_t slot = slot_of(name, s->index_size);; slot = (slot + 1) & (size_t)(s->index_size - 1)) {
        int t = s->index[slot];
        if (t < 0) return -1 - (int)slot;
        if (!strcmp(s->tensors[t].name, name)) return t;
    }
}

static void grow_index(sharded_state *s) {
    free(s->index);
    s->index_size = s->index_size ? 2 * s->index_size : 256;
    s->index = malloc(sizeof(int) * (size_t)s->index_size);
    CHECK(s->index, "out of host memory for the checkpoint's tensor list");
    for (int i = 0; i < s->index_size; i++) s->index[i] = -1;
    for (int t = 0; t < s->num_tensors; t++) s->index[-1 - find(s, s->tensors[t].name)] = t;
}

int sharded_state_tensor(sharded_state *s, const char *group, const char *name, int64_t rows,
                         int64_t cols) {
    char path[CHECKPOINT_TENSOR_NAME_MAX];
    int length = snprintf(path, sizeof path, "%s/%s", group, name);
    CHECK(length > 0 && (size_t)length < sizeof path, "checkpoint tensor name %s/%s is too long", group, name);
    if (2 * (s->num_tensors + 1) > s->index_size) grow_index(s);
    int found = find(s, path);
    if (found >= 0) {
        const checkpoint_tensor *t = &s->tensors[found];
        CHECK(t->rows == rows && t->cols == cols, "checkpoint tensor %s declared as [%lld, %lld] and [%lld, %lld]",
              path, (long long)t->rows, (long long)t->cols, (long long)rows, (long long)cols);
        return found;
    }
    if (s->num_tensors == s->tensor_capacity) {
        s->tensor_capacity = s->tensor_capacity ? 2 * s->tensor_capacity : 64;
        s->tensors = realloc(s->tensors, sizeof(checkpoint_tensor) * (size_t)s->tensor_capacity);
        CHECK(s->tensors, "out of host memory for the checkpoint's tensor list");
    }
    checkpoint_tensor *t = &s->tensors[s->num_tensors];
    memcpy(t->name, path, (size_t)length + 1);
    t->rows = rows;
    t->cols = cols;
    s->index[-1 - found] = s->num_tensors;
    return s->num_tensors++;
}

void sharded_state_add(sharded_state *s, int tensor, tensor_part part, float *data, int write) {
    CHECK(tensor >= 0 && tensor < s->num_tensors, "checkpoint shard of undeclared tensor %d", tensor);
    if (part.num_boxes == 0) return;
    if (s->num_shards == s->shard_capacity) {
        s->shard_capacity = s->shard_capacity ? 2 * s->shard_capacity : 64;
        s->shards = realloc(s->shards, sizeof(checkpoint_shard) * (size_t)s->shard_capacity);
        CHECK(s->shards, "out of host memory for the checkpoint's shard list");
    }
    s->shards[s->num_shards++] = (checkpoint_shard){.tensor = tensor, .part = part, .data = data, .write = write};
}

void sharded_state_free(sharded_state *s) {
    free(s->tensors);
    free(s->shards);
    free(s->index);
    memset(s, 0, sizeof *s);
}
