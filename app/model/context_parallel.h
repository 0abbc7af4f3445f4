/* context_parallel.h: Megatron's context parallelism inside the model (--context-parallel-size
 * CP > 1). The CP ranks of a context-parallel group hold the same samples, each sequence cut into
 * 2 CP equal pieces of which rank i holds pieces i and 2 CP - 1 - i (Megatron's
 * get_batch_on_this_cp_rank: every rank gets the same causal work). Everything but the attention
 * is per token and runs on the rank's rows as it would on the whole sequence, with positions (the
 * learned position table, RoPE angles) and dropout masks those of the rows' global positions.
 *
 * The attention of the rank's queries over every rank's keys and values (TransformerEngine's
 * attention with context parallelism):
 *  - p2p (AttnFuncWithCPAndKVP2P): the packed keys and values travel around the ring, rank r
 *    sending to r + 1 while it computes on the block in hand; step i computes the block of rank
 *    r - i (causal by global position: a block of an earlier rank is seen whole by both pieces,
 *    one of a later rank only by the second piece), and merges it into the running output by
 *    log-sum-exp. The backward sends the keys and values around again, with their gradient
 *    accumulating as it travels one step behind: after CP steps each rank holds its own.
 *  - allgather (AttnFuncWithCPAndKVAllGather): every rank's keys and values all-gathered, the same
 *    blocks computed in the same order (so the same output, bit for bit); the backward's key and
 *    value gradients reduce-scattered back to their ranks.
 *  - a2a (AttnFuncWithCPAndQKVOA2A, Ulysses): an all-to-all gives each rank every rank's rows of
 *    its 1/CP share of the heads (whole query groups), the attention runs over them block by
 *    block in each rank's ring order (again the same output per head), and the output goes back
 *    by the reverse all-to-all; the backward exchanges qkv, out and dout likewise and returns dqkv.
 * The merged output's log-sum-exp [B,H,T] is what a layer keeps for its backward (in its
 * attention workspace). */
#ifndef CONTEXT_PARALLEL_H
#define CONTEXT_PARALLEL_H

#include "app/model/gpt_model.h"

/* the buffers of the ring (model->cp_scratch); nothing without context parallelism */
void context_parallel_scratch_allocate(gpt_model *model);
void context_parallel_scratch_release(gpt_model *model);

/* the pieces of each sequence that context-parallel rank cp_rank holds */
attention_span context_parallel_span(const gpt_config *config, int cp_rank);

/* out[N,H*D/tp] = the attention of layer `layer` over the whole sequence; the log-sum-exp goes
 * to workspace (the layer's attention workspace) */
void context_parallel_attention_forward(gpt_model *model, int layer, void *out, void *workspace, const void *qkv,
                                        dropout_rng rng);
/* dqkv[N,(H+2G)D/tp] (overwritten) from dout and the forward's out and workspace */
void context_parallel_attention_backward(gpt_model *model, int layer, void *dqkv, const void *dout, const void *qkv,
                                         const void *out, const void *workspace, dropout_rng rng);

/* RoPE on (backward: its transpose on) the rank's rows of qkv [B,T,(H+2G)D/tp], each piece at
 * its global positions */
void context_parallel_rope(gpt_model *model, void *qkv, rope_spec rope, int backward);
/* the learned position embeddings of the rank's rows: out[B,T,C] += wpe[position], or (backward)
 * dwpe[position] += dout */
void context_parallel_position_embedding_forward(gpt_model *model, void *out, const void *wpe);
void context_parallel_position_embedding_backward(gpt_model *model, float *dwpe, const void *dout);

#endif
