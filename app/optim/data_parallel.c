/* data_parallel.c: see data_parallel.h. Gradients are already scaled by 1/(tokens in the global
 * batch), so data-parallel reductions are plain sums. */
#include "app/optim/data_parallel.h"
#include "app/core/error.h"
#include "app/core/timers.h"

#include <stdlib.h>
#include <string.h>

/* the ranks a bucket's gradients are summed over: the data-parallel group (with context
 * parallelism Megatron's data-parallel group with context parallel: dp x cp, whose ranks hold
 * replicas of the parameters over different tokens), or for experts the expert-data-parallel one
 * (the other ranks holding the same experts) */
static const comm_group *bucket_group(const data_parallel *dp, int b) {
    return dp->model->buckets[b].expert ? dp->topo->expert_dp : dp->topo->dp_cp;
}

static void start_bucket(data_parallel *dp, int b) {
    const grad_bucket *bucket = &dp->model->buckets[b];
    float *grads = dp->model->grad_buffer + bucket->start;
    if (dp->grad_requests[b].active || dp->ready_params[b] < 0) return;
    const comm_group *group = bucket_group(dp, b);
    if (dp->distributed)
        dp->comm->ireduce_scatter_float(grads, bucket->length / (size_t)group->size, group, &dp->grad_requests[b]);
    else
        dp->comm->iallreduce_float(grads, bucket->length, group, &dp->grad_requests[b]);
    dp->ready_params[b] = -1; /* started */
}

static void on_grads_ready(void *context, int first, int count) {
    data_parallel *dp = context;
    if (!dp->overlap_grad_reduce || !dp->last_micro_batch || dp->tree) return;
    for (int i = first; i < first + count; i++) {
        int b = dp->model->params[i].bucket;
        if (dp->ready_params[b] < 0) continue;
        if (++dp->ready_params[b] == dp->model->buckets[b].num_params && !dp->deferred[b]) {
            start_bucket(dp, b);
            dp->buckets_started++;
        }
    }
}

static void on_params_needed(void *context, int first, int count) {
    data_parallel *dp = context;
    for (int i = first; i < first + count; i++) dp->comm->wait(&dp->gather_requests[dp->model->params[i].bucket]);
}

void data_parallel_create(data_parallel *dp, gpt_model *model, const comm_ops *comm,
                          const topology *topo, const data_parallel_options *options) {
    memset(dp, 0, sizeof *dp);
    dp->model = model;
    dp->comm = comm;
    dp->topo = topo;
    dp->distributed = options->use_distributed_optimizer;
    dp->overlap_grad_reduce = options->overlap_grad_reduce;
    dp->overlap_param_gather = options->overlap_param_gather;
    int nb = model->num_buckets;
    dp->ready_params = calloc((size_t)nb, sizeof(int));
    dp->deferred = calloc((size_t)nb, sizeof(int));
    dp->grad_requests = calloc((size_t)nb, sizeof(comm_request));
    dp->gather_requests = calloc((size_t)nb, sizeof(comm_request));
    CHECK(dp->ready_params && dp->deferred && dp->grad_requests && dp->gather_requests,
          "out of host memory for %d gradient buckets", nb);
    /* tied embeddings on two stages are summed across them before the data-parallel reduction */
    int tied_across_stages = !model->config.untie_embeddings_and_output_weights && topo->pp_size > 1;
    for (int i = 0; i < model->num_params; i++)
        if (tied_across_stages && param_is_tied_embedding(&model->params[i]))
            dp->deferred[model->params[i].bucket] = 1;
    model->hooks.context = dp;
    model->hooks.grads_ready = on_grads_ready;
    model->hooks.params_needed = on_params_needed;
}

void data_parallel_free(data_parallel *dp) {
    for (int b = 0; b < dp->model->num_buckets; b++) {
        dp->comm->wait(&dp->grad_requests[b]);
        dp->comm->wait(&dp->gather_requests[b]);
    }
    free(dp->ready_params);
    free(dp->deferred);
    free(dp->grad_requests);
    free(dp->gather_requests);
    dp->model->hooks.grads_ready = NULL;
    dp->model->hooks.params_needed = NULL;
}

void data_parallel_shard(const data_parallel *dp, int bucket, size_t *start, size_t *length) {
    const grad_bucket *b = &dp->model->buckets[bucket];
    if (!dp->distributed) { *start = b->start; *length = b->length; return; }
    const comm_group *group = bucket_group(dp, bucket);
    size_t shard = b->length / (size_t)group->size;
    *start = b->start + (size_t)group->rank * shard;
    *length = shard;
}

