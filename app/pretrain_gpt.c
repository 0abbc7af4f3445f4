/* pretrain_gpt.c: the entry point (Megatron's pretrain_gpt.py). Setup: MPI, arguments, the
 * kernel backend, the model and optimizer. Solve: the training loop. Teardown: free, finalize. */
#include "config.h"

#include "args.h"
#include "error.h"
#include "kernels.h"
#include "training.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int);
#endif

/* ranks on this node (MPI_COMM_TYPE_SHARED) and this rank's place among them */
static void node_placement(int *local_rank, int *local_size) {
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_rank(node, local_rank));
    CHECK_MPI(MPI_Comm_size(node, local_size));
    MPI_Comm_free(&node);
}

/* share the node's cores among its ranks unless the user set OPENBLAS_NUM_THREADS */
static void set_blas_threads(int local_size) {
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (int)(cores / local_size);
    openblas_set_num_threads(threads > 0 ? threads : 1);
#else
    (void)local_size;
#endif
}

/* every rank reports where it sits; rank 0 prints the table in rank order */
static void print_layout(const args *a, int rank, int local_rank) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char line[160];
    snprintf(line, sizeof line, "  %5d  %-20s %6d  %-6s %7d", rank, host, local_rank, a->device, rank);
    char *all = NULL;
    if (rank == 0) all = malloc(sizeof line * (size_t)a->world_size);
    CHECK_MPI(MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        printf("> rank layout:\n   rank  host                  local  device dp-rank\n");
        for (int r = 0; r < a->world_size; r++) printf("%s\n", all + (size_t)r * sizeof line);
        free(all);
    }
}

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    int rank = 0, world_size = 1, local_rank = 0, local_size = 1;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));

    args a;
    args_parse(&a, argc, argv, world_size);
    node_placement(&local_rank, &local_size);
    set_blas_threads(local_size);
    const kernel_ops *ops = kernels_cpu();

    if (rank == 0) {
        printf("%s (%s %s): %d ranks, %s backend\n", program_name, PACKAGE_NAME, PACKAGE_VERSION,
               world_size, ops->name);
        args_print(&a);
    }
    print_layout(&a, rank, local_rank);

    trainer t;
    trainer_setup(&t, &a, ops);
    if (rank == 0) {
        printf("> number of parameters: %zu (%d tensors)\n", t.model.num_elements, t.model.num_params);
        fflush(stdout);
    }
    trainer_train(&t);
    uint64_t hash = gpt_model_parameter_hash(&t.model);
    if (rank == 0) printf("> final parameter hash: %016" PRIx64 "\n", hash);
    trainer_teardown(&t);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
