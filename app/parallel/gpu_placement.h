/* gpu_placement.h: where a rank sits on its node, and one GPU per rank. The CUDA backend gives
 * each rank the GPU of its node-local rank; a node that starts more such ranks than it sees GPUs
 * is refused before any GPU is touched, with one message saying what to change (NCCL would
 * otherwise fail later with "invalid usage" when two ranks share a GPU). */
#ifndef GPU_PLACEMENT_H
#define GPU_PLACEMENT_H

/* this rank's place among the ranks of its node (MPI_COMM_TYPE_SHARED) */
typedef struct node_place {
    int local_rank, local_size;
} node_place;

/* collective over MPI_COMM_WORLD */
node_place node_place_find(void);

/* Collective over MPI_COMM_WORLD: every rank calls it, uses_cuda saying whether this rank runs the
 * CUDA backend and devices how many GPUs it sees. When on some node more ranks use CUDA than
 * that node has GPUs (or a rank that uses CUDA sees none), every rank ends with user_error naming
 * the counts; otherwise it returns. */
void gpu_placement_check(int uses_cuda, int devices, node_place place);

#endif
