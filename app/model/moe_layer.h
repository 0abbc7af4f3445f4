/* moe_layer.h: the mixture-of-experts MLP of an MoE layer (Megatron-Core's MoELayer with its
 * TopKRouter and experts), as gpt_model.c runs it in place of fc1 -> activation -> fc2:
 *
 *   logits = x Wr^T (x: the gathered pre-MLP norm output [N,C], times the router's input jitter
 *   in training); (expert, weight)[N,k] = route(logits) (kernels.h: moe_router_spec);
 *   y[t] = sum_j weight[t,j] * fc2_e(act(fc1_e(x[t]))), e = expert[t,j]
 *
 * With expert parallelism (ep_size > 1) a rank holds E/ep experts ([ep_rank E/ep, +E/ep)) and
 * its tokens' rows reach their experts' ranks by an all-to-all over the expert-parallel group
 * (Megatron's alltoall dispatcher): the rows arrive grouped by source rank, are reordered by
 * local expert (then source rank, each in token order), computed, reordered back and returned by
 * the reverse all-to-all; the backward sends the output gradients the same way. With
 * --moe-shared-expert-overlap the all-to-alls are started (comm ialltoallv) and the shared
 * experts compute while they are in flight (moe_shared_expert.h), the same bits. Each expert's
 * fc1 is split by output rows and fc2 by input columns over the tensor-parallel ranks like the
 * dense MLP (Megatron's expert tensor parallelism equal to the tensor-parallel size), so y is
 * this rank's partial sum, reduced as fc2's output is. The router is computed whole on every
 * tensor-parallel rank from the gathered rows (its weight and gradient are the same on each).
 * With --expert-tensor-parallel-size 1 < tp (Megatron's ETP 1: each expert whole on its rank)
 * the router still runs on all gathered rows on every tensor-parallel rank, but each one
 * dispatches only its own sequence share of the tokens ([tp_rank N/tp, +N/tp), the rows its
 * reduce-scatter keeps) over the expert-parallel group, which then spans the tensor-parallel
 * ranks; the combined output is zero on the other rows, so the tensor-parallel reduction of the
 * output (and of the input gradient, and the routing weights' gradient) adds exact zeros, and
 * each expert's gradient sums over the expert-data-parallel group. With 1 < etp < tp (etp
 * dividing tp) each expert is split over the etp ranks of its expert tensor-parallel group (etp
 * consecutive tensor-parallel ranks) as the dense MLP is over tp, and those ranks dispatch their
 * joint share ([g N etp/tp, +N etp/tp), g = tp_rank / etp: what Megatron's expert
 * tensor-parallel all-gather after the all-to-all collects), each computing its partial sums.
 *
 * Tokens reach their experts by a permutation: the choices (t, j) that are not dropped, grouped
 * by expert in token order, are the rows of the experts' GEMMs (one GEMM per expert); combining
 * sums each token's weighted expert outputs in top-k order (with --moe-apply-probs-on-input,
 * top-1: the weight scales the token's row before the expert instead, and the output adds with 1). The backward recomputes the
 * permuted inputs and the activation from what the forward kept (router logits, routing,
 * fc1's output, the experts' outputs). The load-balancing and z losses add their gradients in
 * the router's backward, scaled as Megatron's MoEAuxLossAutoScaler scales them (the main loss's
 * scale over the micro-batches), and their values are summed per layer for the log. */
#ifndef MOE_LAYER_H
#define MOE_LAYER_H

#include "app/model/gpt_model.h"

