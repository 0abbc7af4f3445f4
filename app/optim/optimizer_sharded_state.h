/* optimizer_sharded_state.h: the optimizer's part of a checkpoint over its ranges: the fp32
 * master weights (mixed precision only) as shards of the /model tensors, and Adam's moments as
 * /optimizer/exp_avg/<name> and /optimizer/exp_avg_sq/<name>. A range of the distributed
 * optimizer can start and end inside rows of its parameter, so its shard is up to three boxes
 * (app/checkpoint/checkpoint_boxes.h). */
#ifndef OPTIMIZER_SHARDED_STATE_H
#define OPTIMIZER_SHARDED_STATE_H

#include "app/checkpoint/sharded_state.h"
#include "app/optim/optimizer.h"

/* Declares the optimizer's tensors in global order (the moments only with with_moments) and
 * adds this rank's ranges. Saving, the copy that counts once (param_is_primary_copy) writes:
 * on data-parallel rank 0, or on every data-parallel rank with the distributed optimizer
 * (each owns its ranges). */
void optimizer_sharded_state(const optimizer *opt, const gpt_model *model, int dp_rank, int distributed,
                             int with_moments, sharded_state *state);

#endif
