/* gpt_sharded_state.c: see gpt_sharded_state.h. */
#include "app/model/gpt_sharded_state.h"
#include "app/core/error.h"
#include "app/model/moe_expert_bias.h"
#include "io/checkpoint_format.h"

#include <stdlib.h>

shard_block gpt_param_block(const param_tensor *p, int block) {
    int64_t block_rows = p->rows / p->row_blocks;
    return (shard_block){
        .first_row = p->split == SHARD_ROWS ? block * block_rows + p->shard_start : 0,
        .first_col = p->split == SHARD_COLS ? p->shard_start : 0,
        .cols = p->cols ? p->local_cols : 1,
    };
}

void gpt_add_param_range(sharded_state *state, int tensor, const param_tensor *p, size_t lo, size_t hi,
                         float *data, int write) {
    size_t per_block = p->numel / (size_t)p->row_blocks;
    for (int k = 0; k < p->row_blocks; k++) {
        size_t start = (size_t)k * per_block, end = start + per_block;
        size_t from = lo > start ? lo : start, to = hi < end ? hi : end;
        if (from >= to) continue;
        shard_block block = gpt_param_block(p, k);
        sharded_state_add(state, tensor, shard_range_part(&block, from - start, to - start), data + (from - lo), write);
    }
}

void gpt_declare_tensors(const gpt_model *model, const char *group, sharded_state *state) {
    int num_globals = gpt_global_parameters(&model->config, NULL);
    global_parameter *globals = malloc(sizeof(global_parameter) * (size_t)num_globals);
    CHECK(globals, "out of host memory for the parameter list");
    gpt_global_parameters(&model->config, globals);
    for (int g = 0; g < num_globals; g++)
        sharded_state_tensor(state, group, globals[g].name, globals[g].rows, globals[g].cols);
    free(globals);
}

void gpt_sharded_state(const gpt_model *model, int dp_rank, sharded_state *state) {
    gpt_declare_tensors(model, CHECKPOINT_MODEL_GROUP, state);
    moe_expert_bias_sharded_state(model, dp_rank, state);  /* fp32 buffers, in mixed precision too */
    if (model->mixed_precision) return; /* the fp32 copy is the optimizer's */
    for (int i = 0; i < model->num_params; i++) {
        const param_tensor *p = &model->params[i];
        int write = param_is_primary_copy(p, model->config.tp_rank) && param_replica_rank(p, &model->config, dp_rank) == 0;
        gpt_add_param_range(state, sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, p->name, p->rows, p->cols), p, 0,
                            p->numel, (float *)model->param_buffer + p->offset, write);
    }
}