/* what one MoE layer keeps of one micro-batch's forward */
typedef struct moe_activations {
    float *logits;         /* [N,E] router logits, fp32 (the GEMM's output in the compute dtype,
                            * converted) */
    int *expert;           /* [N,k] chosen experts, -1 where dropped */
    float *weight;         /* [N,k] routing weights */
    int *slot_row;         /* [N,k] the permuted row of each choice, -1 where dropped */
    int *row_token;        /* [N k] the token of each permuted row */
    int *expert_rows;      /* host [E+1]: expert e's permuted rows are [expert_rows[e], expert_rows[e+1]) */
    int *all_expert_rows;  /* host [E+1]: the same over every token row (expert_rows itself unless
                            * each tensor-parallel rank dispatches a share: etp < tp) */
    void *fc1_out;         /* [R, FC1m/tp] the local experts' fc1 outputs (pre-activation) */
    void *activation;      /* [R, Fm/tp] their activation (fc2's input) kept for the backward
                            * (--keep-mlp-activation); NULL: computed again there */
    void *expert_out;      /* [N k, C] the experts' fc2 outputs for this rank's tokens, in its
                            * permuted order (this rank's tensor-parallel partial sums) */
    /* expert parallelism (ep_size > 1): the rows this rank's experts compute on, R of them in the
     * expert order (local expert, then source rank), and the plan of the two all-to-alls */
    int *local_rows;       /* host [E/ep + 1]: local expert le's rows in the expert order (ep 1:
                            * expert_rows) */
    void *expert_input;    /* [R, C] the rows received (ep > 1) */
    int received;          /* R */
    size_t *send_counts, *send_offsets, *recv_counts, *recv_offsets; /* host [ep], in rows */
    int *to_expert_order;  /* [R]: expert-order row i is received row to_expert_order[i] */
    int *to_source_order;  /* [R]: the inverse */
    float *stats;          /* [MOE_ROUTER_STATS(E)]: aux loss, z loss, tokens per expert */
    /* shared experts (moe_shared_expert.h; NULL without them) */
    void *shared_fc1_out;  /* [N, FC1s/tp] their fc1's output (pre-activation) */
    void *shared_out;      /* gate only: [N, C] their output before the gate (this rank's partial sum) */
    float *gate_logits;    /* gate only: [N] x . gate_weight, fp32 */
    float *gate_score;     /* gate only: [N] sigmoid(gate_logits) */
    int shared_borrowed;   /* recompute_shared_experts: the four above are another layer's (the
                            * one set all layers write and their backward recomputes) */
} moe_activations;

/* what the training log reports of the MoE layers, summed over micro-batches since the last
 * moe_log_take: per layer its load-balancing and z losses (without their coefficients, as
 * Megatron logs them) and the tokens each expert computed on */
typedef struct moe_loss_log {
    double *values;             /* moe_log_length(): [L] aux, [L] z, [L x E] tokens per expert */
} moe_loss_log;

/* work buffers shared by all MoE layers; R_max = ep N k rows can reach one rank's experts */
typedef struct moe_scratch {
    void *permuted;        /* [N k, C]: this rank's tokens' rows in the permuted order */
    void *received;        /* [R_max, C]: rows in the source order (all-to-all buffers) */
    void *local_out;       /* [R_max, C]: the local experts' outputs in the expert order */
    void *activation;      /* [R_max, Fm/tp] */
    void *d_activation;    /* [R_max, Fm/tp] */
    void *d_fc1_out;       /* [R_max, FC1m/tp] */
    void *d_expert_out;    /* [N k, C] */
    void *d_local_out;     /* [R_max, C] */
    void *d_local_in;      /* [R_max, C] */
    void *d_permuted;      /* [N k, C] */
    int *host_order;       /* host [R_max] */
    const void **host_fc1, **host_fc2;  /* host [E/ep]: the local experts' weights (grouped GEMMs) */
    float **host_d_fc1, **host_d_fc2;   /* host [E/ep]: their gradients */
    void *d_input;         /* [N,C] dL/dx summed over this rank's experts (and the router on tp rank 0) */
    /* --moe-apply-probs-on-input (top-1): the routing weights scale the experts' input rows, and
     * the outputs combine with weight 1 */
    void *scaled_input;    /* [N,C] w[t] x[t] (forward), then dL/d(w x) (backward) */
    int *identity_rows;    /* [N] t -> t: moe_combine over the token rows themselves scales them */
    float *ones;           /* [N] the combine's weights */
    void *router_input;    /* [N,C] the jittered router input (input jitter only) */
    void *d_router_input;  /* [N,C] */
    float *d_weight;       /* [N,k] */
    float *d_logits;       /* [N,E] */
    void *logits_act;      /* [N,E] the router GEMM's output and output gradient in a 16-bit
                            * compute dtype (NULL on fp32: the GEMM uses the fp32 buffers) */
    float *stats;          /* [MOE_ROUTER_STATS(E)] the router's statistics, in backend memory */
    int *rows;             /* [E+1] the experts' first permuted rows (moe_permutation), in backend
                            * memory */
    moe_loss_log log;
    /* shared experts (moe_shared_expert.h; NULL without them) */
    void *shared_activation, *shared_d_activation; /* [N, Fs/tp] */
    void *shared_d_fc1_out;  /* [N, FC1s/tp] */
    void *shared_out;        /* [N, C] their (gated) output */
    void *shared_d_input;    /* [N, C] their partial dL/dx */
    void *shared_d_out;      /* gate only: [N, C] dL/d(output before the gate) */
    void *gate_d_input;      /* gate only: [N, C] dL/dx through the gate */
    int *gate_expert, *gate_rows; /* gate only: [N] the one "expert" (0), and the identity rows */
    float *gate_d_score, *gate_d_logits, *gate_stats; /* gate only: [N], [N], [MOE_ROUTER_STATS(1)] */
    /* forward-only use (generation, evaluation: moe_inference_allocate); 0 in training */
    int inference_max_rows;  /* the token rows the buffers hold */
    int inference_rows;      /* the rows of the forward running (N) */
} moe_scratch;

