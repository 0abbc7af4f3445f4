/* inference_moe.h: the mixture-of-experts shape of a checkpoint's model for generation and
 * evaluation, from its /args under Megatron's argument names (num_experts, moe_ffn_hidden_size,
 * moe_router_topk, moe_layer_freq, moe_router_score_function, moe_router_pre_softmax,
 * moe_router_topk_scaling_factor, moe_router_num_groups, moe_router_group_topk, the shared
 * experts and their gate, moe_router_enable_expert_bias). What only training uses (the losses,
 * jitter, capacity: inference routes every token to its top-k experts, as Megatron-Core's
 * InferenceTopKRouter does) is not read. */
#ifndef INFERENCE_MOE_H
#define INFERENCE_MOE_H

#include "app/model/gpt_model.h"
#include "io/checkpoint_file.h"

/* fills c's MoE fields (num_experts 0: a dense model; c->num_layers set before); stops with
 * user_error naming the checkpoint and the attribute when one is missing or invalid. Returns the
 * checkpoint's capacity factor (0: trained dropless). */
double inference_moe_config(checkpoint_file *f, gpt_config *c);

/* one start-up line for an MoE model (nothing for a dense one): experts, top-k, the MoE layers,
 * and a note when the checkpoint was trained with a capacity factor */
void inference_moe_report(const gpt_config *c, double capacity_factor);

#endif
