/* optimizer_sharded_state.c: see optimizer_sharded_state.h. */
#include "app/optim/optimizer_sharded_state.h"
#include "app/core/error.h"
#include "app/model/gpt_sharded_state.h"
#include "io/checkpoint_format.h"

#include <stdlib.h>

enum { NUM_MOMENTS = 2 };
static const char *const moment_group[NUM_MOMENTS] = {CHECKPOINT_EXP_AVG_GROUP, CHECKPOINT_EXP_AVG_SQ_GROUP};

/* every rank declares every tensor in the same order, whichever ranges it holds */
static void declare_tensors(const gpt_model *model, int masters, int with_moments, sharded_state *state) {
    int num_globals = gpt_global_parameters(&model->config, NULL);
    global_parameter *globals = malloc(sizeof(global_parameter) * (size_t)num_globals);
    CHECK(globals, "out of host memory for the parameter list");
    gpt_global_parameters(&model->config, globals);
    for (int g = 0; masters && g < num_globals; g++)
        sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, globals[g].name, globals[g].rows, globals[g].cols);
    for (int k = 0; with_moments && k < NUM_MOMENTS; k++)
        for (int g = 0; g < num_globals; g++)
            sharded_state_tensor(state, moment_group[k], globals[g].name, globals[g].rows, globals[g].cols);
    free(globals);
}

void optimizer_sharded_state(const optimizer *opt, const gpt_model *model, int dp_rank, int distributed,
                             int with_moments, sharded_state *state) {
    declare_tensors(model, opt->master != NULL, with_moments, state);
    for (int r = 0; r < opt->num_ranges; r++) {
        const optimizer_range *range = &opt->ranges[r];
        const param_tensor *p = &model->params[range->param];
        int write = param_is_primary_copy(p, model->config.tp_rank) && (distributed || dp_rank == 0);
        shard_block block = gpt_param_block(p);
        size_t lo = range->offset - p->offset;
        tensor_part part = shard_range_part(&block, lo, lo + range->length);
        if (opt->master)
            sharded_state_add(state, sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, p->name, p->rows, p->cols),
                              part, opt->master + range->state_offset, write);
        float *moments[NUM_MOMENTS] = {opt->exp_avg, opt->exp_avg_sq};
        for (int k = 0; with_moments && k < NUM_MOMENTS; k++)
            sharded_state_add(state, sharded_state_tensor(state, moment_group[k], p->name, p->rows, p->cols),
                              part, moments[k] + range->state_offset, write);
    }
}
