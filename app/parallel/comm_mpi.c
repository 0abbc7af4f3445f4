/* comm_mpi.c: the comm interface over MPI, used with the CPU backend. Reductions use MPI's
 * built-in algorithms, which for a fixed communicator size and message size always combine in
 * the same order (MPICH), so results are reproducible from run to run. Every operation is
 * started non-blocking and completed by comm_timed_wait (app/parallel/timeout.h), so a rank that
 * never arrives ends the job after --distributed-timeout-minutes with a message naming it.
 *
 * One-sided windows (comm.h: window_register, post, fetch) are two-sided here: post is an
 * MPI_Isend of the bytes to the peer, kept open until window_flush (or the group's detach), and
 * fetch an MPI_Irecv completed by wait. Between two ranks sends and receives of one tag match
 * in order (MPI's non-overtaking rule), which is the order comm.h promises. Nothing is
 * registered: the buffers are host memory and MPI copies them. */
#include "app/parallel/comm.h"
#include "app/core/error.h"
#include "app/parallel/timeout.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are int: split large buffers into chunks */
#define MAX_CHUNK ((size_t)INT_MAX / 2)

static MPI_Op mpi_op(comm_op op) { return op == COMM_MAX ? MPI_MAX : MPI_SUM; }

/* MPI has no bf16 or fp16: data movement sends their bits as 16-bit integers; reductions are fp32
 * only (the CPU backend computes in fp32 and never asks for a 16-bit reduction) */
static MPI_Datatype mpi_type(comm_dtype dtype) { return dtype == COMM_FLOAT ? MPI_FLOAT : MPI_UINT16_T; }

static void require_float(comm_dtype dtype, const char *what, const comm_group *group) {
    if (dtype != COMM_FLOAT) FATAL("comm_mpi: %s of a 16-bit dtype on group %s is not supported (use NCCL)", what, group->name);
}

/* the posts of a group not yet known to be delivered */
typedef struct mpi_window {
    MPI_Request *posts;
    int num_posts, capacity;
} mpi_window;

enum { WINDOW_TAG = 0x7f01 };

static void mpi_window_flush(const comm_group *group) {
    mpi_window *w = group->backend;
    if (!w) return;
    for (int i = 0; i < w->num_posts; i++)
        comm_timed_wait(&w->posts[i], "post (tp-comm-overlap: the peer's fetch)", group->name, group->mpi);
    w->num_posts = 0;
}

static void mpi_attach(comm_group *group) {
    mpi_window *w = calloc(1, sizeof *w);
    CHECK(w, "out of host memory for group %s", group->name);
    group->backend = w;
}

static void mpi_detach(comm_group *group) {
    mpi_window *w = group->backend;
    if (!w) return;
    mpi_window_flush(group);
    free(w->posts);
    free(w);
    group->backend = NULL;
}

static void mpi_window_register(void *buf, size_t bytes, const comm_group *group) {
    (void)buf, (void)bytes, (void)group;
}

static void mpi_allreduce(void *buf, size_t count, comm_dtype dtype, comm_op op, const comm_group *group) {
    if (group->size == 1) return;
    require_float(dtype, "all-reduce", group);
    for (size_t done = 0; done < count; done += MAX_CHUNK) {
        size_t n = count - done < MAX_CHUNK ? count - done : MAX_CHUNK;
        MPI_Request request;
        CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, (float *)buf + done, (int)n, MPI_FLOAT, mpi_op(op), group->mpi, &request));
        comm_timed_wait(&request, "all-reduce", group->name, group->mpi);
    }
}

static void mpi_allreduce_double(double *buf, size_t count, comm_op op, const comm_group *group) {
    if (group->size == 1) return;
    MPI_Request request;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE, mpi_op(op), group->mpi, &request));
    comm_timed_wait(&request, "all-reduce (host)", group->name, group->mpi);
}

static void mpi_broadcast(void *buf, size_t bytes, int root, const comm_group *group) {
    if (group->size == 1) return;
    for (size_t done = 0; done < bytes; done += MAX_CHUNK) {
        size_t n = bytes - done < MAX_CHUNK ? bytes - done : MAX_CHUNK;
        MPI_Request request;
        CHECK_MPI(MPI_Ibcast((char *)buf + done, (int)n, MPI_BYTE, root, group->mpi, &request));
        comm_timed_wait(&request, "broadcast", group->name, group->mpi);
    }
}

static void mpi_barrier(const comm_group *group) {
    MPI_Request request;
    CHECK_MPI(MPI_Ibarrier(group->mpi, &request));
    comm_timed_wait(&request, "barrier", group->name, group->mpi);
}

static int as_count(size_t count) {
    CHECK(count <= (size_t)INT_MAX, "message of %zu elements exceeds MPI's int count", count);
    return (int)count;
}

