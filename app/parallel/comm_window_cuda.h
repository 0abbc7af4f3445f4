/* comm_window_cuda.h: the one-sided windows of the NCCL comm implementation (comm.h:
 * window_register, post, fetch; used by --tp-comm-overlap), over CUDA IPC mappings, stream memory
 * operations and the copy engines. comm_nccl.c keeps one window per group and calls these;
 * comm_window_cuda.c says how and why it is safe. */
#ifndef COMM_WINDOW_CUDA_H
#define COMM_WINDOW_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "app/parallel/comm.h"

typedef struct cuda_window cuda_window;

/* collective over group: map buf's allocation on every other rank (the first call also checks
 * that the ranks can map each other's memory and sets up the signal flags); *window is created
 * on the first call */
void cuda_window_register(cuda_window **window, void *buf, size_t bytes, const comm_group *group);
/* on stream (the compute stream): signal peer that this rank's data so far is complete */
void cuda_window_post(cuda_window *window, int peer, const comm_group *group, cudaStream_t stream);
/* on the window's copy stream, after stream's work so far: wait for peer's next post, copy the
 * peer's bytes at local address src's place into dst; `done` is recorded behind the copy */
void cuda_window_fetch(cuda_window *window, void *dst, const void *src, size_t bytes, int peer,
                       const comm_group *group, cudaStream_t stream, cudaEvent_t done);
/* unmap the peers' memory and free the flags (after the streams are idle) */
void cuda_window_free(cuda_window *window);

#endif
