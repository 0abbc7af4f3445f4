/* tp_overlap.h: --tp-comm-overlap's sequence-parallel all-gather and reduce-scatter as one-sided
 * block transfers (comm.h: post, fetch) that the caller interleaves with GEMMs split by token
 * rows, as Megatron's/TransformerEngine's userbuffers overlap does:
 *   all-gather + column-parallel GEMM: this rank's rows are in block `rank` of the gathered
 *     tensor; tp_gather_start posts them to every peer and fetches theirs; the GEMM runs on the
 *     own block first, then on each peer block after tp_gather_wait(block) (tp_gather_order).
 *   row-parallel GEMM + reduce-scatter: the GEMM of each PEER's block of rows is made first and
 *     posted (tp_reduce_scatter_post); tp_reduce_scatter_fetch starts fetching the peers'
 *     partials of this rank's block, then the own block's GEMM (and in backward the weight
 *     gradient) runs; tp_reduce_scatter_finish sums the partials in rank order 0..tp-1
 *     (kernel_ops.sum_blocks: fp32 accumulation, one rounding).
 * Every step completes all its fetches on the compute stream before it returns (the rule that
 * makes pulling safe without handshakes: app/parallel/comm_window_cuda.c). Blocks are
 * block_bytes long, every buffer is registered (comm_ops.window_register), and every rank of the
 * group makes the same calls in the same order. */
#ifndef TP_OVERLAP_H
#define TP_OVERLAP_H

#include "app/parallel/tensor_parallel.h"

/* the i-th block a rank consumes: its own (i = 0), then the peers in ring order */
int tp_gather_order(const tensor_parallel_comm *tp, int i);
/* full holds the gathered blocks; peers read this rank's block at own (full's block `rank`, or
 * another registered buffer, which is then copied into that block); requests[tp size] */
void tp_gather_start(const tensor_parallel_comm *tp, void *full, const void *own, size_t block_bytes,
                     comm_request *requests);
/* block of full has arrived (no-op for the own block) */
void tp_gather_wait(const tensor_parallel_comm *tp, int block, comm_request *requests);
/* every block has arrived and every post is delivered */
void tp_gather_finish(const tensor_parallel_comm *tp, comm_request *requests);

/* the i-th peer block (i = 1 .. tp-1) a rank computes for the reduce-scatter: ring order */
int tp_reduce_scatter_order(const tensor_parallel_comm *tp, int i);
/* partial's block `block` (a peer's) is complete: post it to that peer */
void tp_reduce_scatter_post(const tensor_parallel_comm *tp, const void *partial, int block, size_t block_bytes);
/* fetch every peer's partial of this rank's block into received[tp][block] */
void tp_reduce_scatter_fetch(const tensor_parallel_comm *tp, const void *partial, void *received,
                             size_t block_bytes, comm_request *requests);
/* out[block_elements] = sum over ranks in rank order of the partials (own from partial) */
void tp_reduce_scatter_finish(const tensor_parallel_comm *tp, void *out, const void *partial, const void *received,
                              size_t block_elements, size_t block_bytes, comm_request *requests);

#endif
