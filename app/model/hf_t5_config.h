/* hf_t5_config.h: Hugging Face T5Config (config.json, model_type "t5") as far as it defines our
 * T5: read with validation, refusing what our model does not compute (the original T5's ReLU
 * MLP, T5 v1.1's gated GeLU, a tied lm_head, which HF scales by d_model^-0.5 and our T5LMHead
 * would give a bias), and written the way transformers writes it (sorted keys, indent 2).
 * What T5ForConditionalGeneration then computes is ours with --position-embedding-type relative,
 * --normalization RMSNorm, --disable-bias-linear, --untie-embeddings-and-output-weights, and
 * feed_forward_proj "gated-silu" (--swiglu), "gelu" (the exact GeLU Megatron's MLP computes
 * without linear biases, which turns the bias-GeLU fusion off) or "gelu_new" /
 * "gelu_pytorch_tanh" (the tanh approximation: a checkpoint whose bias_gelu_fusion says so, kept
 * by --use-checkpoint-args). HF's defaults fill what config.json leaves out (T5Config's). */
#ifndef HF_T5_CONFIG_H
#define HF_T5_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct hf_t5_config {
    int64_t vocab_size, d_model, d_kv, d_ff, num_layers, num_decoder_layers, num_heads;
    int64_t relative_attention_num_buckets, relative_attention_max_distance;
    int64_t pad_token_id, eos_token_id, decoder_start_token_id;
    double layer_norm_epsilon, dropout_rate;
    int gated;                 /* feed_forward_proj gated-silu (else GeLU) */
    int gelu_erf;              /* not gated: "gelu", the exact form (else gelu_new, tanh) */
    char torch_dtype[16];      /* "float32", "bfloat16", ... */
} hf_t5_config;

/* 1 when the JSON file at path says "model_type": "t5" (0 also for unreadable files) */
int hf_config_is_t5(const char *path);

/* Returns 0, or -1 with "PATH: what is wrong" in err (a refused setting named with why). */
int hf_t5_config_read(const char *path, hf_t5_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_t5_config_write(const char *path, const hf_t5_config *config, char *err, size_t errlen);

#endif
