/* comm.h: the one communication interface the model, optimizer and training loop use.
 * Implementations: MPI (CPU backend, app/comm_mpi.c) and, with the CUDA backend, NCCL. MPI is
 * also always used for bootstrap and host control. A comm_group is one process group (world,
 * data-parallel, and later tensor-/pipeline-parallel) with this rank's place in it. */
#ifndef COMM_H
#define COMM_H

#include <mpi.h>
#include <stddef.h>

typedef enum { COMM_SUM, COMM_MAX } comm_op;

typedef struct comm_group {
    const char *name;  /* "world", "data-parallel", ... for messages */
    MPI_Comm mpi;
    int rank;
    int size;
} comm_group;

typedef struct comm_ops {
    const char *name;
    /* in-place all-reduce of backend memory */
    void (*allreduce_float)(float *buf, size_t count, comm_op op, const comm_group *group);
    /* in-place all-reduce of host doubles (losses, norms, counters) */
    void (*allreduce_double_host)(double *buf, size_t count, comm_op op, const comm_group *group);
    void (*broadcast)(void *buf, size_t bytes, int root, const comm_group *group);
    void (*barrier)(const comm_group *group);
} comm_ops;

/* the MPI implementation */
const comm_ops *comm_mpi(void);

/* make a group from an MPI communicator (duplicated; freed by comm_group_free) */
void comm_group_create(comm_group *group, const char *name, MPI_Comm parent);
void comm_group_free(comm_group *group);

#endif
