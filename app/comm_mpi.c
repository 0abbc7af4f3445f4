/* comm_mpi.c: the comm interface over MPI, used with the CPU backend. Reductions use MPI's
 * built-in algorithms, which for a fixed communicator size and message size always combine in
 * the same order (MPICH), so results are reproducible from run to run. */
#include "comm.h"
#include "error.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are int: split large buffers into chunks */
#define MAX_CHUNK ((size_t)INT_MAX / 2)

static MPI_Op mpi_op(comm_op op) { return op == COMM_MAX ? MPI_MAX : MPI_SUM; }

static void mpi_allreduce_float(float *buf, size_t count, comm_op op, const comm_group *group) {
    if (group->size == 1) return;
    for (size_t done = 0; done < count; done += MAX_CHUNK) {
        size_t n = count - done < MAX_CHUNK ? count - done : MAX_CHUNK;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf + done, (int)n, MPI_FLOAT, mpi_op(op), group->mpi));
    }
}

static void mpi_allreduce_double(double *buf, size_t count, comm_op op, const comm_group *group) {
    if (group->size == 1) return;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE, mpi_op(op), group->mpi));
}

static void mpi_broadcast(void *buf, size_t bytes, int root, const comm_group *group) {
    if (group->size == 1) return;
    for (size_t done = 0; done < bytes; done += MAX_CHUNK) {
        size_t n = bytes - done < MAX_CHUNK ? bytes - done : MAX_CHUNK;
        CHECK_MPI(MPI_Bcast((char *)buf + done, (int)n, MPI_BYTE, root, group->mpi));
    }
}

static void mpi_barrier(const comm_group *group) { CHECK_MPI(MPI_Barrier(group->mpi)); }

static int as_count(size_t count) {
    CHECK(count <= (size_t)INT_MAX, "message of %zu elements exceeds MPI's int count", count);
    return (int)count;
}

static void mpi_allgather(const float *send, float *recv, size_t count, const comm_group *group) {
    const void *source = send == recv + (size_t)group->rank * count ? MPI_IN_PLACE : (const void *)send;
    CHECK_MPI(MPI_Allgather(source, as_count(count), MPI_FLOAT, recv, as_count(count), MPI_FLOAT, group->mpi));
}

static void mpi_reduce_scatter(const float *send, float *recv, size_t count, const comm_group *group) {
    CHECK_MPI(MPI_Reduce_scatter_block(send, recv, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi));
}

static void mpi_send(const float *buf, size_t count, int peer, int tag, const comm_group *group,
                     comm_request *request) {
    request->active = 1;
    request->scratch = NULL;
    CHECK_MPI(MPI_Isend(buf, as_count(count), MPI_FLOAT, peer, tag, group->mpi, &request->mpi));
}

static void mpi_recv(float *buf, size_t count, int peer, int tag, const comm_group *group) {
    CHECK_MPI(MPI_Recv(buf, as_count(count), MPI_FLOAT, peer, tag, group->mpi, MPI_STATUS_IGNORE));
}

static void mpi_iallreduce(float *buf, size_t count, const comm_group *group, comm_request *request) {
    request->active = 1;
    request->scratch = NULL;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, as_count(count), MPI_FLOAT, MPI_SUM, group->mpi, &request->mpi));
}

static void mpi_ireduce_scatter(float *buf, size_t count, const comm_group *group, comm_request *request) {
    request->active = 1;
    request->scratch = malloc(sizeof(float) * (count ? count : 1));
    CHECK(request->scratch, "out of host memory for a reduce-scatter of %zu elements", count);
    request->destination = buf + (size_t)group->rank * count;
    request->count = count;
    CHECK_MPI(MPI_Ireduce_scatter_block(buf, request->scratch, as_count(count), MPI_FLOAT, MPI_SUM,
                                        group->mpi, &request->mpi));
}

static void mpi_iallgather(float *buf, size_t count, const comm_group *group, comm_request *request) {
    request->active = 1;
    request->scratch = NULL;
    CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_FLOAT, buf, as_count(count), MPI_FLOAT, group->mpi,
                             &request->mpi));
}

/* after MPI has completed the request: move a reduce-scatter result into place */
static void finish_request(comm_request *request) {
    if (request->scratch) {
        memcpy(request->destination, request->scratch, sizeof(float) * request->count);
        free(request->scratch);
        request->scratch = NULL;
    }
    request->active = 0;
}

static void mpi_wait(comm_request *request) {
    if (!request->active) return;
    CHECK_MPI(MPI_Wait(&request->mpi, MPI_STATUS_IGNORE));
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
        .allreduce_float = mpi_allreduce_float,
        .allreduce_double_host = mpi_allreduce_double,
        .broadcast = mpi_broadcast,
        .barrier = mpi_barrier,
        .allgather_float = mpi_allgather,
        .reduce_scatter_float = mpi_reduce_scatter,
        .send_float = mpi_send,
        .recv_float = mpi_recv,
        .iallreduce_float = mpi_iallreduce,
        .ireduce_scatter_float = mpi_ireduce_scatter,
        .iallgather_float = mpi_iallgather,
        .wait = mpi_wait,
        .test = mpi_test,
    };
    return &ops;
}

void comm_group_create(comm_group *group, const char *name, MPI_Comm parent) {
    group->name = name;
    CHECK_MPI(MPI_Comm_dup(parent, &group->mpi));
    CHECK_MPI(MPI_Comm_rank(group->mpi, &group->rank));
    CHECK_MPI(MPI_Comm_size(group->mpi, &group->size));
}

void comm_group_free(comm_group *group) {
    if (group->mpi != MPI_COMM_NULL) MPI_Comm_free(&group->mpi);
    group->mpi = MPI_COMM_NULL;
}
