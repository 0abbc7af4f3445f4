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
 * core attention; MFU ignores both (Megatron), HFU counts them.
 *
 * BERT and T5: Megatron's num_floating_point_operations has no case for them (its training_log
 * counts every model as the GPT above: causal attention over --seq-length, --num-layers layers,
 * logits on every token). Derived here from the same terms, GEMM by GEMM, for the modules
 * Megatron-Core's BertModel and T5Model run (norms, activations, softmax and embeddings are no
 * GEMMs and are left out, as Megatron leaves them out of GPT's count):
 *   BERT (B rows of s tokens): the encoder layers above with the core attention NOT halved
 *     (bidirectional: every query sees all s keys; the padding mask is not subtracted, as the
 *     GPT count does not subtract padding), then per token the BertLMHead's dense 2 h^2 and the
 *     logits 2 h V (Megatron-Core computes them on every token, bert_model.py, as the PyTorch
 *     peer does: ours computes them on the masked tokens only, so ours does less work than this
 *     count), and per row the pooler's dense 2 h^2 on the [CLS] token and the binary head's
 *     2 h x 2 (finetune_bert: no LM head; the pooler and a K-output head). With q = kv = h and
 *     ffn = 4h: 72 B s l h^2 (1 + s/(6h) + V/(12 l h) + 1/(12 l)) + 3 B (2 h^2 + 4 h).
 *   T5 (B samples, encoder Te tokens and Le layers, decoder Td tokens and Ld layers): the encoder
 *     layers as BERT's over Te; each decoder layer's causal self-attention and MLP as GPT's over
 *     Td, and its cross-attention: the query and output projections 2 h q + 2 q h per decoder
 *     token, the key and value projections 2 h (2 kv) per ENCODER token (each decoder layer
 *     projects the encoder's output itself), QK^T and softmax V of Td queries over Te keys,
 *     2 x 2 q Te per decoder token (no mask to halve); the logits 2 h V per decoder token (the
 *     T5LMHead is the output layer alone). With q = kv = h and ffn = 4h, per sample forward:
 *     Le Te (24 h^2 + 4 Te h) + Ld Td (28 h^2 + 2 Td h + 4 Te h) + Ld Te 4 h^2 + 2 Td h V, x 3. */
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

/* the forward FLOPs per token of all of m's layers; *core: those of their core attention */
static double layers_forward_per_token(const model_shape *m, double *core) {
    layer_forward f = per_token_forward(m);
    int moe_layers = moe_layer_count(m), dense_layers = m->num_layers - moe_layers;
    *core = m->num_layers * f.attention_core;
    return m->num_layers * (f.attention_linear + f.attention_core) + dense_layers * f.dense_mlp +
           moe_layers * f.moe_mlp;
}

/* the forward work per token that recomputation repeats in a stack of num_layers layers whose
 * forward is `layers` (core attention `core`): full, the average layer recompute->num_layers
 * times; selective, the core attention */
static double recomputed_per_token(const recompute_spec *r, int num_layers, double layers, double core) {
    if (r && r->granularity == RECOMPUTE_FULL && num_layers > 0) return layers * r->num_layers / num_layers;
    if (r && r->granularity == RECOMPUTE_SELECTIVE) return core;
    return 0.0;
}

iteration_flops flops_per_iteration(const model_shape *m, double global_batch_size,
                                    const recompute_spec *recompute) {
    double tokens = global_batch_size * m->seq_length, core;
    double layers = layers_forward_per_token(m, &core);
    double logits = 2.0 * m->hidden_size * (double)m->padded_vocab_size;
    iteration_flops out;
    out.model = 3.0 * tokens * (layers + logits);
    out.hardware = out.model + tokens * recomputed_per_token(recompute, m->num_layers, layers, core);
    return out;
}

iteration_flops bert_flops_per_iteration(const model_shape *encoder, const bert_heads_shape *heads,
                                         double global_batch_size, const recompute_spec *recompute) {
    model_shape m = *encoder;
    m.causal = 0;  /* bidirectional: all of QK^T and softmax(QK^T) V is work */
    double h = m.hidden_size, rows = global_batch_size, tokens = rows * m.seq_length, core;
    double layers = layers_forward_per_token(&m, &core);
    double per_token = layers, per_row = 0.0;
    if (heads->lm_head) per_token += 2.0 * h * h + 2.0 * h * (double)m.padded_vocab_size;
    if (heads->pooled_outputs > 0) per_row += 2.0 * h * h + 2.0 * h * heads->pooled_outputs;
    iteration_flops out;
    out.model = 3.0 * (tokens * per_token + rows * per_row);
    out.hardware = out.model + tokens * recomputed_per_token(recompute, m.num_layers, layers, core);
    return out;
}

static double min_layers(int recomputed, int layers) { return recomputed < layers ? recomputed : layers; }

iteration_flops t5_flops_per_iteration(const encoder_decoder_shape *t, double global_batch_size,
                                       const recompute_spec *recompute) {
    model_shape enc = t->encoder;
    enc.causal = 0;
    enc.num_experts = 0;
    model_shape dec = enc;
    dec.causal = 1;
    dec.num_layers = t->decoder_num_layers;
    dec.seq_length = t->decoder_seq_length;
    layer_forward fe = per_token_forward(&enc), fd = per_token_forward(&dec);
    double h = enc.hidden_size, Te = enc.seq_length, Td = dec.seq_length;
    double q = (double)enc.kv_channels * enc.num_attention_heads;
    double kv = (double)enc.kv_channels * enc.num_query_groups;
    double cross_q_out = 2.0 * h * q + 2.0 * q * h;  /* per decoder token */
    double cross_kv = 2.0 * h * 2.0 * kv;            /* per encoder token */
    double cross_core = 2.0 * 2.0 * q * Te;          /* per decoder token: Td x Te, unmasked */
    /* one layer's forward over one sample */
    double enc_layer = Te * (fe.attention_linear + fe.attention_core + fe.dense_mlp);
    double dec_layer = Td * (fd.attention_linear + fd.attention_core + fd.dense_mlp + cross_q_out + cross_core) +
                       Te * cross_kv;
    double logits = Td * 2.0 * h * (double)enc.padded_vocab_size;
    iteration_flops out;
    out.model = 3.0 * global_batch_size * (enc.num_layers * enc_layer + dec.num_layers * dec_layer + logits);
    double again = 0.0;
    if (recompute && recompute->granularity == RECOMPUTE_FULL)
        again = min_layers(recompute->num_layers, enc.num_layers) * enc_layer +
                min_layers(recompute->num_layers, dec.num_layers) * dec_layer;
    else if (recompute && recompute->granularity == RECOMPUTE_SELECTIVE)
        again = enc.num_layers * Te * fe.attention_core + dec.num_layers * Td * (fd.attention_core + cross_core);
    out.hardware = out.model + global_batch_size * again;
    return out;
}

double flops_utilization(double flops_per_second, double peak_flops_per_second) {
    return peak_flops_per_second > 0 ? flops_per_second / peak_flops_per_second : 0.0;
}
