/* bench_common.h: what the acceptance benchmarks (gemm, comm, hdf5 and membw benchmarks in perf/accept/) share: the wall clock,
 * the node-local rank (one GPU per rank, chosen by it, as pretrain_gpt does), the backend
 * selection and the "RESULT name value" lines that the driver (perf/accept/accept) reads.
 * Each benchmark prints its own human-readable table on rank 0; RESULT lines carry the figures
 * the driver compares with thresholds. */
#ifndef ACCEPT_BENCH_COMMON_H
#define ACCEPT_BENCH_COMMON_H

#include "config.h"

#include "app/core/error.h"
#include "kernels/kernels.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* this rank's place on its node and the number of nodes (MPI_COMM_TYPE_SHARED) */
static inline void bench_placement(int *local_rank, int *nodes) {
    MPI_Comm node;
    int local = 0, leader;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_rank(node, &local));
    MPI_Comm_free(&node);
    leader = local == 0;
    CHECK_MPI(MPI_Allreduce(&leader, nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    *local_rank = local;
}

/* --device cpu|cuda: the kernel backend (cuda: GPU local_rank % visible GPUs); NULL when cuda
 * is asked for in a build without it or on a node without a GPU (the caller reports it) */
static inline const kernel_ops *bench_backend(const char *device, int local_rank, char *gpu_name,
                                              int gpu_name_length) {
    if (gpu_name_length > 0) snprintf(gpu_name, (size_t)gpu_name_length, "cpu");
    if (strcmp(device, "cpu") == 0) return kernels_cpu();
#ifdef HAVE_CUDA
    if (strcmp(device, "cuda") == 0) {
        int devices = cuda_device_count();
        if (devices == 0) return NULL;
        cuda_context_init(local_rank % devices);
        cuda_device_name(local_rank % devices, gpu_name, gpu_name_length);
        return kernels_cuda();
    }
#else
    (void)local_rank;
#endif
    return NULL;
}

/* a RESULT line for the driver (rank 0 only prints) */
static inline void bench_result(const char *name, double value) {
    printf("RESULT %s %.9g\n", name, value);
}

/* value of "--flag VALUE" style options */
static inline int bench_flag(int argc, char **argv, int *i, const char *flag, const char **value) {
    if (strcmp(argv[*i], flag) != 0) return 0;
    if (*i + 1 >= argc) user_error("%s needs a value", flag);
    *value = argv[++*i];
    return 1;
}

#endif
