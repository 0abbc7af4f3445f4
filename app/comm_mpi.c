/* comm_mpi.c: the comm interface over MPI, used with the CPU backend. Reductions use MPI's
 * built-in algorithms, which for a fixed communicator size and message size always combine in
 * the same order (MPICH), so results are reproducible from run to run. */
#include "comm.h"
#include "error.h"

#include <limits.h>

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

const comm_ops *comm_mpi(void) {
    static const comm_ops ops = {
        .name = "mpi",
        .allreduce_float = mpi_allreduce_float,
        .allreduce_double_host = mpi_allreduce_double,
        .broadcast = mpi_broadcast,
        .barrier = mpi_barrier,
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
