/* hf_llama_config.h: Hugging Face LlamaConfig (config.json) as far as it defines our model:
 * read with validation (refusing settings our Llama does not compute: another activation than
 * silu, attention and MLP biases that differ, a rope_scaling other than Llama 3's), and written
 * the way transformers writes it (sorted keys, indent 2). */
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
} hf_llama_config;

/* 1 when the JSON file at path says "model_type": "llama" (0 also for unreadable files: the
 * caller reports those) */
int hf_config_is_llama(const char *path);

/* Returns 0, or -1 with "PATH: what is wrong" in err. */
int hf_llama_config_read(const char *path, hf_llama_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_llama_config_write(const char *path, const hf_llama_config *config, char *err, size_t errlen);

#endif
