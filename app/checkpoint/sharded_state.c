/* sharded_state.c: see sharded_state.h. */
#include "app/checkpoint/sharded_state.h"
#include "app/core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sharded_state_tensor(sharded_state *s, const char *group, const char *name, int64_t rows,
                         int64_t cols) {
    char path[CHECKPOINT_TENSOR_NAME_MAX];
    int length = snprintf(path, sizeof path, "%s/%s", group, name);
    CHECK(length > 0 && (size_t)length < sizeof path, "checkpoint tensor name %s/%s is too long", group, name);
    if (!s->index) s->index = strmap_create(256);
    CHECK(s->index, "out of host memory for the checkpoint's tensor list");
    int64_t found;
    if (strmap_get(s->index, path, (size_t)length, &found)) {
        const checkpoint_tensor *t = &s->tensors[found];
        CHECK(t->rows == rows && t->cols == cols, "checkpoint tensor %s declared as [%lld, %lld] and [%lld, %lld]",
              path, (long long)t->rows, (long long)t->cols, (long long)rows, (long long)cols);
        return (int)found;
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
    CHECK(strmap_put(s->index, path, (size_t)length, s->num_tensors) == 0,
          "out of host memory for the checkpoint's tensor list");
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
    if (s->index) strmap_free(s->index);
    memset(s, 0, sizeof *s);
}
