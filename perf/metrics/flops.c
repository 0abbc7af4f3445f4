/* flops.c: see flops.h. Written from Megatron-LM's transformer_flops() (training.py):
 * every GEMM of m x n by n x k costs 2mnk, and runs 3 times per iteration (forward, backward
 * for activations, backward for weights). Per token and layer, in the forward:
 *   attention projections  2 h (q + 2 kv) + 2 q h      with q = kv_channels x heads,
 *                                                       kv = kv_channels x query groups
 *   core attention         2 x 2 q s, halved when causal (QK^T and softmax(QK^T) V)
 *   dense MLP              2 h ffn x (3 with SwiGLU, else 2)
 *   MoE MLP                2 h (ffn_moe x topk + ffn_shared) x (3 with SwiGLU, else 2)
 * plus the logits, 2 h V per token. For GPT-3 (q = kv = h, ffn = 4h, causal) that gives
 * 72 B s l h^2 (1 + s/(12h) + V/(12 l h)); non-causal, Megatron's published
 * 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
 * Recomputation repeats forward work only: full recompute runs the recomputed layers' forward
 * again (never the logits, which sit outside the checkpointed layers), selective recompute the
 * core attention; MFU ignores both (Megatron), HFU counts them. */
#include "perf/metrics/flops.h"

/* forward FLOPs per token of each part of one layer */
typedef struct layer_forward {
    double attention_linear, attention_core, dense_mlp, moe_mlp;
} layer_forward;

static layer_forward per_token_forward(const model_shape *m) {
    double h = m->hidden_size, s = m->seq_length;
    double q = (double)m->kv_channels * m->num_attention_heads;
    double kv = (double)m->kv_channels * m->num_query_groups;
    double gemms = m->swiglu ? 3.0 : 2.0;
    layer_forward f;
    f.attention_linear = 2.0 * h * (q + 2.0 * kv) + 2.0 * q * h;
    f.attention_core = 2.0 * 2.0 * q * s * (m->causal ? 0.5 : 1.0);
    f.dense_mlp = 2.0 * h * m->ffn_hidden_size * gemms;
    f.moe_mlp = 2.0 * h * ((double)m->moe_ffn_hidden_size * m->moe_router_topk +
                           m->moe_shared_expert_intermediate_size) * gemms;
    return f;
}

static int moe_layer_count(const model_shape *m) {
    if (m->num_experts <= 0) return 0;
    if (m->moe_layers > 0) return m->moe_layers;
    int freq = m->moe_layer_freq > 0 ? m->moe_layer_freq : 1;
    return (m->num_layers + freq - 1) / freq;   /* layers 0, freq, 2 freq, ... */
}

iteration_flops flops_per_iteration(const model_shape *m, double global_batch_size,
                                    const recompute_spec *recompute) {
    double tokens = global_batch_size * m->seq_length;
    layer_forward f = per_token_forward(m);
    int moe_layers = moe_layer_count(m), dense_layers = m->num_layers - moe_layers;
    double layers = m->num_layers * (f.attention_linear + f.attention_core) +
                    dense_layers * f.dense_mlp + moe_layers * f.moe_mlp;
    double logits = 2.0 * m->hidden_size * (double)m->padded_vocab_size;
    iteration_flops out;
    out.model = 3.0 * tokens * (layers + logits);
    double again = 0.0;
    if (recompute && recompute->granularity == RECOMPUTE_FULL && m->num_layers > 0)
        again = layers * recompute->num_layers / m->num_layers;   /* the average layer, n times */
    else if (recompute && recompute->granularity == RECOMPUTE_SELECTIVE)
        again = m->num_layers * f.attention_core;
    out.hardware = out.model + tokens * again;
    return out;
}

double flops_utilization(double flops_per_second, double peak_flops_per_second) {
    return peak_flops_per_second > 0 ? flops_per_second / peak_flops_per_second : 0.0;
}
