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

/* a started non-blocking operation; comm_ops.wait completes it */
typedef struct comm_request {
    MPI_Request mpi;
    int active;
    float *scratch;      /* reduce-scatter result waiting to be copied into place */
    float *destination;
    size_t count;
} comm_request;

typedef struct comm_ops {
    const char *name;
    /* in-place all-reduce of backend memory */
    void (*allreduce_float)(float *buf, size_t count, comm_op op, const comm_group *group);
    /* in-place all-reduce of host doubles (losses, norms, counters) */
    void (*allreduce_double_host)(double *buf, size_t count, comm_op op, const comm_group *group);
    void (*broadcast)(void *buf, size_t bytes, int root, const comm_group *group);
    void (*barrier)(const comm_group *group);

    /* recv[size*count] = concatenation of every rank's send[count] (send may alias recv's block) */
    void (*allgather_float)(const float *send, float *recv, size_t count, const comm_group *group);
    /* recv[count] = this rank's block of the sum over ranks of send[size*count] */
    void (*reduce_scatter_float)(const float *send, float *recv, size_t count, const comm_group *group);

    /* point-to-point (pipeline stages): send does not block, recv blocks */
    void (*send_float)(const float *buf, size_t count, int peer, int tag, const comm_group *group,
                       comm_request *request);
    void (*recv_float)(float *buf, size_t count, int peer, int tag, const comm_group *group);

    /* non-blocking collectives on buf in place (data-parallel buckets):
     * iallreduce sums buf[count]; ireduce_scatter leaves this rank's block of the sum of
     * buf[size*count] at buf + rank*count (other blocks unspecified); iallgather fills every
     * block of buf[size*count] from its owner. */
    void (*iallreduce_float)(float *buf, size_t count, const comm_group *group, comm_request *request);
    void (*ireduce_scatter_float)(float *buf, size_t count, const comm_group *group, comm_request *request);
    void (*iallgather_float)(float *buf, size_t count, const comm_group *group, comm_request *request);
    /* complete a request (no-op when it is not active) */
    void (*wait)(comm_request *request);
    /* 1 when the request is complete (or inactive), without blocking */
    int (*test)(comm_request *request);
} comm_ops;

/* the MPI implementation */
const comm_ops *comm_mpi(void);

/* make a group from an MPI communicator (duplicated; freed by comm_group_free) */
void comm_group_create(comm_group *group, const char *name, MPI_Comm parent);
void comm_group_free(comm_group *group);

#endif
