/* optimizer.c: see optimizer.h. Clipping scales gradients by clip / (norm + 1e-6) when the norm
 * exceeds clip, as Megatron's clip_grad_norm_fp32 does. */
#include "app/optim/optimizer.h"
#include "app/core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void add_range(optimizer *opt, int *capacity, const param_tensor *p, int param, size_t lo,
                      size_t hi, int tp_rank) {
    if (opt->num_ranges == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 64;
        opt->ranges = realloc(opt->ranges, sizeof(optimizer_range) * (size_t)*capacity);
        CHECK(opt->ranges, "out of host memory for optimizer ranges");
    }
    optimizer_range *r = &opt->ranges[opt->num_ranges++];
    r->offset = lo;
    r->length = hi - lo;
    r->state_offset = opt->state_elements;
    r->weight_decay = !p->no_weight_decay;
    r->norm_counted = param_is_primary_copy(p, tp_rank);
    r->param = param;
    r->embedding_or_output = p->embedding_copy || !strcmp(p->name, "embedding.word_embeddings.weight") ||
                             !strcmp(p->name, "output_layer.weight");
    opt->state_elements += r->length;
}

void optimizer_create(optimizer *opt, const gpt_model *model, const data_parallel *dp,
                      const comm_group *norm_group, const comm_ops *comm, float beta1, float beta2,
                      float eps, float weight_decay, float clip_grad) {
    opt->beta1 = beta1;
    opt->beta2 = beta2;
    opt->eps = eps;
    opt->weight_decay = weight_decay;
    opt->clip_grad = clip_grad;
    opt->step = 0;
    opt->ranges = NULL;
    opt->num_ranges = 0;
    opt->state_elements = 0;
    opt->comm = comm;
    opt->norm_group = norm_group;
    int capacity = 0;
    for (int b = 0; b < model->num_buckets; b++) {
        const grad_bucket *bucket = &model->buckets[b];
        size_t start = bucket->start, length = bucket->length;
        if (dp) data_parallel_shard(dp, b, &start, &length);
        for (int i = bucket->first_param; i < bucket->first_param + bucket->num_params; i++) {
            const param_tensor *p = &model->params[i];
            size_t lo = p->offset > start ? p->offset : start;
            size_t hi = p->offset + p->numel < start + length ? p->offset + p->numel : start + length;
            if (lo < hi) add_range(opt, &capacity, p, i, lo, hi, model->config.tp_rank);
        }
    }
    size_t state_bytes = sizeof(float) * (opt->state_elements ? opt->state_elements : 1);
    opt->exp_avg = model->ops->alloc(state_bytes);
    opt->exp_avg_sq = model->ops->alloc(state_bytes);
    opt->master = NULL;
    if (model->mixed_precision) {
        /* masters start from the seed's fp32 values, not from their bf16 rounding */
        opt->master = model->ops->alloc(state_bytes);
        size_t largest = 1;
        for (int i = 0; i < opt->num_ranges; i++) if (opt->ranges[i].length > largest) largest = opt->ranges[i].length;
        float *host = malloc(sizeof(float) * largest);
        CHECK(host, "out of host memory initializing master weights");
        for (int i = 0; i < opt->num_ranges; i++) {
            const optimizer_range *r = &opt->ranges[i];
            size_t lo = r->offset - model->params[r->param].offset;
            gpt_param_initial_values(model, r->param, lo, lo + r->length, host);
            model->ops->copy_from_host(opt->master + r->state_offset, host, sizeof(float) * r->length);
        }
        free(host);
    }
}

float *optimizer_master(const optimizer *opt, const gpt_model *model, const optimizer_range *r) {
    if (opt->master) return opt->master + r->state_offset;
    return (float *)model->param_buffer + r->offset;
}

void optimizer_refresh_params(const optimizer *opt, gpt_model *model) {
    for (int i = 0; i < opt->num_ranges; i++) {
        const optimizer_range *r = &opt->ranges[i];
        model->ops->float_to_act(act_at(model->ops, model->param_buffer, r->offset),
                                 optimizer_master(opt, model, r), r->length);
    }
}

void optimizer_free(optimizer *opt, const gpt_model *model) {
    model->ops->release(opt->exp_avg);
    model->ops->release(opt->exp_avg_sq);
    if (opt->master) model->ops->release(opt->master);
    free(opt->ranges);
    opt->exp_avg = opt->exp_avg_sq = opt->master = NULL;
    opt->ranges = NULL;
}

double optimizer_grad_norm(const optimizer *opt, const gpt_model *model) {
    double sum = 0.0;
    for (int i = 0; i < opt->num_ranges; i++) {
        const optimizer_range *r = &opt->ranges[i];
        if (r->norm_counted) sum += model->ops->sum_squares(model->grad_buffer + r->offset, r->length);
    }
    opt->comm->allreduce_double_host(&sum, 1, COMM_SUM, opt->norm_group);
    return sqrt(sum);
}

int optimizer_step(optimizer *opt, gpt_model *model, double grad_norm, double lr) {
    return optimizer_step_decoupled(opt, model, grad_norm, lr, lr);
}

int optimizer_step_decoupled(optimizer *opt, gpt_model *model, double grad_norm, double lr, double embedding_lr) {
    const kernel_ops *ops = model->ops;
    if (!isfinite(grad_norm)) return 1;
    int clip = opt->clip_grad > 0 && grad_norm > opt->clip_grad;
    float clip_scale = (float)(opt->clip_grad / (grad_norm + 1e-6));
    opt->step++;
    for (int i = 0; i < opt->num_ranges; i++) {
        const optimizer_range *r = &opt->ranges[i];
        float *grads = model->grad_buffer + r->offset;
        if (clip) ops->scale_float(grads, clip_scale, r->length);
        ops->adamw_update(optimizer_master(opt, model, r), act_at(ops, model->param_buffer, r->offset),
                          grads, opt->exp_avg + r->state_offset,
                          opt->exp_avg_sq + r->state_offset, r->length, (float)(r->embedding_or_output ? embedding_lr : lr), opt->beta1,
                          opt->beta2, opt->eps, r->weight_decay ? opt->weight_decay : 0.0f, opt->step);
    }
    return 0;
}

double optimizer_bytes_per_parameter(const optimizer *opt, const gpt_model *model) {
    double params = (double)model->num_parameters;
    double state = (double)opt->state_elements / params;
    if (opt->master) return 2.0 + 4.0 + 12.0 * state; /* bf16 params, fp32 grads, masters + moments */
    return 4.0 + 4.0 + 8.0 * state;
}
