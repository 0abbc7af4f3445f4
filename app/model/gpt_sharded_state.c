/* gpt_sharded_state.c: see gpt_sharded_state.h. */
#include "app/model/gpt_sharded_state.h"
#include "app/core/error.h"
#include "io/checkpoint_format.h"

#include <stdlib.h>

shard_block gpt_param_block(const param_tensor *p) {
    return (shard_block){
        .first_row = p->split == SHARD_ROWS ? p->shard_start : 0,
        .first_col = p->split == SHARD_COLS ? p->shard_start : 0,
        .cols = p->cols ? p->local_cols : 1,
    };
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
    if (model->mixed_precision) return; /* the fp32 copy is the optimizer's */
    for (int i = 0; i < model->num_params; i++) {
        const param_tensor *p = &model->params[i];
        shard_block block = gpt_param_block(p);
        int write = param_is_primary_copy(p, model->config.tp_rank) && dp_rank == 0;
        sharded_state_add(state, sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, p->name, p->rows, p->cols),
                          shard_range_part(&block, 0, p->numel), (float *)model->param_buffer + p->offset, write);
    }
}
