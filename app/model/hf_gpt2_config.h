/* hf_gpt2_config.h: Hugging Face GPT2Config (config.json) as far as it defines our model:
 * read with validation (refusing settings our model does not compute, such as another
 * activation function), and written the way transformers writes it (sorted keys, indent 2). */
#ifndef HF_GPT2_CONFIG_H
#define HF_GPT2_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct hf_gpt2_config {
    int64_t vocab_size, n_positions, n_embd, n_layer, n_head;
    int64_t n_inner;             /* resolved: 4 * n_embd when config.json says null */
    double layer_norm_epsilon;
    int tie_word_embeddings;
    char torch_dtype[16];        /* "float32", "bfloat16", ... */
} hf_gpt2_config;

/* Returns 0, or -1 with "PATH: what is wrong" in err. */
int hf_gpt2_config_read(const char *path, hf_gpt2_config *config, char *err, size_t errlen);

/* Writes path (not atomically: the caller writes a .tmp and renames). 0, or -1 with err. */
int hf_gpt2_config_write(const char *path, const hf_gpt2_config *config, char *err, size_t errlen);

#endif
