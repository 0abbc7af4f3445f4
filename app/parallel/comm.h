/* comm.h: the one communication interface the model, optimizer and training loop use.
 * Implementations: MPI (CPU backend, app/comm_mpi.c) and NCCL (CUDA backend, app/comm_nccl.c).
 * MPI is also always used for bootstrap and host control. A comm_group is one process group
 * (world, data-parallel, tensor-/pipeline-parallel, ...) with this rank's place in it.
 *
 * Buffers are backend memory. Their element type is given per call (comm_dtype): the model's
 * activations and parameters travel in the compute dtype (bf16 on CUDA, fp16 with --fp16),
 * gradients, statistics
 * and norms in fp32. Operations on the backend's compute stream are ordered with the kernels
 * around them; "blocks" below means: later kernels and copies see the result. */
#ifndef COMM_H
#define COMM_H

#include <mpi.h>
#include <stddef.h>

typedef enum { COMM_SUM, COMM_MAX } comm_op;
typedef enum { COMM_FLOAT, COMM_BF16, COMM_FP16 } comm_dtype;

static inline size_t comm_dtype_bytes(comm_dtype dtype) { return dtype == COMM_FLOAT ? 4 : 2; }

typedef struct comm_group {
    const char *name;  /* "world", "data-parallel", ... for messages */
    MPI_Comm mpi;
    int rank;
    int size;
    void *backend;     /* the implementation's state for this group (NCCL communicator) */
    int point_to_point; /* carries send/recv between neighbours (the pipeline group) */
} comm_group;

/* a started non-blocking operation; comm_ops.wait completes it */
typedef struct comm_request {
    MPI_Request mpi;
    int active;
    void *scratch;       /* host memory held until completion: a reduce-scatter's result waiting
                          * to be copied to destination, an all-to-all's counts (MPI) */
    void *destination;
    size_t bytes;
    void *backend;       /* the implementation's completion record (a CUDA event) */
    const char *operation; /* what it is and where, for a timeout's message */
    const comm_group *group;
} comm_request;

typedef struct comm_ops {
    const char *name;
    /* set up / tear down the implementation's state for a group (collective over the group;
     * called once per group after comm_group_create, before any other operation on it) */
    void (*attach)(comm_group *group);
    void (*detach)(comm_group *group);

    /* in-place all-reduce of backend memory */
    void (*allreduce)(void *buf, size_t count, comm_dtype dtype, comm_op op, const comm_group *group);
    /* in-place all-reduce of host doubles (losses, norms, counters) */
    void (*allreduce_double_host)(double *buf, size_t count, comm_op op, const comm_group *group);
    /* host memory */
    void (*broadcast)(void *buf, size_t bytes, int root, const comm_group *group);
    void (*barrier)(const comm_group *group);

    /* recv[size*count] = concatenation of every rank's send[count] (send may alias recv's block) */
    void (*allgather)(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group);
    /* recv[count] = this rank's block of the sum over ranks of send[size*count] */
    void (*reduce_scatter)(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group);
    /* all-to-all with per-peer sizes (mixture-of-experts token dispatch): send_counts[p]
     * elements at send + send_offsets[p] go to peer p, recv_counts[p] from peer p land at
     * recv + recv_offsets[p] (host arrays of group->size entries, in elements; backend memory) */
    void (*alltoallv)(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                      const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype, const comm_group *group);
    /* the same, not blocking (--moe-shared-expert-overlap: the shared experts compute while the
     * tokens travel); wait completes it. Neither buffer may be touched before wait; the count
     * and offset arrays may be freed as soon as it returns. */
    void (*ialltoallv)(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                       const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                       const comm_group *group, comm_request *request);
    /* host memory: recv[p * bytes ..] = what peer p sent for this rank from its send[rank * bytes ..] */
    void (*alltoall_host)(const void *send, void *recv, size_t bytes, const comm_group *group);

    /* point-to-point (pipeline stages): send does not block, recv blocks */
    void (*send)(const void *buf, size_t count, comm_dtype dtype, int peer, int tag,
                 const comm_group *group, comm_request *request);
    void (*recv)(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group);
    /* a receive that does not block (context parallelism's ring: the next block of keys and values
     * arrives while the attention computes on this one); wait completes it. NCCL defers it to
     * the next send on the group (comm_nccl.c: NCCL's sends and receives pair up in a group) */
    void (*irecv)(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group,
                  comm_request *request);

    /* non-blocking collectives on buf in place (data-parallel buckets):
     * iallreduce sums fp32 buf[count]; ireduce_scatter leaves this rank's block of the sum of
     * fp32 buf[size*count] at buf + rank*count (other blocks unspecified); iallgather fills every
     * block of buf[size*count] from its owner (parameters, in the compute dtype). */
    void (*iallreduce_float)(float *buf, size_t count, const comm_group *group, comm_request *request);
    void (*ireduce_scatter_float)(float *buf, size_t count, const comm_group *group, comm_request *request);
    void (*iallgather)(void *buf, size_t count, comm_dtype dtype, const comm_group *group, comm_request *request);
    /* non-blocking reductions of activation gradients in the compute dtype (tensor parallelism's
     * input gradients, overlapped with the weight gradient): ireduce_scatter_into leaves this
     * rank's block of the sum of send[size*count] in recv[count]; iallreduce_into sums buf[count]
     * in place. Neither buffer may be touched before wait. */
    void (*ireduce_scatter_into)(const void *send, void *recv, size_t count, comm_dtype dtype,
                                 const comm_group *group, comm_request *request);
    void (*iallreduce_into)(void *buf, size_t count, comm_dtype dtype, const comm_group *group,
                            comm_request *request);
    /* One-sided windows (--tp-comm-overlap: tensor-parallel all-gathers and reduce-scatters as
     * copies that overlap the GEMMs, app/parallel/tp_overlap.h). A transfer is PULLED: the owner
     * of the data posts it, the reader fetches it from the owner's memory.
     * window_register: collective over the group; every rank registers the same buffers in the
     *   same order with the same sizes (a buffer may be registered twice: the second is a no-op).
     * post: this rank's bytes at src (inside a registered buffer) are complete in stream order
     *   and may be read by peer.
     * fetch: copy the peer's bytes at the place of local address src (same registered buffer,
     *   same offset) into local dst, once the peer's matching post is made (posts and fetches
     *   between two ranks match in order); wait(request) makes the compute stream see dst.
     * window_flush: every post of this rank is delivered (its source may be overwritten) */
    void (*window_register)(void *buf, size_t bytes, const comm_group *group);
    void (*post)(const void *src, size_t bytes, int peer, const comm_group *group);
    void (*fetch)(void *dst, const void *src, size_t bytes, int peer, const comm_group *group,
                  comm_request *request);
    void (*window_flush)(const comm_group *group);
    /* complete a request (no-op when it is not active) */
    void (*wait)(comm_request *request);
    /* 1 when the request is complete (or inactive), without blocking */
    int (*test)(comm_request *request);
} comm_ops;

/* the MPI implementation (fp32 only for reductions) */
const comm_ops *comm_mpi(void);
#ifdef HAVE_CUDA
/* the NCCL implementation (device memory; host control through MPI) */
const comm_ops *comm_nccl(void);
#endif

/* make a group from an MPI communicator (duplicated; freed by comm_group_free) */
void comm_group_create(comm_group *group, const char *name, MPI_Comm parent);
void comm_group_free(comm_group *group);

#endif
