/* hf_llama_layout.h: how our Llama-architecture parameters (Megatron-Core names and layouts,
 * global shapes) map onto Hugging Face LlamaForCausalLM tensors, and the element permutations
 * between them; the list below drives both directions of convert_checkpoint. For example:
 *   embedding.word_embeddings.weight [Vp, C]        model.embed_tokens.weight [V, C] (padding dropped)
 *   ...self_attention.linear_qkv.layer_norm_weight   model.layers.L.input_layernorm.weight
 *   ...self_attention.linear_qkv.weight [(H+2G)D, C] model.layers.L.self_attn.{q,k,v}_proj.weight
 *   ...self_attention.linear_proj.weight [C, HD]    model.layers.L.self_attn.o_proj.weight
 *   ...mlp.linear_fc1.layer_norm_weight             model.layers.L.post_attention_layernorm.weight
 *   ...mlp.linear_fc1.weight [2F, C]                 model.layers.L.mlp.{gate,up}_proj.weight [F, C]
 *   ...mlp.linear_fc2.weight [C, F]                  model.layers.L.mlp.down_proj.weight
 *   decoder.final_layernorm.weight                   model.norm.weight
 * and, for a mixture of experts (MixtralForCausalLM, every layer MoE), in place of the MLP:
 *   ...pre_mlp_layernorm.weight                      model.layers.L.post_attention_layernorm.weight
 *   ...mlp.router.weight [E, C]                      model.layers.L.block_sparse_moe.gate.weight
 *   ...mlp.experts.local_experts.X.linear_fc1.weight  ...block_sparse_moe.experts.X.{w1,w3}.weight [Fm, C]
 *   ...mlp.experts.local_experts.X.linear_fc2.weight  ...block_sparse_moe.experts.X.w2.weight [C, Fm]
 *   output_layer.weight [Vp, C] (untied only)        lm_head.weight [V, C]
 * and for Qwen2MoeForCausalLM (MoE layers from a --moe-layer-freq list, dense ones between them
 * named as Llama's; biases on q, k and v only, --add-qkv-bias):
 *   ...self_attention.linear_qkv.bias [(H+2G)D]      model.layers.L.self_attn.{q,k,v}_proj.bias
 *   ...mlp.router.weight [E, C]                      model.layers.L.mlp.gate.weight
 *   ...mlp.experts.local_experts.X.linear_fc1.weight  ...mlp.experts.X.{gate,up}_proj.weight [Fm, C]
 *   ...mlp.experts.local_experts.X.linear_fc2.weight  ...mlp.experts.X.down_proj.weight [C, Fm]
 *   ...mlp.shared_experts.linear_fc1.weight [2Fs, C]  ...mlp.shared_expert.{gate,up}_proj.weight
 *   ...mlp.shared_experts.linear_fc2.weight [C, Fs]   ...mlp.shared_expert.down_proj.weight
 *   ...mlp.shared_experts.gate_weight [1, C]          ...mlp.shared_expert_gate.weight
 * Both sides store linear weights [out, in] (torch.nn.Linear), so only rows move:
 * - Megatron-Core's linear_qkv rows are grouped per query group, [q of its H/G heads..., k, v],
 *   each D rows; HF has separate q_proj (H*D rows, head-major), k_proj and v_proj (G*D rows).
 *   Query head h belongs to group h / (H/G) on both sides (HF's repeat_kv), so a row moves whole.
 * - fc1 is [gate; up] (Megatron's SwiGLU: silu of the first half times the second half), HF
 *   computes down(silu(gate_proj x) * up_proj x); an expert's fc1 likewise [w1; w3], HF's expert
 *   computing w2(silu(w1 x) * w3 x) (Megatron's tools/checkpoint/loader_mixtral_hf.py
 *   concatenates w1 and w3 in this order).
 * - The router's rows are the experts, in the same order on both sides.
 * - RoPE: our non-interleaved rotary embedding turns pairs (i, i + D/2) of a head, which is HF's
 *   rotate_half on the same channel order, so q and k rows need no permutation (the permutation
 *   Megatron's converters apply is for Meta's original, interleaved checkpoints).
 * - --apply-layernorm-1p stores norm weights as w - 1; HF stores w. */
