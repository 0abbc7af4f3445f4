/* nccl_watchdog.h: --distributed-timeout-minutes on the NCCL backend. NCCL operations run on
 * CUDA streams, so a rank that never arrives leaves its peers' GPUs spinning inside a kernel and
 * their hosts blocked in a CUDA synchronization, where no MPI deadline can fire. A watchdog
 * thread does what PyTorch's NCCL watchdog does: every operation records a CUDA event behind
 * itself (nccl_watchdog_track); the thread polls the events and, when one is still pending
 * after the timeout (counted from when it was enqueued: the host runs at most about one
 * iteration ahead of the GPU), reads each communicator's asynchronous error, aborts every
 * communicator (ncclCommAbort, which frees the spinning kernels) and ends the job with a message
 * naming the operation and the group. NCCL cannot say which peer is missing: every rank that
 * waits reports it, so the ranks that did not arrive are the group's ranks without this message. */
#ifndef NCCL_WATCHDOG_H
#define NCCL_WATCHDOG_H

#include <cuda_runtime_api.h>
#include <nccl.h>

/* watch comm (group_name for messages); the thread starts with the first communicator when the
 * timeout (comm_timeout_seconds) is positive */
void nccl_watchdog_add_comm(ncclComm_t comm, const char *group_name);
/* stop watching comm; the thread ends with the last one */
void nccl_watchdog_remove_comm(ncclComm_t comm);
/* an operation was just enqueued on stream: watch its completion */
void nccl_watchdog_track(cudaStream_t stream, const char *operation, const char *group_name);

#endif
