/* convert_bert.h: convert_checkpoint's BERT direction pair: a pretrain_bert checkpoint (our
 * encoder mode: Megatron's pre-LN BERT) to Hugging Face MegatronBertForPreTraining, or
 * MegatronBertForMaskedLM without the binary head (model.safetensors + config.json), and back;
 * the tensor mapping is app/model/hf_bert_layout.h, the config app/model/hf_bert_config.h. */
#ifndef CONVERT_BERT_H
#define CONVERT_BERT_H

#include <stdint.h>

#include "app/convert_hf_source.h"
#include "io/checkpoint_serial.h"

/* 1 when the checkpoint holds a BERT: pretrain_bert's (its LM head, lm_head.dense.weight) or
 * finetune_bert's (a task head) */
int bert_checkpoint(const checkpoint_reader *reader);

/* writes OUTPUT/config.json and OUTPUT/model.safetensors from an open, verified checkpoint;
 * everything is checked before anything is written; a checkpoint whose model MegatronBert does
 * not compute (RMSNorm, SwiGLU, grouped-query attention, ...) or a finetune_bert checkpoint
 * (no LM head) is refused, naming why */
void bert_export_to_hf(const checkpoint_reader *reader, const char *output, int bfloat16, int overwrite);

/* writes SAVE/release.h5 and the tracker "release" from an open Hugging Face MegatronBert
 * source (a "bert" config is refused: post-LN) */
void bert_import_from_hf(hf_source *s, const char *input, const char *save, int64_t vocab_divisible_by,
                         int overwrite);

#endif
