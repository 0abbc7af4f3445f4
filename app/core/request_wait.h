/* request_wait.h: how the collectives of app/core (the timers' barrier and gather) wait on their
 * MPI requests. They must not wait forever on a rank that hangs, but core knows nothing of
 * --distributed-timeout-minutes (app/parallel/timeout.h): the caller hands in a waiter with the
 * signature of comm_timed_wait; NULL waits with MPI_Wait. */
#ifndef REQUEST_WAIT_H
#define REQUEST_WAIT_H

#include "app/core/error.h"

#include <mpi.h>

/* complete *request, an operation (e.g. "all-gather") on group_name over comm */
typedef void (*request_waiter)(MPI_Request *request, const char *operation, const char *group_name, MPI_Comm comm);

static inline void request_wait(request_waiter waiter, MPI_Request *request, const char *operation,
                                const char *group_name, MPI_Comm comm) {
    if (waiter)
        waiter(request, operation, group_name, comm);
    else
        CHECK_MPI(MPI_Wait(request, MPI_STATUS_IGNORE));
}

#endif
