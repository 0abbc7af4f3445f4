/* timeout.h: waits on MPI requests with a deadline (Megatron's --distributed-timeout-minutes),
 * so that a rank that hangs (stopped, deadlocked, stuck in I/O) ends the job with a message
 * instead of holding every other rank forever.
 *
 * Every collective and point-to-point wait of the MPI comm backend goes through
 * comm_timed_wait: it polls the request (MPI_Test) until it completes or the deadline passes.
 * While a rank polls it also answers "where are you?" probes from other ranks on a private
 * duplicate of MPI_COMM_WORLD. When a wait times out, the rank probes the other members of the
 * group it waits on, gives them a short grace period to answer, and aborts the job with one
 * line naming the operation, the group and, for every member that is not waiting in it, what
 * it answered (waiting elsewhere: which operation) or that it did not answer (stopped, dead, or
 * computing without end). A rank that waits long prints a heartbeat line now and then, so a
 * stuck job is visible in the log before the timeout ends it. */
#ifndef TIMEOUT_H
#define TIMEOUT_H

#include <mpi.h>

/* Set the timeout and the heartbeat period (seconds; 0 disables either) and create the probe
 * communicator (collective over MPI_COMM_WORLD; call once, before training). Until it is called
 * waits use a 600 s timeout (Megatron's default of 10 minutes) without probing. */
void comm_timeout_init(double timeout_seconds, double heartbeat_seconds);
void comm_timeout_finalize(void);

/* Complete *request (an operation `operation`, e.g. "all-reduce", on group `group_name` over
 * `comm`), aborting the job when it takes longer than the timeout. */
void comm_timed_wait(MPI_Request *request, const char *operation, const char *group_name, MPI_Comm comm);

/* the configured timeout in seconds (for messages and tests) */
double comm_timeout_seconds(void);

/* seconds this process has spent blocked in comm_timed_wait so far (every MPI wait of the comm
 * backend and of the host collectives; --log-straggler's communication time) */
double comm_waited_seconds(void);

#endif
