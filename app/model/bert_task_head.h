/* bert_task_head.h: the heads of Megatron's BERT fine-tuning models (megatron/legacy/model/
 * classification.py and multiple_choice.py, run by tasks/main.py) on the encoder's output, in place
 * of the LM and binary heads:
 *   pooled = tanh([CLS] row x pooler.dense.weight^T + bias)        (the language model's pooler)
 *   logits = dropout(pooled, --hidden-dropout) x head.weight^T + head.bias
 * Classification (MNLI): head = classification_head [K, C], one row per sample, K classes.
 * MultipleChoice (RACE): head = multichoice_head [1, C], a row per choice, the logits of a
 * sample's choices side by side ([B / choices, choices]). Loss: the mean cross entropy over the
 * samples against their labels (finetune_utils.py's cross_entropy_loss_func). The head is whole
 * on every tensor-parallel rank (its input and gradient the same everywhere). */
#ifndef BERT_TASK_HEAD_H
#define BERT_TASK_HEAD_H

#include "app/model/bert_heads.h"

typedef struct bert_task_head_config {
    int hidden_size;         /* C */
    int outputs;             /* K per row */
    int choices;             /* rows per sample (1: classification) */
    dropout_rng dropout;     /* p 0 when evaluating; offset: the micro-batch's first row x C */
} bert_task_head_config;

/* On hidden[B T, C] (B rows: samples x choices) of batch, whose is_random[0 .. B / choices)
 * holds the samples' labels (-1: a padding sample, left out of *correct; its loss is that of
 * label 0 and only evaluation may hold one). Returns the mean loss over the samples; *correct =
 * samples whose largest logit is their label. With with_backward: dhidden[B T, C] overwritten
 * with loss_scale x the loss's gradient, grads->pooler_* and task_* accumulated. */
float bert_task_head_forward_backward(const kernel_ops *ops, const bert_task_head_config *cfg,
                                      const bert_batch *batch, const void *hidden,
                                      const bert_heads_view *params, const bert_heads_view *grads,
                                      void *dhidden, float loss_scale, int with_backward, int *correct);

#endif
