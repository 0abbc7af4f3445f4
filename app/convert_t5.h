/* convert_t5.h: convert_checkpoint's T5 direction pair: our checkpoint of a T5 (pretrain_t5) to
 * Hugging Face T5ForConditionalGeneration (model.safetensors + config.json) and back, for the
 * T5 our model computes exactly as HF's (relative positions, RMSNorm, no biases, untied lm_head,
 * GeLU or SwiGLU: app/model/hf_t5_config.h); the others are refused naming what is missing. The
 * tensor mapping is app/model/hf_t5_layout.h. */
#ifndef CONVERT_T5_H
#define CONVERT_T5_H

#include "app/convert_hf_source.h"
#include "io/checkpoint_serial.h"

/* 1 when the checkpoint holds a T5 (an encoder-decoder: encoder.final_layernorm.weight) */
int t5_checkpoint(const checkpoint_reader *reader);

/* writes OUTPUT/config.json and OUTPUT/model.safetensors from an open, verified checkpoint;
 * everything is checked before anything is written */
void t5_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int overwrite);

/* writes SAVE/release.h5 and the tracker "release" from an open Hugging Face T5 source */
void t5_import_from_hf(hf_source *s, const char *input, const char *save, int64_t vocab_divisible_by, int overwrite);

#endif
