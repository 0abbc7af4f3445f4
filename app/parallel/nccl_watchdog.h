/* nccl_watchdog.h: --distributed-timeout-minutes on the NCCL backend. NCCL operations run on
 * CUDA streams, so a rank that never arrives leaves its peers' GPUs spinning inside a kernel and
 * their hosts blocked in a CUDA call (a synchronization, or a launch once the stream's queue is
 * full), where no MPI deadline can fire. A watchdog thread does what PyTorch's NCCL watchdog
 * does, without calling CUDA itself (a CUDA call can wait on a lock held by the blocked host
 * thread, and did: the watchdog's cudaEventQuery never returned):
 *  - nccl_watchdog_begin stamps an operation before the host enqueues it (NCCL can block in the
 *    enqueue itself, e.g. while it connects to a peer that never answers);
 *  - nccl_watchdog_track puts a completion marker behind it on its stream: a stream memory
 *    operation (cuStreamWriteValue32, run by the GPU's front end after the work before it)
 *    writes the stream's next sequence number into mapped host memory, which the thread reads.
 * The thread polls every 100 ms and, when an operation is still pending (not yet enqueued, or
 * its marker not yet written) after the timeout counted from its stamp (the host runs at most
 * about one iteration ahead of the GPU), reads each communicator's asynchronous error, starts
 * every communicator's abort (ncclCommAbort, in a helper thread the job does not wait for: an
 * abort can wait forever on another communicator's spinning kernel) and ends the job
 * (MPI_Abort) with a message naming the operation and the group. NCCL cannot say which peer is
 * missing: every rank that waits reports it, so the ranks that did not arrive are the group's
 * ranks without this message.
 *
 * Operations are stamped and tracked by one host thread (the training loop's). */
#ifndef NCCL_WATCHDOG_H
#define NCCL_WATCHDOG_H

#include <cuda_runtime_api.h>
#include <nccl.h>

/* watch comm (group_name for messages); the thread starts with the first communicator when the
 * timeout (comm_timeout_seconds) is positive */
void nccl_watchdog_add_comm(ncclComm_t comm, const char *group_name);
/* stop watching comm; the thread ends with the last one */
void nccl_watchdog_remove_comm(ncclComm_t comm);
/* the host is about to enqueue operation on group_name: watched from now */
void nccl_watchdog_begin(const char *operation, const char *group_name);
/* the operation of the last nccl_watchdog_begin was just enqueued on stream: watch its
 * completion there */
void nccl_watchdog_track(cudaStream_t stream);

#endif
