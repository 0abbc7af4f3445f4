/* model_fd.h: the finite-difference check (and the descent on one batch) the model tests share (gpt_model_test, bert_model_test,
 * t5_model_test): after one forward and backward have left d(objective)/d(parameters) in the
 * gradient buffer, central differences (h = 1e-2) of the objective at 6 elements of every tensor
 * of the CPU backend's fp32 parameters (in host memory). A tensor fails when its largest
 * |numeric - analytic| exceeds 2% of its largest |numeric| (at least 1e-3). */
#ifndef MODEL_FD_H
#define MODEL_FD_H

#include "app/model/gpt_model.h"
#include "tests/tap.h"

#include <math.h>

/* the objective at the current parameters (a forward without backward) */
typedef double (*model_objective)(gpt_model *m, void *context);

typedef struct model_fd_result {
    int bad_tensors, checked;
    double worst;           /* the largest relative error */
} model_fd_result;

/* max_grads (NULL, or [num_params]): each tensor's largest |numeric| gradient */
static inline model_fd_result model_fd_check(gpt_model *m, model_objective objective, void *context,
                                             double *max_grads) {
    model_fd_result r = {0, 0, 0.0};
    float *params = m->param_buffer;
    for (int p = 0; p < m->num_params; p++) {
        const param_tensor *t = &m->params[p];
        double max_err = 0.0, max_grad = 0.0;
        for (size_t k = 0; k < 6 && k < t->numel; k++) {
            size_t e = t->offset + (k * 7919u) % t->numel;
            float saved = params[e];
            const float h = 1e-2f;
            params[e] = saved + h;
            double plus = objective(m, context);
            params[e] = saved - h;
            double minus = objective(m, context);
            params[e] = saved;
            double numeric = (plus - minus) / (2.0 * h), analytic = m->grad_buffer[e];
            if (fabs(numeric - analytic) > max_err) max_err = fabs(numeric - analytic);
            if (fabs(numeric) > max_grad) max_grad = fabs(numeric);
            r.checked++;
        }
        if (max_grads) max_grads[p] = max_grad;
        double rel = max_err / (max_grad > 1e-3 ? max_grad : 1e-3);
        if (rel > r.worst) r.worst = rel;
        if (rel > 2e-2) {
            r.bad_tensors++;
            tap_diag("%s: finite-difference mismatch, relative %.3g", t->name, rel);
        }
    }
    return r;
}

/* plain gradient descent on one batch (tokens, targets as gpt_chunk_forward packs them), at
 * micro-batch rng {1, 0, training}: the first and the last step's loss */
static inline void model_descend(gpt_model *m, const int *tokens, const int *targets, int steps, float lr,
                                 double *first, double *last) {
    micro_batch_rng rng = {1, 0, 1};
    float *params = m->param_buffer;
    for (int step = 0; step < steps; step++) {
        m->ops->zero(m->grad_buffer, sizeof(float) * m->num_elements);
        double loss = gpt_chunk_forward(m, 0, 0, tokens, targets, rng, 1.0f, 1);
        gpt_chunk_backward(m, 0, 0, rng);
        if (step == 0) *first = loss;
        *last = loss;
        for (size_t e = 0; e < m->num_elements; e++) params[e] -= lr * m->grad_buffer[e];
    }
}

#endif
