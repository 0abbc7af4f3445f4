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
 * top-k scaling factor and no expert bias. */
#ifndef HF_LLAMA_CONFIG_H
#define HF_LLAMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

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
} hf_llama_config;

/* 1 when the JSON file at path says "model_type": "llama" or "mixtral" (0 also for unreadable
 * files: the caller reports those) */
int hf_config_is_llama(const char *path);

/* the config key of a Hugging Face config with shared experts (Qwen2-MoE's
 * "shared_expert_intermediate_size", DeepSeek's "n_shared_experts", nonzero), or NULL */
const char *hf_config_shared_expert_key(const char *path);

/* Returns 0, or -1 with "PATH: what is wrong" in err. */
int hf_llama_config_read(const char *path, hf_llama_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_llama_config_write(const char *path, const hf_llama_config *config, char *err, size_t errlen);

#endif