#ifndef HF_LLAMA_LAYOUT_H
#define HF_LLAMA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct llama_dims {
    int64_t num_layers, hidden, heads, groups, head_dim, ffn_hidden, positions;
    int64_t vocab, padded_vocab;   /* the tokenizer's, and ours padded for the embedding table */
    int untied;                    /* a separate output layer (HF lm_head.weight) */
    int bias;                      /* linear biases (Megatron's add_bias_linear; HF attention_bias
                                    * and mlp_bias) */
    int layernorm_1p;              /* our norm weights are stored as w - 1 */
    int64_t num_experts;           /* 0: dense MLPs (LlamaForCausalLM); else every layer is a
                                    * mixture of num_experts SwiGLU experts (MixtralForCausalLM) */
    int64_t moe_ffn_hidden;        /* an expert's width (HF Mixtral's intermediate_size) */
    /* Qwen2MoeForCausalLM (qwen2_moe 1): its names, dense layers where moe_layer[l] is 0, shared
     * experts of shared_ffn_hidden with their gate, biases on q, k and v (qkv_bias) */
    int qwen2_moe;
    int qkv_bias;                  /* linear_qkv has a bias without the others (--add-qkv-bias) */
    int64_t shared_ffn_hidden;
    const unsigned char *moe_layer; /* [num_layers] 1 where a layer has experts; NULL: every layer */
} llama_dims;

typedef enum llama_transform {
    LLAMA_COPY,        /* same layout */
    LLAMA_NORM,        /* a norm weight: the same, or + 1 with layernorm_1p */
    LLAMA_VOCAB_ROWS,  /* our padded_vocab rows <-> HF's vocab rows (padding dropped / zero) */
    LLAMA_QKV,         /* grouped qkv rows <-> q_proj, k_proj, v_proj */
    LLAMA_GATE_UP      /* fc1 [gate; up] rows <-> gate_proj, up_proj (an expert's w1, w3) */
} llama_transform;

enum { HF_LLAMA_MAX_PARTS = 3 };

typedef struct hf_llama_tensor {
    char ours[96];                 /* Megatron name, as in /model */
    int ndim;                      /* 1 or 2, on both sides */
    int64_t our_shape[2];
    llama_transform transform;
    int parts;                     /* HF tensors it is made of: 1, 3 (q, k, v) or 2 (gate, up) */
    char hf[HF_LLAMA_MAX_PARTS][96];
    int64_t hf_shape[HF_LLAMA_MAX_PARTS][2];
} hf_llama_tensor;

/* The tensors of a Llama model of these dimensions (RMSNorm, SwiGLU, RoPE, grouped-query
 * attention; with num_experts, Mixtral's experts in every layer), one per global parameter of
 * the GPT parameter table, in our parameter order;
 * malloc'd list, count in *count. Dimensions beyond an int are a user error. */
hf_llama_tensor *hf_llama_tensor_list(const llama_dims *dims, int *count);

/* elements of our side, and of HF part p */
int64_t hf_llama_our_elements(const hf_llama_tensor *t);
int64_t hf_llama_hf_elements(const hf_llama_tensor *t, int part);

/* ours[our_shape] -> hf[p][hf_shape[p]] for each part, and back (padding rows become zeros) */
void hf_llama_to_hf(const hf_llama_tensor *t, const llama_dims *dims, const float *ours, float *const *hf);
void hf_llama_from_hf(const hf_llama_tensor *t, const llama_dims *dims, const float *const *hf, float *ours);

/* where row r of our linear_qkv goes: part (0 q, 1 k, 2 v) and row within that HF tensor */
void hf_llama_qkv_row(int64_t row, const llama_dims *dims, int *part, int64_t *hf_row);

/* The row transforms the Hugging Face layouts share (this one, hf_t5_layout.c's); to_hf 1 moves
 * ours -> hf, 0 hf -> ours. copy: the same bytes; norm: n weights, hf = ours + shift (1 with
 * --apply-layernorm-1p); vocab: HF's first kept_bytes of our our_bytes (padding rows dropped, or
 * zeros coming back); split: ours is `parts` blocks of part_bytes, HF one tensor each. */
void hf_rows_copy(float *ours, float *hf, size_t bytes, int to_hf);
void hf_rows_norm(float *ours, float *hf, int64_t n, float shift, int to_hf);
void hf_rows_vocab(float *ours, float *hf, size_t kept_bytes, size_t our_bytes, int to_hf);
void hf_rows_split(float *ours, float *const *hf, int parts, size_t part_bytes, int to_hf);

#endif