static void mpi_allgather(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group) {
    const void *source = (const char *)send == (char *)recv + (size_t)group->rank * count * comm_dtype_bytes(dtype)
                             ? MPI_IN_PLACE : send;
    MPI_Request request;
    CHECK_MPI(MPI_Iallgather(source, as_count(count), mpi_type(dtype), recv, as_count(count), mpi_type(dtype),
                             group->mpi, &request));
    comm_timed_wait(&request, "all-gather", group->name, group->mpi);
}

/* MPI's int counts and displacements of an all-to-all, one block of 4 n (freed by the caller,
 * or with a non-blocking one's request: MPI reads them until it completes) */
static int *alltoallv_counts(const size_t *send_counts, const size_t *send_offsets, const size_t *recv_counts,
                             const size_t *recv_offsets, int n) {
    int *counts = malloc(sizeof(int) * 4 * (size_t)n);
    CHECK(counts, "out of host memory for an all-to-all");
    for (int p = 0; p < n; p++) {
        counts[p] = as_count(send_counts[p]);
        counts[n + p] = as_count(send_offsets[p]);
        counts[2 * n + p] = as_count(recv_counts[p]);
        counts[3 * n + p] = as_count(recv_offsets[p]);
    }
    return counts;
}

static void mpi_alltoallv(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                          const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                          const comm_group *group) {
    int n = group->size;
    int *counts = alltoallv_counts(send_counts, send_offsets, recv_counts, recv_offsets, n);
    MPI_Request request;
    CHECK_MPI(MPI_Ialltoallv(send, counts, counts + n, mpi_type(dtype), recv, counts + 2 * n, counts + 3 * n,
                             mpi_type(dtype), group->mpi, &request));
    comm_timed_wait(&request, "all-to-all", group->name, group->mpi);
    free(counts);
}

static void mpi_ialltoallv(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                           const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                           const comm_group *group, comm_request *request) {
    int n = group->size;
    int *counts = alltoallv_counts(send_counts, send_offsets, recv_counts, recv_offsets, n);
    request->active = 1;
    request->operation = "all-to-all (expert dispatch, overlapped)";
    request->group = group;
    request->scratch = counts; /* freed by wait */
    request->destination = NULL;
    request->bytes = 0;
    CHECK_MPI(MPI_Ialltoallv(send, counts, counts + n, mpi_type(dtype), recv, counts + 2 * n, counts + 3 * n,
                             mpi_type(dtype), group->mpi, &request->mpi));
}

static void mpi_alltoall_host(const void *send, void *recv, size_t bytes, const comm_group *group) {
    MPI_Request request;
    CHECK_MPI(MPI_Ialltoall(send, as_count(bytes), MPI_BYTE, recv, as_count(bytes), MPI_BYTE, group->mpi, &request));
    comm_timed_wait(&request, "all-to-all (host)", group->name, group->mpi);
}

static void mpi_reduce_scatter(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group) {
    require_float(dtype, "reduce-scatter", group);
    MPI_Request request;
    CHECK_MPI(MPI_Ireduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi, &request));
    comm_timed_wait(&request, "reduce-scatter", group->name, group->mpi);
}

static void mpi_send(const void *buf, size_t count, comm_dtype dtype, int peer, int tag,
                     const comm_group *group, comm_request *request) {
    request->active = 1;
    request->operation = "send (waiting for its completion)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Isend(buf, as_count(count), mpi_type(dtype), peer, tag, group->mpi, &request->mpi));
}

static void mpi_recv(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group) {
    MPI_Request request;
    CHECK_MPI(MPI_Irecv(buf, as_count(count), mpi_type(dtype), peer, tag, group->mpi, &request));
    char operation[64];
    snprintf(operation, sizeof operation, "receive from rank %d of the group", peer);
    comm_timed_wait(&request, operation, group->name, group->mpi);
}

static void mpi_irecv(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group,
                      comm_request *request) {
    request->active = 1;
    request->operation = "receive (waiting for its completion)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Irecv(buf, as_count(count), mpi_type(dtype), peer, tag, group->mpi, &request->mpi));
}

static void mpi_iallreduce(float *buf, size_t count, const comm_group *group, comm_request *request) {
    request->active = 1;
    request->operation = "all-reduce (bucket)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi, &request->mpi));
}

static void mpi_ireduce_scatter(float *buf, size_t count, const comm_group *group, comm_request *request) {
    request->active = 1;
    request->operation = "reduce-scatter (bucket)";
    request->group = group;
    request->scratch = malloc(sizeof(float) * (count ? count : 1));
    CHECK(request->scratch, "out of host memory for a reduce-scatter of %zu elements", count);
    request->destination = buf + (size_t)group->rank * count;
    request->bytes = sizeof(float) * count;
    CHECK_MPI(MPI_Ireduce_scatter_block(buf, request->scratch, as_count(count), MPI_FLOAT, MPI_SUM,
                                        group->mpi, &request->mpi));
}

