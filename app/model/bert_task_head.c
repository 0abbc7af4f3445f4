/* bert_task_head.c: the classification and multiple-choice heads of BERT fine-tuning (see
 * bert_task_head.h). Backward: linear y = x W^T + b gives dx = dy W, dW += dy^T x, db += colsum dy
 * (matmul_backward); dropout's backward applies the same mask and scale; tanh' = 1 - y^2; the
 * cross entropy gives (softmax - onehot) x loss_scale / samples (cross_entropy_fused); the [CLS]
 * rows scatter back into an otherwise zero gradient (moe_uncombine). */
#include "app/model/bert_task_head.h"
#include "app/core/error.h"

#include <stdlib.h>
#include <string.h>

/* the samples whose largest logit (the first of equal ones, as torch.argmax on the CPU) is
 * their label; logits [samples, classes] in the compute dtype */
static int count_correct(const kernel_ops *ops, const void *logits, const int *labels, int samples, int classes) {
    size_t n = (size_t)samples * classes;
    float *host = malloc(sizeof(float) * n), *wide = ops->alloc(sizeof(float) * n);
    CHECK(host, "out of memory");
    ops->act_to_float(wide, logits, n);
    ops->copy_to_host(host, wide, sizeof(float) * n);
    ops->release(wide);
    int correct = 0;
    for (int s = 0; s < samples; s++) {
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (host[(size_t)s * classes + k] > host[(size_t)s * classes + best]) best = k;
        correct += labels[s] >= 0 && best == labels[s];
    }
    free(host);
    return correct;
}

float bert_task_head_forward_backward(const kernel_ops *ops, const bert_task_head_config *cfg,
                                      const bert_batch *batch, const void *hidden,
                                      const bert_heads_view *p, const bert_heads_view *g,
                                      void *dhidden, float loss_scale, int with_backward, int *correct) {
    int B = batch->B, C = cfg->hidden_size, K = cfg->outputs;
    int samples = B / cfg->choices, classes = cfg->choices > 1 ? cfg->choices : K;
    size_t N = (size_t)B * batch->T, a = ops->act_bytes;
    /* the labels: padding samples (-1) count as class 0 in the loss, never as correct */
    int *labels = malloc(sizeof(int) * (size_t)samples), *targets_host = malloc(sizeof(int) * (size_t)samples);
    CHECK(labels && targets_host, "out of memory");
    ops->copy_to_host(labels, batch->is_random, sizeof(int) * (size_t)samples);
    for (int s = 0; s < samples; s++) {
        if (labels[s] >= classes || (labels[s] < 0 && with_backward))
            user_error("fine-tuning sample %d of the micro-batch: label %d is outside [0, %d)", s, labels[s], classes);
        targets_host[s] = labels[s] < 0 ? 0 : labels[s];
    }
    int *targets = ops->alloc(sizeof(int) * (size_t)samples);
    ops->copy_from_host(targets, targets_host, sizeof(int) * (size_t)samples);
    void *x = ops->alloc((size_t)B * C * a), *pre = ops->alloc((size_t)B * C * a),
         *pooled = ops->alloc((size_t)B * C * a), *dropped = ops->alloc((size_t)B * C * a),
         *logits = ops->alloc((size_t)B * K * a), *dpooled = ops->alloc((size_t)B * C * a),
         *dx = ops->alloc((size_t)B * C * a);
    float *scratch = ops->alloc(sizeof(float) * 4 * (size_t)samples);
    ops->gather_rows(x, hidden, batch->cls_rows, B, C);
    ops->matmul_forward(pre, NULL, x, p->pooler_weight, p->pooler_bias, B, C, C);
    ops->tanh_forward(pooled, pre, (size_t)B * C);
    ops->dropout_forward(dropped, pooled, (size_t)B * C, cfg->dropout);
    ops->matmul_forward(logits, NULL, dropped, p->task_weight, p->task_bias, B, C, K);
    *correct = count_correct(ops, logits, labels, samples, classes);
    /* logits [B, K] read as [samples, classes]: K = 1 and a sample's choices side by side */
    float *losses = scratch, *row_max = scratch + samples, *sum_exp = scratch + 2 * samples,
          *target_logit = scratch + 3 * samples;
    ops->cross_entropy_fused(losses, logits, row_max, sum_exp, target_logit, targets, samples, classes,
                             loss_scale / (float)samples);
    float *host_losses = malloc(sizeof(float) * (size_t)samples);
    CHECK(host_losses, "out of memory");
    ops->copy_to_host(host_losses, losses, sizeof(float) * (size_t)samples);
    double sum = 0.0;
    for (int s = 0; s < samples; s++) sum += host_losses[s];
    free(host_losses);
    if (with_backward) {  /* logits now hold d loss / d logits */
        ops->matmul_backward(dpooled, g->task_weight, g->task_bias, logits, dropped, p->task_weight, B, C, K);
        ops->dropout_backward(dpooled, dpooled, (size_t)B * C, cfg->dropout);
        ops->tanh_backward(dpooled, pooled, dpooled, (size_t)B * C);
        ops->matmul_backward(dx, g->pooler_weight, g->pooler_bias, dpooled, x, p->pooler_weight, B, C, C);
        ops->moe_uncombine(dhidden, dx, batch->cls_slot, (int)N, 1, C);
    }
    void *buffers[] = {x, pre, pooled, dropped, logits, dpooled, dx, scratch, targets};
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++) ops->release(buffers[i]);
    free(labels);
    free(targets_host);
    return (float)(sum / samples);
}