/* the buffer a router-like GEMM ([N, <= E] logits: the router, the shared experts' gate) writes
 * its output or reads its output gradient in: the fp32 buffer itself on an fp32 backend, else the
 * compute-dtype scratch (converted with act_to_float / float_to_act around the GEMM) */
void *moe_router_act(gpt_model *m, float *fp32);

/* Parse Megatron's --moe-layer-freq for num_layers layers into moe_layer[]: an integer N marks
 * layers 0, N, 2N, ...; otherwise a Python list expression of 0 and 1 ("[1,0,1]",
 * "([0]*1+[1]*3)*2": lists, '+' concatenation, '*' repetition, parentheses) of length
 * num_layers. Returns 0, or -1 with a message in err. */
int moe_layer_pattern_parse(const char *text, int num_layers, unsigned char *moe_layer, char *err, size_t errlen);

void moe_scratch_allocate(gpt_model *m);
void moe_scratch_release(gpt_model *m);
void moe_activations_allocate(gpt_model *m, moe_activations *a, int keep_activation);
void moe_activations_release(gpt_model *m, moe_activations *a);

/* the forward of global layer `layer`: out_full[N,C] = this rank's partial sum of the experts'
 * weighted outputs (and the shared experts' output) for the gathered norm output x[N,C];
 * jitter: the router's input jitter draws (p unused; training only); training: compute the
 * load-balancing and z losses */
void moe_layer_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                       dropout_rng jitter, int training, int layer);

/* its backward from d_full[N,C] (dL/d(out) gathered): accumulates the expert, shared-expert and
 * router weight gradients into lg and returns this rank's partial dL/dx [N,C] (scratch), to be
 * reduced over the tensor-parallel ranks as a column-parallel input gradient is; in training it
 * also counts the layer's routed tokens for the log and the expert bias */
void *moe_layer_backward(gpt_model *m, moe_activations *a, const layer_view *lw, const layer_view *lg, const void *x,
                         const void *d_full, dropout_rng jitter, int training, int layer);

/* The forward-only MoE of generation and evaluation (Megatron-Core's InferenceTopKRouter): the
 * router and experts on `rows` token rows of any count up to max_rows per call (a prefill or one
 * token per sequence with the key/value cache), without input jitter, load-balancing or z losses,
 * expert-bias updates or capacity dropping (every token reaches its top-k experts, so a token's
 * output never depends on the other rows of the call: the cached forward computes what the full
 * one does). The expert bias, when the model has one, still steers the choice.
 * moe_inference_allocate sizes the MoE scratch and one activations set `a` (shared by every
 * layer) for max_rows; moe_inference_release frees `a` (the scratch goes with the model). */
void moe_inference_allocate(gpt_model *m, moe_activations *a, int max_rows);
void moe_inference_release(gpt_model *m, moe_activations *a);
void moe_inference_forward(gpt_model *m, moe_activations *a, const layer_view *lw, const void *x, void *out_full,
                           int rows, int layer);

/* the token rows an MoE layer's forward takes: the micro-batch's (micro_batch_size x
 * seq_length) in training, the call's in forward-only use */
int moe_token_rows(const gpt_model *m);

/* the length of a layer log: L aux losses, L z losses, L x E token counts (L = num_layers) */
size_t moe_log_length(const gpt_config *c);

/* the sums since the last call into out[moe_log_length] (zeros for layers not held here), and
 * reset them */
void moe_log_take(gpt_model *m, double *out);

#endif
