/* moe_expert_bias.h: aux-loss-free load balancing (Megatron-Core's TopKRouter expert_bias,
 * --moe-router-enable-expert-bias, DeepSeek-V3's bias; https://arxiv.org/abs/2408.15664).
 *
 * Each MoE layer has a bias b[E] (fp32, starting at 0) that only the top-k choice reads: the
 * router ranks s[e] + b[e] (s: the sigmoid or sqrt-softplus score) but weights the chosen experts
 * by the unbiased s (kernels.h, moe_router_spec.expert_bias). It is a buffer, not a parameter:
 * no gradient, no optimizer; after every training iteration's forward and backward (Megatron's
 * finalize_model_grads, so also when an overflow then skips the step) each layer's routed token
 * counts of the whole global batch (every micro-batch, summed over the data-parallel ranks; after
 * capacity dropping; training micro-batches only, each counted once) move it:
 *
 *   b[e] += update_rate * sign(mean_e'(count[e']) - count[e])
 *
 * (Megatron's get_updated_expert_bias: fewer tokens than the mean raises an expert's bias, more
 * lowers it, equal leaves it). With --moe-pad-expert-input-to-capacity Megatron counts the padded
 * routing map, min(capacity, tokens) for every expert, so the bias never moves; the same here. Every tensor-parallel rank routes all of its group's tokens here,
 * so the counts are summed over the data-parallel group only; the expert-parallel ranks are
 * data-parallel ranks. The bias is the same on every rank of a layer and is saved in checkpoints
 * as /model/decoder.layers.L.mlp.router.expert_bias [E] (Megatron's state-dict name; written by
 * tensor- and data-parallel rank 0 of its stage). */
#ifndef MOE_EXPERT_BIAS_H
#define MOE_EXPERT_BIAS_H

#include <stddef.h>

#include "app/checkpoint/sharded_state.h"
#include "app/model/gpt_model.h"

/* the bias and the counts (zero), when the config enables the bias */
void moe_expert_bias_allocate(gpt_model *m);
void moe_expert_bias_release(gpt_model *m);

/* the bias of global layer `layer` (backend memory [E]), NULL when off */
const float *moe_expert_bias_of(const gpt_model *m, int layer);

/* a training micro-batch's routed tokens of layer `layer`: expert e took rows_end[e+1] -
 * rows_end[e] of them (moe_activations.expert_rows); nothing when the bias is off */
void moe_expert_bias_count(gpt_model *m, int layer, const int *expert_rows);

/* the end of a training iteration's forward and backward: sum the counts over dp_group (NULL or
 * one rank: none), move every held MoE layer's bias, clear the counts */
void moe_expert_bias_update(gpt_model *m, const comm_group *dp_group);

/* the checkpoint name of layer `layer`'s bias */
void moe_expert_bias_name(int layer, char *out, size_t size);

/* declares every MoE layer's bias as /model/<name> [E] (in layer order) and adds the ones held
 * here (written by tensor-parallel and data-parallel rank 0); nothing when the bias is off */
void moe_expert_bias_sharded_state(const gpt_model *m, int dp_rank, sharded_state *state);

#endif
