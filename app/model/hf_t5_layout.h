/* hf_t5_layout.h: how our T5 parameters (Megatron-Core's T5Model names and layouts, global
 * shapes) map onto Hugging Face T5ForConditionalGeneration tensors, and the element permutations
 * between them; the list drives both directions of convert_checkpoint. Only the T5 our model
 * computes exactly as HF's has a layout (hf_t5_config.h refuses the others): relative positions,
 * RMSNorm without biases, no linear biases, an untied output layer, a GeLU or SwiGLU MLP.
 *   embedding.word_embeddings.weight [Vp, C]       shared.weight [V, C] (padding rows dropped)
 *   encoder_relative_pos_emb.relative_attention_bias.weight [buckets, H]
 *                                 encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
 *   decoder_relative_pos_emb...   decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
 *   encoder.layers.L.self_attention.linear_qkv.layer_norm_weight   encoder.block.L.layer.0.layer_norm.weight
 *   ....self_attention.linear_qkv.weight [3HD, C]  ....layer.0.SelfAttention.{q,k,v}.weight [HD, C]
 *   ....self_attention.linear_proj.weight [C, HD]  ....layer.0.SelfAttention.o.weight
 *   decoder.layers.L.pre_cross_attn_layernorm.weight               decoder.block.L.layer.1.layer_norm.weight
 *   ....cross_attention.linear_q.weight [HD, C]    ....layer.1.EncDecAttention.q.weight
 *   ....cross_attention.linear_kv.weight [2HD, C]  ....layer.1.EncDecAttention.{k,v}.weight
 *   ....cross_attention.linear_proj.weight         ....layer.1.EncDecAttention.o.weight
 *   ....mlp.linear_fc1.layer_norm_weight           ....layer.F.layer_norm.weight (F: 1 encoder, 2 decoder)
 *   ....mlp.linear_fc1.weight [F or 2F, C]         ....layer.F.DenseReluDense.wi.weight, or wi_0 and wi_1
 *                                                  (SwiGLU [gate; up]: HF's gated-silu computes
 *                                                  wo(silu(wi_0 x) * wi_1 x))
 *   ....mlp.linear_fc2.weight [C, F]               ....layer.F.DenseReluDense.wo.weight
 *   encoder.final_layernorm.weight                 encoder.final_layer_norm.weight (decoder likewise)
 *   lm_head.output_layer.weight [Vp, C]            lm_head.weight [V, C]
 * Both sides store linear weights [out, in]. Rows move:
 * - linear_qkv is per head [q, k, v] (D rows each); HF has q, k, v of H*D rows, head-major.
 * - linear_kv is per head [k, v]; HF has EncDecAttention.k and .v.
 * - HF's T5Attention does not scale the scores by 1/sqrt(D) (T5 folds it into the initialization);
 *   ours does, after which the relative bias is added. HF's q weights are ours / sqrt(D), so that
 *   both compute the same scores; with D a power of 4 (16, 64, ...) sqrt(D) is a power of 2 and
 *   the conversion is exact both ways, else within a rounding of each weight.
 * - --apply-layernorm-1p stores norm weights as w - 1; HF stores w. */
#ifndef HF_T5_LAYOUT_H
#define HF_T5_LAYOUT_H

#include <stdint.h>

typedef struct t5_dims {
    int64_t encoder_layers, decoder_layers, hidden, heads, head_dim, ffn_hidden;
    int64_t vocab, padded_vocab;   /* the tokenizer's, and ours padded for the embedding table */
    int64_t buckets;               /* --relative-attention-num-buckets */
    int gated;                     /* SwiGLU (HF gated-silu: wi_0, wi_1); else GeLU (wi) */
    int layernorm_1p;              /* our norm weights are stored as w - 1 */
} t5_dims;

typedef enum t5_transform {
    T5_COPY,        /* same layout */
    T5_NORM,        /* a norm weight: the same, or + 1 with layernorm_1p */
    T5_VOCAB_ROWS,  /* our padded_vocab rows <-> HF's vocab rows (padding dropped / zero) */
    T5_QKV,         /* per-head [q, k, v] rows <-> q (scaled by 1/sqrt(D)), k, v */
    T5_CROSS_Q,     /* linear_q <-> EncDecAttention.q, scaled by 1/sqrt(D) */
    T5_CROSS_KV,    /* per-head [k, v] rows <-> EncDecAttention.k, .v */
    T5_GATE_UP      /* fc1 [gate; up] rows <-> wi_0, wi_1 */
} t5_transform;

enum { HF_T5_MAX_PARTS = 3 };

typedef struct hf_t5_tensor {
    char ours[96];                 /* Megatron name, as in /model */
    int ndim;                      /* 1 or 2, on both sides */
    int64_t our_shape[2];
    t5_transform transform;
    int parts;                     /* HF tensors it is made of: 1, 2 or 3 */
    char hf[HF_T5_MAX_PARTS][96];
    int64_t hf_shape[HF_T5_MAX_PARTS][2];
} hf_t5_tensor;

/* the tensors of a T5 of these dimensions, one per global parameter of the GPT parameter table
 * in T5 mode, in our parameter order; malloc'd list, count in *count. Dimensions beyond an int
 * are a user error. */
hf_t5_tensor *hf_t5_tensor_list(const t5_dims *dims, int *count);

/* elements of our side, and of HF part p */
int64_t hf_t5_our_elements(const hf_t5_tensor *t);
int64_t hf_t5_hf_elements(const hf_t5_tensor *t, int part);

/* ours[our_shape] -> hf[p][hf_shape[p]] for each part, and back (padding rows become zeros) */
void hf_t5_to_hf(const hf_t5_tensor *t, const t5_dims *dims, const float *ours, float *const *hf);
void hf_t5_from_hf(const hf_t5_tensor *t, const t5_dims *dims, const float *const *hf, float *ours);

#endif
