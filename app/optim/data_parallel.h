/* data_parallel.h: gradient synchronization over the flat gradient buffer, bucket by bucket.
 * Without the distributed optimizer a bucket is all-reduced over the data-parallel group; with it
 * (--use-distributed-optimizer) it is reduce-scattered, so each data-parallel rank ends with the
 * summed gradients of its 1/dp shard of every bucket, and after the optimizer step the updated
 * shards are all-gathered back. --overlap-grad-reduce starts a bucket's reduction as soon as the
 * last micro-batch's backward has produced all of its gradients; --overlap-param-gather waits
 * for a bucket's gathered parameters only when the next forward first reads them.
 * Also here: the sums that must precede or follow the data-parallel reduction (tied embeddings
 * between first and last pipeline stage; layer-norm and bias gradients over tensor-parallel
 * ranks with sequence parallelism). */
#ifndef DATA_PARALLEL_H
#define DATA_PARALLEL_H

#include "app/model/gpt_model.h"
#include "app/optim/fixed_tree_reduce.h"
#include "app/parallel/topology.h"

typedef struct data_parallel {
    gpt_model *model;
    const comm_ops *comm;
    const topology *topo;
    int distributed, overlap_grad_reduce, overlap_param_gather;
    int last_micro_batch;        /* set by the schedule before each backward */
    int *ready_params;           /* per bucket: parameters whose gradients are complete */
    int *deferred;               /* per bucket: holds tied embeddings (summed across stages first) */
    comm_request *grad_requests; /* per bucket */
    comm_request *gather_requests;
    int buckets_started;         /* this iteration, during the backward (overlap) */
    fixed_tree *tree;            /* --deterministic-mode's fixed summation order (NULL: the library's) */
} data_parallel;

/* Megatron's DDP options */
typedef struct data_parallel_options {
    int use_distributed_optimizer, overlap_grad_reduce, overlap_param_gather;
} data_parallel_options;

void data_parallel_create(data_parallel *dp, gpt_model *model, const comm_ops *comm,
                          const topology *topo, const data_parallel_options *options);
void data_parallel_free(data_parallel *dp);

/* [start, start+length) of bucket b that this rank's optimizer updates */
void data_parallel_shard(const data_parallel *dp, int bucket, size_t *start, size_t *length);

/* before the first micro-batch of an iteration */
void data_parallel_start_iteration(data_parallel *dp);
/* after the last backward: every bucket reduced, tied and sequence-parallel sums done. With a
 * fixed tree (data_parallel_use_fixed_tree) the buckets are combined by its pairwise exchanges
 * after the backward (none overlapped), the tied embeddings summed across stages after that. */
void data_parallel_finish_grad_sync(data_parallel *dp);
/* sum over the fixed tree from now on (tree outlives dp) */
void data_parallel_use_fixed_tree(data_parallel *dp, fixed_tree *tree);
/* after the optimizer step: share updated shards (distributed optimizer only) */
void data_parallel_start_param_gather(data_parallel *dp);
/* wait for every outstanding parameter gather */
void data_parallel_finish_param_gather(data_parallel *dp);

#endif
