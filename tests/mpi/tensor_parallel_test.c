/* tensor_parallel_test.c: each mapping of app/parallel/tensor_parallel.h, forward and backward,
 * on the CPU backend over MPI with every rank of the job as one tensor-parallel group. Inputs
 * are small integers in fp32, so every expected sum is exact. Rank 0 prints the TAP lines; a
 * check passes when it passes on every rank. Run by tensor_parallel_test.sh on 1, 2 and 4 ranks. */
#include "app/core/error.h"
#include "app/parallel/comm.h"
#include "app/parallel/tensor_parallel.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

#include <mpi.h>
#include <string.h>

static int rank, ranks;
static size_t rows, cols;  /* the whole tensor; 2 rows and 3 columns per rank */

/* a check that counts when it holds on every rank */
static void check(int holds, const char *what) {
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &holds, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0) tap_ok(holds, "%s (%d ranks)", what, ranks);
    else if (!holds) tap_failed++;
}

/* a distinct value per (rank, element) */
static float value(int from_rank, size_t element) { return (float)(from_rank * 1000 + (int)element); }

static void fill(float *x, size_t count, int from_rank) {
    for (size_t i = 0; i < count; i++) x[i] = value(from_rank, i);
}

/* sum over ranks of value(k, element) */
static float value_sum(size_t element) {
    float sum = 0.0f;
    for (int k = 0; k < ranks; k++) sum += value(k, element);
    return sum;
}

static void check_tensor_parallel_region(const tensor_parallel_comm *tp, float *x, float *out, float *workspace) {
    size_t all = rows * cols, block = cols / (size_t)ranks;
    int good;

    fill(x, all, rank);
    good = copy_to_tensor_parallel_region(tp, x) == x;
    for (size_t i = 0; i < all; i++) good &= x[i] == value(rank, i);
    check(good, "copy_to_tensor_parallel_region: identity");
    good = copy_to_tensor_parallel_region_backward(tp, x, rows, cols, COMM_FLOAT) == x;
    for (size_t i = 0; i < all; i++) good &= x[i] == value_sum(i);
    check(good, "copy_to_tensor_parallel_region backward: all-reduce in place");

    fill(x, all, rank);
    good = reduce_from_tensor_parallel_region(tp, x, rows, cols, COMM_FLOAT) == x;
    for (size_t i = 0; i < all; i++) good &= x[i] == value_sum(i);
    check(good, "reduce_from_tensor_parallel_region: all-reduce in place");
    fill(x, all, rank);
    good = reduce_from_tensor_parallel_region_backward(tp, x) == x;
    for (size_t i = 0; i < all; i++) good &= x[i] == value(rank, i);
    check(good, "reduce_from_tensor_parallel_region backward: identity");

    /* own column block of a tensor every rank holds whole (value(0, .)) */
    fill(x, all, 0);
    good = scatter_to_tensor_parallel_region(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < block; j++) good &= out[r * block + j] == value(0, r * cols + (size_t)rank * block + j);
    check(good, "scatter_to_tensor_parallel_region: this rank's column block");
    memset(out, 0, sizeof(float) * all);
    good = gather_from_tensor_parallel_region_backward(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < block; j++) good &= out[r * block + j] == value(0, r * cols + (size_t)rank * block + j);
    check(good, "gather_from_tensor_parallel_region backward: this rank's column block");

    /* rank k's column block [rows, block] holds value(k, .) */
    fill(x, rows * block, rank);
    good = gather_from_tensor_parallel_region(tp, x, out, workspace, rows, cols, COMM_FLOAT) == out;
    for (int k = 0; k < ranks; k++)
        for (size_t r = 0; r < rows; r++)
            for (size_t j = 0; j < block; j++) good &= out[r * cols + (size_t)k * block + j] == value(k, r * block + j);
    check(good, "gather_from_tensor_parallel_region: every rank's column block in place");
    memset(out, 0, sizeof(float) * all);
    good = scatter_to_tensor_parallel_region_backward(tp, x, out, workspace, rows, cols, COMM_FLOAT) == out;
    for (int k = 0; k < ranks; k++)
        for (size_t r = 0; r < rows; r++)
            for (size_t j = 0; j < block; j++) good &= out[r * cols + (size_t)k * block + j] == value(k, r * block + j);
    check(good, "scatter_to_tensor_parallel_region backward: every rank's column block in place");
}

static void check_sequence_parallel_region(const tensor_parallel_comm *tp, float *x, float *out) {
    size_t all = rows * cols, mine = all / (size_t)ranks;
    int good;

    /* rank k's row block holds value(k, .): gathered in rank order */
    fill(x, mine, rank);
    good = gather_from_sequence_parallel_region(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t i = 0; i < all; i++) good &= out[i] == value((int)(i / mine), i % mine);
    check(good, "gather_from_sequence_parallel_region: every rank's row block");
    memset(out, 0, sizeof(float) * all);
    good = reduce_scatter_to_sequence_parallel_region_backward(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t i = 0; i < all; i++) good &= out[i] == value((int)(i / mine), i % mine);
    check(good, "reduce_scatter_to_sequence_parallel_region backward: every rank's row block");

    /* whole partial sums value(k, .): this rank's rows of their sum */
    fill(x, all, rank);
    good = reduce_scatter_to_sequence_parallel_region(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t i = 0; i < mine; i++) good &= out[i] == value_sum((size_t)rank * mine + i);
    check(good, "reduce_scatter_to_sequence_parallel_region: this rank's row block of the sum");
    memset(out, 0, sizeof(float) * all);
    good = gather_from_sequence_parallel_region_backward(tp, x, out, rows, cols, COMM_FLOAT) == out;
    for (size_t i = 0; i < mine; i++) good &= out[i] == value_sum((size_t)rank * mine + i);
    check(good, "gather_from_sequence_parallel_region backward: this rank's row block of the sum");
}

static void check_vocab_statistics(const tensor_parallel_comm *tp, float *x) {
    size_t count = rows;
    int good = 1;
    fill(x, count, rank);
    vocab_parallel_statistics_allreduce(tp, x, count, COMM_MAX);
    for (size_t i = 0; i < count; i++) good &= x[i] == value(ranks - 1, i);
    fill(x, count, rank);
    vocab_parallel_statistics_allreduce(tp, x, count, COMM_SUM);
    for (size_t i = 0; i < count; i++) good &= x[i] == value_sum(i);
    check(good, "vocab_parallel_statistics_allreduce: element-wise max and sum");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    kernels_set_error_handler(error_report_fatal);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    const kernel_ops *ops = kernels_cpu();
    const comm_ops *comm = comm_mpi();
    comm_group group;
    comm_group_create(&group, "tensor-parallel", MPI_COMM_WORLD);
    comm->attach(&group);
    tensor_parallel_comm tp = {comm, &group, ops};
    rows = 2 * (size_t)ranks;
    cols = 3 * (size_t)ranks;
    float *x = ops->alloc(sizeof(float) * rows * cols), *out = ops->alloc(sizeof(float) * rows * cols);
    float *workspace = ops->alloc(sizeof(float) * rows * cols);
    check_tensor_parallel_region(&tp, x, out, workspace);
    check_sequence_parallel_region(&tp, x, out);
    check_vocab_statistics(&tp, x);
    ops->release(x);
    ops->release(out);
    ops->release(workspace);
    comm->detach(&group);
    comm_group_free(&group);
    int failed = tap_failed;
    if (rank == 0) tap_done();
    MPI_Finalize();
    return failed ? 1 : 0;
}
