/* bert_encoder.c: gpt_model's encoder mode (see bert_encoder.h): the packed BERT inputs into a
 * slot, and the heads of bert_heads.c over the tensor-parallel group. */
#include "app/model/bert_encoder.h"
#include "app/model/bert_task_head.h"
#include "app/core/error.h"
#include "kernels/philox.h"

#include <stdint.h>
#include <stdlib.h>

/* the dropout stream of the task head: apart from the layers' sites (gpt_model.c's SITE_*,
 * mixed with layer + 1 >= 1) */
#define BERT_TASK_DROPOUT_SITE 0x7461736bULL

void bert_encoder_inputs(gpt_model *m, const model_chunk *ch, activation_slot *slot, const int *tokens,
                         const int *targets) {
    const gpt_config *c = &m->config;
    const kernel_ops *ops = m->ops;
    int B = c->micro_batch_size, T = c->seq_length;
    size_t N = (size_t)B * T;
    const int *types = tokens + N, *padding = tokens + 2 * N;
    int *valid = malloc(sizeof(int) * N);
    CHECK(valid, "out of host memory");
    for (size_t i = 0; i < N; i++) valid[i] = padding[i] == 1;
    ops->copy_from_host(slot->key_valid, valid, sizeof(int) * N);
    free(valid);
    if (slot->types) ops->copy_from_host(slot->types, types, sizeof(int) * N);
    if (!ch->post_process) return;
    /* bert_batch_upload reads the dataset's int64 fields */
    int64_t *wide = malloc(sizeof(int64_t) * 5 * N);
    CHECK(wide, "out of host memory");
    const int *fields[5] = {tokens, types, targets, padding, targets + N};  /* text types labels padding loss */
    for (int f = 0; f < 5; f++)
        for (size_t i = 0; i < N; i++) wide[f * N + i] = fields[f][i];
    bert_host_batch host = {wide, wide + N, wide + 2 * N, wide + 3 * N, wide + 4 * N, targets + 2 * N};
    bert_batch_upload(ops, &host, B, T, c->padded_vocab_size, &slot->bert);
    free(wide);
}

double bert_encoder_heads(gpt_model *m, model_chunk *ch, activation_slot *slot, float grad_scale,
                          int with_backward) {
    const gpt_config *c = &m->config;
    bert_heads_config cfg = {c->hidden_size, c->padded_vocab_size, c->bert_binary_head, c->layernorm_epsilon,
                             m->capture_logits, m->capture_binary_logits};
    if (c->bert_task_outputs > 0) {  /* finetune_bert: the task head alone */
        /* the dropout mask numbered over the rows of the global batch (first_sample counts rows:
         * a RACE sample's choices are rows of their own): (row, column) */
        micro_batch_rng rng = m->bert_task_rng;
        bert_task_head_config task = {c->hidden_size, c->bert_task_outputs, c->bert_task_choices,
                                      {rng.training ? c->hidden_dropout : 0.0f, c->seed,
                                       philox_stream_mix(rng.iteration, BERT_TASK_DROPOUT_SITE),
                                       (uint64_t)rng.first_sample * (uint64_t)c->hidden_size}};
        int correct = 0;
        float loss = bert_task_head_forward_backward(m->ops, &task, &slot->bert, slot->lnf, &ch->weights.bert,
                                                     &ch->grads.bert, slot->d_lnf, grad_scale, with_backward, &correct);
        m->bert_lm_loss += loss;
        m->bert_task_correct += correct;
        return loss;
    }
    tensor_parallel_comm tp = {m->comm, m->tp_group, m->ops};
    float lm_loss = 0.0f, sop_loss = 0.0f;
    bert_heads_forward_backward(m->ops, c->tp_size > 1 ? &tp : NULL, &cfg, &slot->bert, slot->lnf,
                                ch->weights.output_layer, &ch->weights.bert, &ch->grads.bert,
                                ch->grads.output_layer, slot->d_lnf, grad_scale, with_backward, &lm_loss,
                                &sop_loss);
    m->bert_lm_loss += lm_loss;
    m->bert_sop_loss += sop_loss;
    return (double)lm_loss + (double)sop_loss;
}
