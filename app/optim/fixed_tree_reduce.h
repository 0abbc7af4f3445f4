/* fixed_tree_reduce.h: --deterministic-mode's sums over a global batch in one fixed order,
 * whatever the data-parallel size, so that DP 1, 2, 4, 8 ... (powers of two) train the same bits
 * and a run saved at one data-parallel size resumes bitwise at another.
 *
 * The global batch's micro-batches are j = 0 .. n-1; as in Megatron, micro-batch i of
 * data-parallel rank r is j = i * dp + r. Gradients (and the loss) are summed by the tree
 *     T(list) = T(list[0::2]) + T(list[1::2]),  T([x]) = x,
 * over the list of all j. Its subtrees at depth log2(dp) are the lists j = r mod dp, i.e. one
 * rank's micro-batches in order i, so each rank sums its subtree alone and the ranks then combine
 * them pairwise: first r with r + dp/2, then with r + dp/4, ... (recursive halving for the
 * distributed optimizer's reduce-scatter, followed by recursive doubling for an all-reduce).
 * Float addition commutes exactly, so only the pairing (the association) matters.
 *
 * A rank's subtree is made with a stack: micro-batch slot k of the schedule loads local
 * micro-batch order[k] (the subtree's leaves in order: the data go to other slots, the schedules
 * are unchanged), each micro-batch's gradient is computed into cleared gradients (a weight
 * gradient GEMM's sum over the micro-batch's tokens is then the same at any dp; accumulating it
 * into a running sum is not), pushed, and the sums the tree makes at that point are done. This is
 * done per model chunk (interleaved schedules): a chunk's gradients start afresh before its
 * micro-batch's backward, or on the last stage's last chunk before the forward (the loss
 * accumulates the output layer's weight gradient there); pipeline_schedule_steps keeps that
 * chunk's forward and backward of a micro-batch adjacent and every chunk's backwards in order.
 * Afresh as at the step's start (grad_first_write_restart): the weight matrices' first
 * weight-gradient GEMM writes them over, the rest is cleared; so a micro-batch's gradient is made
 * by the same GEMMs (beta 0) in any slot, on every backend (CUDA plans beta 0 and beta 1 apart).
 *
 * The gradient norm sums squares over blocks fixed in the gradient buffer (each bucket cut into
 * FIXED_TREE_NORM_BLOCKS blocks; buckets padded to a multiple of that, so the buffer's layout
 * does not depend on dp and every block lies in one rank's shard). The elements the norm counts
 * in a block (the same at every dp) form maximal runs; each run is summed by kernel_ops'
 * sum_squares_pieces (a fixed tree of the run's values alone: chunks of 4096, 256 lanes, halving;
 * a GPU-sized reduction), the runs of a block in order, the blocks in order on the host. CPU and
 * CUDA give the same bits for the same gradients (squares of floats are exact in double).
 *
 * Cost (only under --deterministic-mode): ceil(log2 m) + 1 more fp32 gradient buffers for m
 * micro-batches per rank, a copy of the gradients per micro-batch and the m - 1 sums, the
 * gradients cleared per micro-batch, no reduction overlapped with the backward, and point-to-point
 * exchanges in place of the library's collectives (log2 dp steps).
 * Tied embeddings across pipeline stages: their bucket is all-reduced by the tree (also with the
 * distributed optimizer, as the two stages' buckets are cut differently), then the two stages'
 * sums are added (two terms: exact in either order).
 * Backends: CPU and CUDA (there the stack, the scratch and the gradients are device memory, the
 * exchanges NCCL sends and receives on the compute stream, the sums cuda_fixed_tree.cu's kernels).
 * Not covered (the usual order is kept, with a note at start): a data-parallel size that is not a
 * power of two or above FIXED_TREE_NORM_BLOCKS, mixture-of-experts models, context parallelism, a
 * backend without add_float and sum_squares_pieces. */
#ifndef FIXED_TREE_REDUCE_H
#define FIXED_TREE_REDUCE_H

#include "app/model/gpt_model.h"
#include "app/parallel/comm.h"
#include "app/parallel/topology.h"

#define FIXED_TREE_NORM_BLOCKS 64

typedef struct fixed_tree {
    gpt_model *model;
    const comm_ops *comm;
    const topology *topo;
    int num_micro_batches;   /* m: this rank's micro-batches in the current global batch */
    int *order;              /* [m] slot k -> local micro-batch i */
    int *combines;           /* [m] sums to make after slot k's gradient is pushed */
    int depth, capacity;     /* stack buffers needed, allocated */
    float **stack;           /* [capacity] gradient buffers (backend memory, num_elements) */
    int *height;             /* [chunks] the stack's height per model chunk */
    int *next_slot;          /* [chunks] the slot whose backward comes next on the chunk */
    size_t *chunk_start, *chunk_length; /* [chunks] each chunk's range of the gradient buffer */
    float *scratch;          /* half the largest bucket: what a partner sends */
    size_t scratch_elements;
} fixed_tree;

/* why the fixed tree cannot serve a run on this backend, data-parallel and context-parallel
 * sizes and expert count (NULL: it can). It needs the model's buckets padded to a multiple of FIXED_TREE_NORM_BLOCKS
 * (gpt_config.bucket_alignment). */
const char *fixed_tree_unsupported(const kernel_ops *ops, int data_parallel_size, int context_parallel_size,
                                   int num_experts);
void fixed_tree_create(fixed_tree *tree, gpt_model *model, const comm_ops *comm, const topology *topo);
void fixed_tree_free(fixed_tree *tree);

/* before a global batch of m micro-batches per rank (forward-only ones too: the loss's order) */
void fixed_tree_begin(fixed_tree *tree, int num_micro_batches);
/* the local micro-batch slot k of the schedule loads */
int fixed_tree_micro_batch_of_slot(const fixed_tree *tree, int slot);
/* clear chunk's gradients before slot's gradients are written (see above for when) */
void fixed_tree_clear_chunk(fixed_tree *tree, int chunk, int slot);
/* after slot's backward on chunk: push its gradients and make the tree's sums; after the last
 * slot the chunk's gradients hold the rank's subtree */
void fixed_tree_push_chunk(fixed_tree *tree, int chunk, int slot);

/* the cross-rank combination of bucket b over group (data-parallel): all of it (reduce_scatter
 * 0) or this rank's 1/size shard of it, left at its place in the buffer (reduce_scatter 1) */
void fixed_tree_reduce_bucket(fixed_tree *tree, int bucket, const comm_group *group, int reduce_scatter);

/* the global batch's loss sum from this rank's per-slot sums (losses[k] for slot k), the same on
 * every rank of group (data-parallel) */
double fixed_tree_loss_sum(const fixed_tree *tree, const double *losses, const comm_group *group);

/* the gradient norm's sum of squares over ranges (the optimizer's norm ranges: its shard with
 * the distributed optimizer), summed over the data-parallel group when distributed and then
 * over model_parallel */
double fixed_tree_sum_squares(const fixed_tree *tree, const tensor_range *ranges, int count, int distributed,
                              const comm_group *data_parallel, const comm_group *model_parallel);

#endif
