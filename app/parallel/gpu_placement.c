/* gpu_placement.c: see gpu_placement.h. */
#include "app/parallel/gpu_placement.h"
#include "app/core/error.h"

#include <mpi.h>

node_place node_place_find(void) {
    node_place place = {0, 1};
    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_rank(node, &place.local_rank));
    CHECK_MPI(MPI_Comm_size(node, &place.local_size));
    CHECK_MPI(MPI_Comm_free(&node));
    return place;
}

void gpu_placement_check(int uses_cuda, int devices, node_place place) {
    /* the worst node, in one number: most ranks first, then fewest GPUs (0 where a node is fine) */
    int over = uses_cuda && place.local_size > devices;
    long long mine = over ? (long long)place.local_size * 1000000 + (999999 - devices) : 0;
    long long worst = 0;
    CHECK_MPI(MPI_Allreduce(&mine, &worst, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
    if (worst == 0) return;
    int ranks = (int)(worst / 1000000), gpus = 999999 - (int)(worst % 1000000);
    if (gpus == 0)
        user_error("--device cuda: no GPU is visible to this process (check CUDA_VISIBLE_DEVICES and the driver); "
                   "use --device cpu");
    user_error("--device cuda: a node runs %d ranks but sees %d GPU%s; each rank needs a GPU of its own: start at "
               "most %d rank%s per node (mpiexec -n, --ntasks-per-node), make more GPUs visible "
               "(CUDA_VISIBLE_DEVICES), or use --device cpu",
               ranks, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
}
