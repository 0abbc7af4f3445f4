/* hf_llama_config.h: Hugging Face LlamaConfig and MixtralConfig (config.json) as far as they
 * define our model: read with validation (refusing settings our Llama does not compute: another
 * activation than silu, attention and MLP biases that differ, a rope_scaling other than Llama
 * 3's; for Mixtral a sliding window shorter than the context, rope scaling or biases), and
 * written the way transformers writes it (sorted keys, indent 2).
 *
 * Mixtral's routing (MixtralSparseMoeBlock: softmax over every expert's router logit, the top
 * num_experts_per_tok, their weights renormalized to sum 1) is Megatron's TopKRouter with
 * --moe-router-score-function softmax and without --moe-router-pre-softmax (softmax over the
 * top-k logits: exp(l_i) / sum over the top k of exp(l_j), the same numbers), dropless, no
 * top-k scaling factor and no expert bias.
 *
 * Qwen2MoeConfig (model_type "qwen2_moe", Qwen2MoeSparseMoeBlock): softmax over every expert,
 * the top num_experts_per_tok, renormalized only with norm_topk_prob (false: the plain softmax
 * probabilities, Megatron's --moe-router-pre-softmax; true: Mixtral's routing), plus a shared
 * expert of shared_expert_intermediate_size gated per token by sigmoid(shared_expert_gate x)
 * (--moe-shared-expert-intermediate-size with --moe-shared-expert-gate); biases on q, k and v only
 * (qkv_bias, default true: --add-qkv-bias with --disable-bias-linear). Layer l is sparse when it
 * is not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0, else a dense SwiGLU MLP of
 * intermediate_size (a --moe-layer-freq list); experts are moe_intermediate_size wide. Sliding
 * windows (use_sliding_window) are refused as for Mixtral. */
#ifndef HF_LLAMA_CONFIG_H
#define HF_LLAMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "app/model/gpt_model.h"

typedef struct hf_llama_config {
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    int64_t num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings;
    double rms_norm_eps, rope_theta;
    int tie_word_embeddings;
    int bias;                    /* attention_bias (= mlp_bias: Megatron has one add_bias_linear) */
    int rope_scaling;            /* rope_scaling {"rope_type": "llama3", low_freq_factor 1,
                                  * high_freq_factor 4, original_max_position_embeddings 8192} */
    double rope_scaling_factor;  /* its "factor" */
    char torch_dtype[16];        /* "float32", "bfloat16", ... */
    /* MixtralConfig (model_type "mixtral"); mixtral 0 for Llama */
    int mixtral;
    int64_t num_local_experts, num_experts_per_tok;  /* intermediate_size is an expert's width */
    double router_aux_loss_coef;  /* carried as Megatron's --moe-aux-loss-coeff (HF applies it to
                                   * one loss over every layer's tokens, Megatron to each layer's) */
    double router_jitter_noise;   /* training only; not carried */
    /* Qwen2MoeConfig (model_type "qwen2_moe"); qwen2_moe 0 otherwise. num_local_experts and
     * num_experts_per_tok hold its num_experts and num_experts_per_tok, router_aux_loss_coef its
     * own; intermediate_size is the dense layers' width */
    int qwen2_moe;
    int64_t moe_intermediate_size, shared_expert_intermediate_size;
    int norm_topk_prob;           /* renormalize the top-k probabilities */
    int qkv_bias;                 /* q_proj, k_proj, v_proj have biases */
    unsigned char sparse_layer[GPT_MAX_MOE_LAYERS]; /* layer l has experts (from decoder_sparse_step
                                                     * and mlp_only_layers) */
} hf_llama_config;

/* 1 when the JSON file at path says "model_type": "llama", "mixtral" or "qwen2_moe" (0 also for
 * unreadable files: the caller reports those) */
int hf_config_is_llama(const char *path);

/* the config key of a Hugging Face config with shared experts that cannot be converted
 * (DeepSeek's "n_shared_experts", nonzero; Qwen2-MoE's are: hf_llama_config_read), or NULL */
const char *hf_config_shared_expert_key(const char *path);

/* Returns 0, or -1 with "PATH: what is wrong" in err. */
int hf_llama_config_read(const char *path, hf_llama_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_llama_config_write(const char *path, const hf_llama_config *config, char *err, size_t errlen);

#endif
