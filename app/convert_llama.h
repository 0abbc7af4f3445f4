/* convert_llama.h: convert_checkpoint's Llama direction pair: our checkpoint of a
 * Llama-architecture model (RMSNorm, SwiGLU, RoPE, grouped-query attention) to Hugging Face
 * LlamaForCausalLM (model.safetensors + config.json) and back; the tensor mapping is
 * app/model/hf_llama_layout.h, the config app/model/hf_llama_config.h. */
#ifndef CONVERT_LLAMA_H
#define CONVERT_LLAMA_H

#include <stdint.h>

#include "app/convert_hf_source.h"
#include "io/checkpoint_serial.h"

/* 1 when the checkpoint's /args describe the Llama family (RMSNorm, SwiGLU or rotary
 * embeddings), which has no GPT-2 layout */
int llama_checkpoint(const checkpoint_reader *reader);

/* writes OUTPUT/config.json and OUTPUT/model.safetensors from an open, verified checkpoint, or,
 * past max_shard_bytes, OUTPUT/model-0000K-of-0000N.safetensors and model.safetensors.index.json
 * as transformers' save_pretrained shards; everything is checked before anything is written,
 * and one shard's tensors are in memory at a time */
void llama_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int64_t max_shard_bytes,
                        int overwrite);

/* writes SAVE/release.h5 and the tracker "release" from an open Hugging Face Llama source */
void llama_import_from_hf(hf_source *s, const char *input, const char *save, int64_t vocab_divisible_by,
                          int overwrite);

#endif
