/* optimizer.c: see optimizer.h. Clipping scales gradients by clip / (norm + 1e-6) when the norm
 * exceeds clip, as Megatron's clip_grad_norm_fp32 does. */
#include "app/optim/optimizer.h"
#include "app/core/error.h"
#include "app/core/timers.h"

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
    r->expert = p->expert >= 0;
    r->param = param;
    r->embedding_or_output = p->embedding_copy || !strcmp(p->name, "embedding.word_embeddings.weight") ||
                             !strcmp(p->name, "output_layer.weight");
    opt->state_elements += r->length;
}

/* append range r to a multi-tensor table, merged into the last entry when it continues it in
 * both the parameter and the state buffers with the same decay */
static void append_table(tensor_range *table, int *count, const optimizer_range *r, float weight_decay) {
    tensor_range *last = *count ? &table[*count - 1] : NULL;
    if (last && last->offset + last->length == r->offset && last->state_offset + last->length == r->state_offset &&
        last->weight_decay == weight_decay) {
        last->length += r->length;
        return;
    }
    table[(*count)++] = (tensor_range){.offset = r->offset, .state_offset = r->state_offset, .length = r->length,
                                       .weight_decay = weight_decay};
}

static void build_tables(optimizer *opt) {
    size_t bytes = sizeof(tensor_range) * (size_t)(opt->num_ranges ? opt->num_ranges : 1);
    free(opt->update_ranges);
    free(opt->embedding_ranges);
    free(opt->norm_ranges);
    opt->update_ranges = malloc(bytes);
    opt->embedding_ranges = malloc(bytes);
    opt->norm_ranges = malloc(bytes);
    free(opt->expert_norm_ranges);
    opt->expert_norm_ranges = malloc(bytes);
    CHECK(opt->update_ranges && opt->embedding_ranges && opt->norm_ranges && opt->expert_norm_ranges,
          "out of host memory for optimizer tables");
    opt->num_update_ranges = opt->num_embedding_ranges = opt->num_norm_ranges = opt->num_expert_norm_ranges = 0;
    for (int i = 0; i < opt->num_ranges; i++) {
        const optimizer_range *r = &opt->ranges[i];
        if (r->embedding_or_output)
            append_table(opt->embedding_ranges, &opt->num_embedding_ranges, r, r->weight_decay ? opt->weight_decay : 0.0f);
        else
            append_table(opt->update_ranges, &opt->num_update_ranges, r, r->weight_decay ? opt->weight_decay : 0.0f);
        if (r->norm_counted && r->expert && opt->expert_norm_group)
            append_table(opt->expert_norm_ranges, &opt->num_expert_norm_ranges, r, 0.0f);
        else if (r->norm_counted)
            append_table(opt->norm_ranges, &opt->num_norm_ranges, r, 0.0f);
    }
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
    opt->update_ranges = opt->embedding_ranges = opt->norm_ranges = NULL;
    opt->expert_norm_ranges = NULL;
    opt->num_expert_norm_ranges = 0;
    opt->expert_norm_group = NULL;
    opt->overflow_group = NULL;
    opt->tree = NULL;
    grad_scaler_init_none(&opt->scaler);
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
    build_tables(opt);
    size_t state_bytes = sizeof(float) * (opt->state_elements ? opt->state_elements : 1);
    opt->exp_avg = model->ops->alloc(state_bytes);
    opt->exp_avg_sq = model->ops->alloc(state_bytes);
    opt->master = NULL;
    if (model->mixed_precision) {
        /* masters start from the seed's fp32 values, not from their bf16 rounding */
        opt->master = model->ops->alloc(state_bytes);
        for (int i = 0; i < opt->num_ranges; i++) {
            const optimizer_range *r = &opt->ranges[i];
            size_t lo = r->offset - model->params[r->param].offset;
            gpt_param_initialize(model, r->param, lo, lo + r->length, opt->master + r->state_offset, 1);
        }
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

void optimizer_set_weight_decay(optimizer *opt, float weight_decay) {
    opt->weight_decay = weight_decay;
    build_tables(opt);
}

void optimizer_free(optimizer *opt, const gpt_model *model) {
    model->ops->release(opt->exp_avg);
    model->ops->release(opt->exp_avg_sq);
    if (opt->master) model->ops->release(opt->master);
    free(opt->ranges);
    free(opt->update_ranges);
    free(opt->embedding_ranges);
    free(opt->norm_ranges);
    free(opt->expert_norm_ranges);
    opt->update_ranges = opt->embedding_ranges = opt->norm_ranges = opt->expert_norm_ranges = NULL;
    opt->exp_avg = opt->exp_avg_sq = opt->master = NULL;
    opt->ranges = NULL;
}

/* the non-finite check reads sums of squares (accumulated in double, where a finite fp32
 * gradient cannot overflow): NaN or Inf exactly when some element is */
int optimizer_prepare_grads(optimizer *opt, gpt_model *model) {
    if (!opt->scaler.enabled) return 0;
    timers_start("optimizer-unscale-and-check-inf", 1);
    const kernel_ops *ops = model->ops;
    double sum = ops->sum_squares_ranges(model->grad_buffer, opt->update_ranges, opt->num_update_ranges) +
                 ops->sum_squares_ranges(model->grad_buffer, opt->embedding_ranges, opt->num_embedding_ranges);
    double found_inf = isfinite(sum) ? 0.0 : 1.0;
    opt->comm->allreduce_double_host(&found_inf, 1, COMM_MAX, opt->overflow_group ? opt->overflow_group : opt->norm_group);
    float inv_scale = grad_scaler_inv_scale(&opt->scaler);
    if (found_inf == 0.0 && inv_scale != 1.0f) {
        const tensor_range *tables[2] = {opt->update_ranges, opt->embedding_ranges};
        int counts[2] = {opt->num_update_ranges, opt->num_embedding_ranges};
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < counts[t]; i++)
                ops->scale_float(model->grad_buffer + tables[t][i].offset, inv_scale, tables[t][i].length);
    }
    grad_scaler_update(&opt->scaler, found_inf != 0.0);
    timers_stop("optimizer-unscale-and-check-inf");
    return found_inf != 0.0;
}

void optimizer_set_expert_groups(optimizer *opt, const comm_group *expert_norm_group, const comm_group *overflow_group) {
    opt->expert_norm_group = expert_norm_group;
    opt->overflow_group = overflow_group;
    build_tables(opt);
}

/* Megatron's optimizer-clip-main-grad timer: the norm (clipping itself is fused into the step) */
void optimizer_use_fixed_tree(optimizer *opt, const fixed_tree *tree, int distributed,
                              const comm_group *data_parallel, const comm_group *model_parallel) {
    opt->tree = tree;
    opt->tree_distributed = distributed;
    opt->tree_data_parallel = data_parallel;
    opt->tree_model_parallel = model_parallel;
}

double optimizer_grad_norm(const optimizer *opt, const gpt_model *model) {
    timers_start("optimizer-clip-main-grad", 1);
    if (opt->tree) {
        double sum = fixed_tree_sum_squares(opt->tree, opt->norm_ranges, opt->num_norm_ranges, opt->tree_distributed,
                                            opt->tree_data_parallel, opt->tree_model_parallel);
        timers_stop("optimizer-clip-main-grad");
        return sqrt(sum);
    }
    double sum = model->ops->sum_squares_ranges(model->grad_buffer, opt->norm_ranges, opt->num_norm_ranges);
    opt->comm->allreduce_double_host(&sum, 1, COMM_SUM, opt->norm_group);
    if (opt->expert_norm_group) {
        double experts = model->ops->sum_squares_ranges(model->grad_buffer, opt->expert_norm_ranges,
                                                        opt->num_expert_norm_ranges);
        opt->comm->allreduce_double_host(&experts, 1, COMM_SUM, opt->expert_norm_group);
        sum += experts;
    }
    timers_stop("optimizer-clip-main-grad");
    return sqrt(sum);
}

double optimizer_params_norm(const optimizer *opt, const gpt_model *model) {
    /* the norm ranges, addressed in the masters (state offsets) when the masters are separate */
    tensor_range *ranges = malloc(sizeof(tensor_range) * (size_t)(opt->num_ranges ? opt->num_ranges : 1));
    CHECK(ranges, "out of host memory for the parameter-norm ranges");
    int count = 0;
    for (int i = 0; i < opt->num_ranges; i++) {
        const optimizer_range *r = &opt->ranges[i];
        if (!r->norm_counted) continue;
        ranges[count++] = (tensor_range){.offset = opt->master ? r->state_offset : r->offset, .length = r->length};
    }
    const float *values = opt->master ? opt->master : (const float *)model->param_buffer;
    double sum = model->ops->sum_squares_ranges(values, ranges, count);
    free(ranges);
    opt->comm->allreduce_double_host(&sum, 1, COMM_SUM, opt->norm_group);
    return sqrt(sum);
}

/* the gradients come to the host a chunk at a time (on the CPU backend they are there) */
double optimizer_grad_zeros(const optimizer *opt, const gpt_model *model) {
    enum { CHUNK = 1 << 20 };
    float *host = model->ops->host_memory ? NULL : malloc(sizeof(float) * CHUNK);
    CHECK(model->ops->host_memory || host, "out of host memory counting zero gradients");
    double zeros = 0;
    for (int i = 0; i < opt->num_norm_ranges; i++) {
        const tensor_range *r = &opt->norm_ranges[i];
        for (size_t done = 0; done < r->length; done += CHUNK) {
            size_t n = r->length - done < CHUNK ? r->length - done : CHUNK;
            const float *g = model->grad_buffer + r->offset + done;
            if (host) {
                model->ops->copy_to_host(host, g, n * sizeof(float));
                g = host;
            }
            for (size_t k = 0; k < n; k++) zeros += g[k] == 0.0f;
        }
    }
    free(host);
    opt->comm->allreduce_double_host(&zeros, 1, COMM_SUM, opt->norm_group);
    return zeros;
}

int optimizer_step(optimizer *opt, gpt_model *model, double grad_norm, double lr) {
    return optimizer_step_decoupled(opt, model, grad_norm, lr, lr);
}

/* one multi-tensor AdamW launch per learning rate (--decoupled-lr: the embedding and output
 * layer ranges have their own table), the clipping factor applied on the way */
int optimizer_step_decoupled(optimizer *opt, gpt_model *model, double grad_norm, double lr, double embedding_lr) {
    if (!isfinite(grad_norm)) return 1;
    int clip = opt->clip_grad > 0 && grad_norm > opt->clip_grad;
    float clip_scale = clip ? (float)(opt->clip_grad / (grad_norm + 1e-6)) : 1.0f;
    opt->step++;
    timers_start("optimizer-inner-step", 1);
    model->ops->adamw_update_ranges(opt->master, model->param_buffer, model->grad_buffer, opt->exp_avg,
                                    opt->exp_avg_sq, opt->update_ranges, opt->num_update_ranges, clip_scale,
                                    (float)lr, opt->beta1, opt->beta2, opt->eps, opt->step);
    model->ops->adamw_update_ranges(opt->master, model->param_buffer, model->grad_buffer, opt->exp_avg,
                                    opt->exp_avg_sq, opt->embedding_ranges, opt->num_embedding_ranges, clip_scale,
                                    (float)embedding_lr, opt->beta1, opt->beta2, opt->eps, opt->step);
    timers_stop("optimizer-inner-step");
    return 0;
}

double optimizer_bytes_per_parameter(const optimizer *opt, const gpt_model *model) {
    double params = (double)model->num_parameters;
    double state = (double)opt->state_elements / params;
    if (opt->master) return 2.0 + 4.0 + 12.0 * state; /* bf16 params, fp32 grads, masters + moments */
    return 4.0 + 4.0 + 8.0 * state;
}
