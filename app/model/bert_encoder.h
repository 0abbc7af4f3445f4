/* bert_encoder.h: the encoder mode of gpt_model (gpt_config.bert, Megatron-Core's BertModel):
 * what a BERT micro-batch brings to each chunk, and BERT's heads and loss on the last chunk in
 * place of the output layer and the per-token cross entropy. gpt_model.c calls these; the
 * transformer layers are GPT's, with attention_padded_* for the attention core. */
#ifndef BERT_ENCODER_H
#define BERT_ENCODER_H

#include "app/model/gpt_model.h"

/* the packed host inputs of gpt_chunk_forward's encoder mode into the slot: the padding mask
 * (every chunk), the token types (first chunk, with the binary head), the masked positions and
 * targets (last chunk: slot->bert). Labels outside the vocabulary end the job (user_error). */
void bert_encoder_inputs(gpt_model *m, const model_chunk *ch, activation_slot *slot, const int *tokens,
                         const int *targets);

/* the heads on slot->lnf (the final norm's gathered output): returns lm_loss + sop_loss of the
 * micro-batch and adds them to m->bert_lm_loss / bert_sop_loss; with_backward: slot->d_lnf =
 * grad_scale x their gradient, the heads' gradients (and the tied output layer's) accumulated */
double bert_encoder_heads(gpt_model *m, model_chunk *ch, activation_slot *slot, float grad_scale,
                          int with_backward);

#endif
