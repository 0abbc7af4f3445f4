/* moe_shared_expert.h: the shared experts of an MoE layer (Megatron-Core's SharedExpertMLP,
 * --moe-shared-expert-intermediate-size Fs): a dense MLP without biases that every token goes
 * through, its output added to the routed experts' weighted sum (MoELayer.postprocess):
 *
 *   shared(x) = fc2(act(fc1(x))) [* sigmoid(x . gate_weight) per token, --moe-shared-expert-gate]
 *   y = routed(x) + shared(x)
 *
 * fc1 [FC1s, C] is split by output rows and fc2 [C, Fs] by input columns over the tensor-parallel
 * ranks like the dense MLP, so each rank adds its partial sum to the routed experts' partial sum
 * and the layer's one reduction (reduce-scatter with sequence parallelism) completes both. The
 * gate weight [1, C] is whole on every rank and applied to the gathered rows (as the router is):
 * its logits and scores are the same on every tensor-parallel rank, which then scale their own
 * partial sums; a score's gradient needs the whole output, so the per-token dot products are
 * summed over the tensor-parallel ranks (as the routing weights' are) and tensor-parallel rank 0
 * alone adds the gate's input gradient.
 *
 * The gate runs through the router's kernels as a router of one expert with the sigmoid score
 * and top-1: that expert's weight is sigmoid(logit) and its backward dlogit = dscore s (1 - s);
 * moe_combine and moe_combine_backward over the identity rows scale the output and give dscore.
 * So the layer needs no kernel beyond those the routed experts use. */
#ifndef MOE_SHARED_EXPERT_H
#define MOE_SHARED_EXPERT_H

#include "app/model/moe_layer.h"

/* 1 when the model's MoE layers have shared experts */
static inline int moe_has_shared_expert(const gpt_config *c) { return c->moe_shared_expert_intermediate_size > 0; }

/* the buffers of the shared experts in an MoE layer's activations and in the MoE scratch (none
 * without shared experts) */
void moe_shared_activations_allocate(gpt_model *m, moe_activations *a);
void moe_shared_activations_release(gpt_model *m, moe_activations *a);
void moe_shared_scratch_allocate(gpt_model *m, moe_scratch *x);
void moe_shared_scratch_release(gpt_model *m, moe_scratch *x);

/* out_full[N,C] += this rank's partial sum of the shared experts' output for the gathered norm
 * output x[N,C] of global layer `layer` (its fc1 and fc2 in fp8 when the layer is: fp8_linear.h) */
void moe_shared_expert_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                               int layer);

/* the backward from d_full[N,C] (dL/d(layer output), gathered): accumulates the shared experts'
 * weight gradients into lg and adds their partial dL/dx to d_input[N,C] */
void moe_shared_expert_backward(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg,
                                const void *x, const void *d_full, void *d_input, int layer);

/* the same in the steps --moe-shared-expert-overlap interleaves with the expert-parallel
 * all-to-alls (Megatron's SharedExpertMLP.linear_fc1_forward_and_act, linear_fc2_forward,
 * get_output); the three in a row are moe_shared_expert_forward:
 *   forward_fc1: fc1 and the activation of x (during the dispatch all-to-all)
 *   forward_fc2: fc2 and the gate, the partial output into the MoE scratch (during the combine)
 *   add_output: out_full += that output (after the routed experts' combination) */
void moe_shared_expert_forward_fc1(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, int layer);
void moe_shared_expert_forward_fc2(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, int layer);
void moe_shared_expert_add_output(gpt_model *m, void *out_full);
/* and the backward's (in a row moe_shared_expert_backward):
 *   backward_fc2: the gate, fc2 and the activation from d_full (during the first all-to-all)
 *   backward_fc1: fc1's weight and input gradients (during the second)
 *   add_input_gradient: d_input += the shared experts' (and the gate's) input gradient */
void moe_shared_expert_backward_fc2(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg,
                                    const void *x, const void *d_full, int layer);
void moe_shared_expert_backward_fc1(gpt_model *m, const layer_view *lw, const layer_view *lg, const void *x, int layer);
void moe_shared_expert_add_input_gradient(gpt_model *m, void *d_input);

/* 1 when the MoE layers run the shared experts overlapped with the all-to-alls
 * (--moe-shared-expert-overlap with shared experts and expert parallelism) */
int moe_shared_expert_overlapped(const gpt_config *c);
/* the start-up line saying what --moe-shared-expert-overlap does in this run */
const char *moe_shared_expert_overlap_note(const gpt_config *c);

#endif