void data_parallel_start_iteration(data_parallel *dp) {
    for (int b = 0; b < dp->model->num_buckets; b++) dp->ready_params[b] = 0;
    dp->buckets_started = 0;
    dp->last_micro_batch = 0;
}

/* sum the tied word-embedding gradients of the first and last pipeline stage */
static void sum_tied_embeddings(data_parallel *dp) {
    const topology *t = dp->topo;
    if (t->embedding.mpi == MPI_COMM_NULL || t->embedding.size < 2) return;
    for (int i = 0; i < dp->model->num_params; i++) {
        const param_tensor *p = &dp->model->params[i];
        if (dp->deferred[p->bucket] && param_is_tied_embedding(p))
            dp->comm->allreduce(dp->model->grad_buffer + p->offset, p->numel, COMM_FLOAT, COMM_SUM, &t->embedding);
    }
}

/* with sequence parallelism, layer-norm and row-parallel-bias gradients are partial per
 * tensor-parallel rank: sum them (over the part of each this rank's optimizer updates) */
static void sum_sequence_parallel_grads(data_parallel *dp) {
    gpt_model *m = dp->model;
    if (!m->config.sequence_parallel) return;
    for (int i = 0; i < m->num_params; i++) {
        const param_tensor *p = &m->params[i];
        if (!p->sequence_parallel_grad) continue;
        size_t start, length;
        data_parallel_shard(dp, p->bucket, &start, &length);
        size_t lo = p->offset > start ? p->offset : start;
        size_t hi = p->offset + p->numel < start + length ? p->offset + p->numel : start + length;
        if (lo < hi) dp->comm->allreduce(m->grad_buffer + lo, hi - lo, COMM_FLOAT, COMM_SUM, &dp->topo->tp);
    }
}

/* Megatron's finalize_model_grads timers (level 1: every rank starts each, with or without work) */
void data_parallel_use_fixed_tree(data_parallel *dp, fixed_tree *tree) { dp->tree = tree; }

/* the fixed tree's order: each bucket over its group by pairwise exchanges (a bucket of tied
 * embeddings whole, then summed across the two stages, as both stages' buckets differ) */
static void finish_grad_sync_fixed_tree(data_parallel *dp) {
    timers_start("all-grads-sync", 1);
    for (int b = 0; b < dp->model->num_buckets; b++)
        fixed_tree_reduce_bucket(dp->tree, b, bucket_group(dp, b), dp->distributed && !dp->deferred[b]);
    timers_stop("all-grads-sync");
    timers_start("embedding-grads-all-reduce", 1);
    sum_tied_embeddings(dp);
    timers_stop("embedding-grads-all-reduce");
    timers_start("layernorm-grads-all-reduce", 1);
    sum_sequence_parallel_grads(dp);
    timers_stop("layernorm-grads-all-reduce");
}

void data_parallel_finish_grad_sync(data_parallel *dp) {
    if (dp->tree) {
        finish_grad_sync_fixed_tree(dp);
        return;
    }
    timers_start("embedding-grads-all-reduce", 1);
    sum_tied_embeddings(dp);
    timers_stop("embedding-grads-all-reduce");
    timers_start("all-grads-sync", 1);
    for (int b = 0; b < dp->model->num_buckets; b++) start_bucket(dp, b);
    for (int b = 0; b < dp->model->num_buckets; b++) dp->comm->wait(&dp->grad_requests[b]);
    timers_stop("all-grads-sync");
    timers_start("layernorm-grads-all-reduce", 1);
    sum_sequence_parallel_grads(dp);
    timers_stop("layernorm-grads-all-reduce");
}

void data_parallel_start_param_gather(data_parallel *dp) {
    if (!dp->distributed) return;
    /* Megatron times the gather where the optimizer step waits for it (no --overlap-param-gather) */
    if (!dp->overlap_param_gather) timers_start("params-all-gather", 1);
    for (int b = 0; b < dp->model->num_buckets; b++) {
        const grad_bucket *bucket = &dp->model->buckets[b];
        const comm_group *group = bucket_group(dp, b);
        dp->comm->iallgather(act_at(dp->model->ops, dp->model->param_buffer, bucket->start),
                             bucket->length / (size_t)group->size, dp->model->act_dtype, group,
                             &dp->gather_requests[b]);
    }
    if (!dp->overlap_param_gather) {
        data_parallel_finish_param_gather(dp);
        timers_stop("params-all-gather");
    }
}

void data_parallel_finish_param_gather(data_parallel *dp) {
    for (int b = 0; b < dp->model->num_buckets; b++) dp->comm->wait(&dp->gather_requests[b]);
}
