/* sharded_state.h: what a checkpoint holds, as each rank describes it (Megatron's
 * sharded_state_dict): the global tensors, each with its dataset path in the file
 * ("/model/decoder.layers.0.mlp.linear_fc1.weight") and its global shape, and the shards of them
 * this rank holds: a part (boxes of the global index space, app/checkpoint/checkpoint_boxes.h),
 * where its data lives (backend memory, fp32, the part's elements in order) and whether this
 * rank writes it when saving (every element is written by one rank; every copy is read when
 * loading). A tensor may have several shards on one rank (a tied copy, several ranges).
 *
 * Every rank declares every tensor of the checkpoint, also those it holds nothing of, in the
 * same order: the file's order. Models and optimizers build their lists from their global
 * parameter tables (app/model/gpt_sharded_state.h, app/optim/optimizer_sharded_state.h);
 * app/checkpoint/dist_checkpoint.h saves and loads them. A zeroed sharded_state is empty. */
#ifndef SHARDED_STATE_H
#define SHARDED_STATE_H

#include <stdint.h>

#include "app/core/hashmap.h"
#include "io/checkpoint_file.h"

#define CHECKPOINT_TENSOR_NAME_MAX 160

typedef struct checkpoint_tensor {
    char name[CHECKPOINT_TENSOR_NAME_MAX];  /* group/name: the dataset's path */
    int64_t rows, cols;                     /* global shape; cols 0 for a vector */
} checkpoint_tensor;

typedef struct checkpoint_shard {
    int tensor;        /* index into the state's tensors */
    tensor_part part;  /* the boxes this rank holds */
    float *data;       /* backend memory: the part's elements, box after box, row-major */
    int write;         /* saving: this rank writes this part */
} checkpoint_shard;

typedef struct sharded_state {
    checkpoint_tensor *tensors;
    int num_tensors, tensor_capacity;
    checkpoint_shard *shards;
    int num_shards, shard_capacity;
    strmap *index;     /* tensor name -> index into tensors (created by the first declaration) */
} sharded_state;

/* the index of tensor group/name, declared (appended) when new; the same name with another
 * shape is a bug and aborts */
int sharded_state_tensor(sharded_state *state, const char *group, const char *name, int64_t rows,
                         int64_t cols);

/* a shard of tensor `tensor` (an index from sharded_state_tensor); an empty part adds nothing */
void sharded_state_add(sharded_state *state, int tensor, tensor_part part, float *data, int write);

void sharded_state_free(sharded_state *state);

#endif
