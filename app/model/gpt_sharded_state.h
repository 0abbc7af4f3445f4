/* gpt_sharded_state.h: the GPT model's part of a checkpoint (Megatron's sharded_state_dict):
 * every global parameter as the tensor /model/<name>, in global order, with the blocks of it
 * this rank holds. A checkpoint stores fp32 weights: with fp32 parameters (the CPU backend) the
 * parameters themselves; in mixed precision the optimizer's fp32 master weights, which
 * app/optim/optimizer_sharded_state.h adds, so the model then only declares the tensors. */
#ifndef GPT_SHARDED_STATE_H
#define GPT_SHARDED_STATE_H

#include "app/checkpoint/checkpoint_boxes.h"
#include "app/checkpoint/sharded_state.h"
#include "app/model/gpt_model.h"

/* where block `block` (of p->row_blocks; 0 for most tensors) of parameter p's local shard sits in
 * its global tensor: SwiGLU's fc1 holds a shard of the gate rows and one of the up rows */
shard_block gpt_param_block(const param_tensor *p, int block);

/* adds local elements [lo, hi) of parameter p (data: element lo) to tensor `tensor` of state,
 * cut at its row blocks */
void gpt_add_param_range(sharded_state *state, int tensor, const param_tensor *p, size_t lo, size_t hi,
                         float *data, int write);

/* declares every global parameter as the tensor <group>/<name>, in global order (the optimizer
 * declares its moments' groups with it) */
void gpt_declare_tensors(const gpt_model *model, const char *group, sharded_state *state);

/* Declares every /model tensor and, with fp32 parameters, adds the ones this rank holds (the
 * tied-embedding copy included: loading fills it too). Saving, the copy that counts once
 * (param_is_primary_copy) of data-parallel rank 0 writes. The MoE routers' expert biases
 * (moe_expert_bias.h, fp32 buffers) follow the parameters, in mixed precision too. */
void gpt_sharded_state(const gpt_model *model, int dp_rank, sharded_state *state);

#endif
