/* memory_estimate.h: the memory one rank of a run needs, estimated from the arguments before
 * anything is allocated, so that a run that cannot fit stops with one line giving both figures
 * instead of failing an allocation later. Parameters, gradients and optimizer state follow
 * Megatron's bytes-per-parameter table (16 in fp32, 18 in bf16 mixed precision; 8 + 8/d and
 * 6 + 12/d with the distributed optimizer); activations per micro-batch follow Korthikanti et
 * al. (Megatron's "Reducing Activation Recomputation": 34·s·b·h bytes per layer in 16-bit,
 * doubled in fp32) plus what the backend's attention keeps for its backward (its workspace, in
 * place of Korthikanti's 5·a·s²·b: the T x T probabilities on the CPU, flash attention's softmax
 * statistics on CUDA), times the micro-batches a pipeline stage holds (T5: the encoder's layers
 * over its length, the decoder's over its own with their cross-attention, each stack's
 * recomputation on its own), plus the logits and a
 * fixed workspace (with --deterministic-mode's fixed tree its gradient buffers, with
 * --async-save on the CPU backend its snapshot of the checkpoint state). Available memory is the host's (the cgroup limit or MemAvailable, shared by
 * the ranks of a node) on the CPU backend and the device's free memory (cudaMemGetInfo) on
 * CUDA. Rank 0 prints the estimate as Megatron's "theoretical memory footprints" line. */
#ifndef MEMORY_ESTIMATE_H
#define MEMORY_ESTIMATE_H

#include "app/parallel/topology.h"
#include "app/training/args.h"
#include "kernels/kernels.h"

typedef struct memory_estimate {
    double parameters, optimizer, activations, workspace;  /* bytes on the busiest rank */
    double total;
} memory_estimate;

/* the estimate for one rank of this layout (the first pipeline stage, which holds the embedding
 * and the most in-flight micro-batches) */
memory_estimate memory_estimate_compute(const args *a, const topology *topo, const kernel_ops *ops);

/* host memory one rank may use: min(cgroup limit, MemAvailable) / ranks on this node; 0 when
 * unknown */
double memory_available_host(MPI_Comm world);

/* collective: stops the job (user_error) when the estimate exceeds what is available;
 * MTC_SKIP_MEMORY_ESTIMATE=1 skips the check (tests of the allocation-failure path) */
void memory_estimate_check(const args *a, const topology *topo, const kernel_ops *ops);

#endif
