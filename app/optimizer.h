/* optimizer.h: AdamW over the model's flat buffers with global-norm gradient clipping. Adam
 * moments live in flat buffers parallel to the parameters; weight decay skips biases and
 * layer-norm parameters (Megatron's default). */
#ifndef OPTIMIZER_H
#define OPTIMIZER_H

#include "gpt_model.h"

typedef struct optimizer {
    float beta1, beta2, eps, weight_decay, clip_grad;
    int step;                /* optimizer steps taken */
    float *exp_avg;          /* Adam first moment, backend memory */
    float *exp_avg_sq;       /* Adam second moment */
} optimizer;

void optimizer_create(optimizer *opt, const gpt_model *model, float beta1, float beta2, float eps,
                      float weight_decay, float clip_grad);
void optimizer_free(optimizer *opt, const gpt_model *model);

/* L2 norm of the whole gradient buffer (each parameter counted once) */
double optimizer_grad_norm(const gpt_model *model);

/* clip (if the norm exceeds --clip-grad) and take one AdamW step at learning rate lr.
 * Returns 0, or 1 when the norm is not finite and the step was skipped. */
int optimizer_step(optimizer *opt, gpt_model *model, double grad_norm, double lr);

#endif
