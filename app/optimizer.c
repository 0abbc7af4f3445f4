/* optimizer.c: see optimizer.h. Clipping scales gradients by clip / (norm + 1e-6) when the norm
 * exceeds clip, as Megatron's clip_grad_norm_fp32 does. */
#include "optimizer.h"

#include <math.h>

void optimizer_create(optimizer *opt, const gpt_model *model, float beta1, float beta2, float eps,
                      float weight_decay, float clip_grad) {
    opt->beta1 = beta1;
    opt->beta2 = beta2;
    opt->eps = eps;
    opt->weight_decay = weight_decay;
    opt->clip_grad = clip_grad;
    opt->step = 0;
    opt->exp_avg = model->ops->alloc(sizeof(float) * model->num_elements);
    opt->exp_avg_sq = model->ops->alloc(sizeof(float) * model->num_elements);
}

void optimizer_free(optimizer *opt, const gpt_model *model) {
    model->ops->release(opt->exp_avg);
    model->ops->release(opt->exp_avg_sq);
    opt->exp_avg = opt->exp_avg_sq = NULL;
}

double optimizer_grad_norm(const gpt_model *model) {
    return sqrt(model->ops->sum_squares(model->grad_buffer, model->num_elements));
}

int optimizer_step(optimizer *opt, gpt_model *model, double grad_norm, double lr) {
    const kernel_ops *ops = model->ops;
    if (!isfinite(grad_norm)) return 1;
    if (opt->clip_grad > 0 && grad_norm > opt->clip_grad)
        ops->scale(model->grad_buffer, (float)(opt->clip_grad / (grad_norm + 1e-6)), model->num_elements);
    opt->step++;
    for (int i = 0; i < model->num_params; i++) {
        const param_tensor *p = &model->params[i];
        ops->adamw_update(model->param_buffer + p->offset, model->grad_buffer + p->offset,
                          opt->exp_avg + p->offset, opt->exp_avg_sq + p->offset, p->numel,
                          (float)lr, opt->beta1, opt->beta2, opt->eps,
                          p->no_weight_decay ? 0.0f : opt->weight_decay, opt->step);
    }
    return 0;
}
