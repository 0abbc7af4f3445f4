/* convert_hf_source.h: convert_checkpoint's side of a Hugging Face model folder: the one
 * model.safetensors or the shards a model.safetensors.index.json names, the config.json beside
 * them, tensors looked up by name (with or without GPT-2's "transformer." prefix) and marked used
 * so that tensors no parameter claims can be named; and the converter's file helpers. */
#ifndef CONVERT_HF_SOURCE_H
#define CONVERT_HF_SOURCE_H

#include "io/checkpoint_format.h"
#include "io/checkpoint_serial.h"
#include "io/safetensors.h"

enum { path_max = CHECKPOINT_PATH_MAX + 64, error_max = 8192 };

typedef struct hf_source {
    char config_path[path_max + 32];
    int num_files;
    safetensors_file *files;
    char **used;               /* per file, per tensor: matched by a parameter */
} hf_source;

/* opens HF_DIR (model.safetensors, or the index and its shards) or one .safetensors file;
 * a user error when there is none */
void hf_source_open(const char *input, hf_source *s);
void hf_source_close(hf_source *s);

/* finds name, or name without its "transformer." prefix (GPT2Model exports), and marks it used;
 * NULL when absent */
const safetensors_tensor *hf_source_find(hf_source *s, const char *name, const safetensors_file **in);

/* finds one parameter's tensor and checks its shape and dtype (F32, F16, BF16 or F64); a missing
 * or misshapen tensor is a user error whose line ends with `config_summary` (what config.json
 * says) */
const safetensors_tensor *hf_source_checked(hf_source *s, const char *name, int ndim, const int64_t *shape,
                                            const char *config_summary, const safetensors_file **in);

/* 1 when lm_head.weight exists ([vocab, hidden]) and differs from the embedding `embed`: an untied
 * output layer */
int hf_source_lm_head_untied(hf_source *s, int64_t vocab, int64_t hidden, const safetensors_tensor *embed,
                             const safetensors_file *embed_file, const char *config_summary);

/* a floating-point tensor as float32, malloc'd */
float *hf_source_read_float32(const safetensors_file *file, const safetensors_tensor *t);

int convert_exists(const char *path);
int convert_is_folder(const char *path);
/* a user error when path exists and overwrite is 0 */
void convert_refuse_existing(const char *path, int overwrite);

/* an import's output: the writer of SAVE's release checkpoint (its file and tracker refused
 * when they exist and overwrite is 0; their names in *release), and its commit with a fresh
 * run's rng seed and scheduler (every tensor and argument written before) */
checkpoint_writer *convert_release_writer(const char *save, int overwrite, checkpoint_names *release);
void convert_release_commit(checkpoint_writer *w);

#endif
