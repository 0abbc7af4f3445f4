/* optimizer_sharded_state.c: see optimizer_sharded_state.h. */
#include "app/optim/optimizer_sharded_state.h"
#include "app/model/gpt_sharded_state.h"
#include "io/checkpoint_format.h"

enum { NUM_MOMENTS = 2 };
static const char *const moment_group[NUM_MOMENTS] = {CHECKPOINT_EXP_AVG_GROUP, CHECKPOINT_EXP_AVG_SQ_GROUP};

void optimizer_sharded_state(const optimizer *opt, const gpt_model *model, int dp_rank, int distributed,
                             int with_moments, sharded_state *state) {
    /* every rank declares every tensor in the same order, whichever ranges it holds */
    if (opt->master) gpt_declare_tensors(model, CHECKPOINT_MODEL_GROUP, state);
    for (int k = 0; with_moments && k < NUM_MOMENTS; k++) gpt_declare_tensors(model, moment_group[k], state);
    for (int r = 0; r < opt->num_ranges; r++) {
        const optimizer_range *range = &opt->ranges[r];
        const param_tensor *p = &model->params[range->param];
        int write = param_is_primary_copy(p, model->config.tp_rank) &&
                    (distributed || param_replica_rank(p, &model->config, dp_rank) == 0);
        size_t lo = range->offset - p->offset, hi = lo + range->length;
        if (opt->master)
            gpt_add_param_range(state, sharded_state_tensor(state, CHECKPOINT_MODEL_GROUP, p->name, p->rows, p->cols),
                                p, lo, hi, opt->master + range->state_offset, write);
        float *moments[NUM_MOMENTS] = {opt->exp_avg, opt->exp_avg_sq};
        for (int k = 0; with_moments && k < NUM_MOMENTS; k++)
            gpt_add_param_range(state, sharded_state_tensor(state, moment_group[k], p->name, p->rows, p->cols),
                                p, lo, hi, moments[k] + range->state_offset, write);
    }
}