static void mpi_iallgather(void *buf, size_t count, comm_dtype dtype, const comm_group *group,
                           comm_request *request) {
    request->active = 1;
    request->operation = "all-gather (parameters)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, mpi_type(dtype), buf, as_count(count), mpi_type(dtype),
                             group->mpi, &request->mpi));
}

static void mpi_ireduce_scatter_into(const void *send, void *recv, size_t count, comm_dtype dtype,
                                     const comm_group *group, comm_request *request) {
    require_float(dtype, "reduce-scatter", group);
    request->active = 1;
    request->operation = "reduce-scatter (input gradient)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Ireduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi, &request->mpi));
}

static void mpi_iallreduce_into(void *buf, size_t count, comm_dtype dtype, const comm_group *group,
                                comm_request *request) {
    require_float(dtype, "all-reduce", group);
    request->active = 1;
    request->operation = "all-reduce (input gradient)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi, &request->mpi));
}

static void mpi_post(const void *src, size_t bytes, int peer, const comm_group *group) {
    mpi_window *w = group->backend;
    CHECK(w, "comm_mpi: group %s was not attached", group->name);
    if (w->num_posts == w->capacity) {
        w->capacity = w->capacity ? 2 * w->capacity : 16;
        w->posts = realloc(w->posts, sizeof(MPI_Request) * (size_t)w->capacity);
        CHECK(w->posts, "out of host memory for posts on group %s", group->name);
    }
    CHECK_MPI(MPI_Isend(src, as_count(bytes), MPI_BYTE, peer, WINDOW_TAG, group->mpi, &w->posts[w->num_posts++]));
}

static void mpi_fetch(void *dst, const void *src, size_t bytes, int peer, const comm_group *group,
                      comm_request *request) {
    (void)src; /* the peer sends the bytes at that place */
    request->active = 1;
    request->operation = "fetch (tp-comm-overlap: waiting for the peer's post)";
    request->group = group;
    request->scratch = NULL;
    CHECK_MPI(MPI_Irecv(dst, as_count(bytes), MPI_BYTE, peer, WINDOW_TAG, group->mpi, &request->mpi));
}

/* after MPI has completed the request: move a reduce-scatter result into place, free what the
 * operation held */
static void finish_request(comm_request *request) {
    if (request->scratch) {
        if (request->destination) memcpy(request->destination, request->scratch, request->bytes);
        free(request->scratch);
        request->scratch = NULL;
    }
    request->active = 0;
}

static void mpi_wait(comm_request *request) {
    if (!request->active) return;
    comm_timed_wait(&request->mpi, request->operation, request->group->name, request->group->mpi);
    finish_request(request);
}

static int mpi_test(comm_request *request) {
    if (!request->active) return 1;
    int done = 0;
    CHECK_MPI(MPI_Test(&request->mpi, &done, MPI_STATUS_IGNORE));
    if (done) finish_request(request);
    return done;
}

const comm_ops *comm_mpi(void) {
    static const comm_ops ops = {
        .name = "mpi",
        .attach = mpi_attach,
        .detach = mpi_detach,
        .allreduce = mpi_allreduce,
        .allreduce_double_host = mpi_allreduce_double,
        .broadcast = mpi_broadcast,
        .barrier = mpi_barrier,
        .allgather = mpi_allgather,
        .alltoallv = mpi_alltoallv,
        .ialltoallv = mpi_ialltoallv,
        .alltoall_host = mpi_alltoall_host,
        .reduce_scatter = mpi_reduce_scatter,
        .send = mpi_send,
        .recv = mpi_recv,
        .irecv = mpi_irecv,
        .iallreduce_float = mpi_iallreduce,
        .ireduce_scatter_float = mpi_ireduce_scatter,
        .iallgather = mpi_iallgather,
        .ireduce_scatter_into = mpi_ireduce_scatter_into,
        .iallreduce_into = mpi_iallreduce_into,
        .window_register = mpi_window_register,
        .post = mpi_post,
        .fetch = mpi_fetch,
        .window_flush = mpi_window_flush,
        .wait = mpi_wait,
        .test = mpi_test,
    };
    return &ops;
}

void comm_group_create(comm_group *group, const char *name, MPI_Comm parent) {
    group->name = name;
    group->backend = NULL;
    group->point_to_point = 0;
    CHECK_MPI(MPI_Comm_dup(parent, &group->mpi));
    CHECK_MPI(MPI_Comm_rank(group->mpi, &group->rank));
    CHECK_MPI(MPI_Comm_size(group->mpi, &group->size));
}

void comm_group_free(comm_group *group) {
    if (group->mpi != MPI_COMM_NULL) MPI_Comm_free(&group->mpi);
    group->mpi = MPI_COMM_NULL;
}
