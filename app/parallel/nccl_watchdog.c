/* nccl_watchdog.c: see nccl_watchdog.h. The main thread appends tracked operations to a list
 * under a mutex; the watchdog thread polls them every 100 ms (cudaEventQuery), drops the
 * completed ones and ends the job when the oldest pending one is older than the timeout, after
 * at most a few seconds spent aborting the communicators. */
#include "app/parallel/nccl_watchdog.h"
#include "app/parallel/timeout.h"
#include "app/core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { COMMS_MAX = 16 };

typedef struct tracked {
    cudaEvent_t done;
    const char *operation, *group_name;
    double enqueued;
} tracked;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static int running, stopping, device;
static tracked *list;
static int count, capacity;
static struct { ncclComm_t comm; const char *name; } comms[COMMS_MAX];
static int num_comms;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the communicators' aborts, run by a helper thread so that the job ends even where one does not
 * return: ncclCommAbort frees device memory, and that waits for the device while another
 * communicator's kernel still spins (a rank stopped in a tensor-parallel all-reduce left one on the
 * tensor-parallel stream while the first communicator in the list was the world's) */
enum { ABORT_WAIT_SECONDS = 5 };
static struct {
    pthread_mutex_t lock;
    pthread_cond_t finished_signal;
    int finished;
    ncclComm_t comms[COMMS_MAX];
    const char *names[COMMS_MAX];
    int num_comms;
    char errors[512];    /* the groups' asynchronous errors, read before the aborts */
} aborting = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, {0}, 0, ""};

static void *abort_communicators(void *unused) {
    (void)unused;
    size_t used = 0;
    for (int i = 0; i < aborting.num_comms; i++) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(aborting.comms[i], &async) == ncclSuccess && async != ncclSuccess &&
            used < sizeof aborting.errors)
            used += (size_t)snprintf(aborting.errors + used, sizeof aborting.errors - used, "; group %s reports %s",
                                     aborting.names[i], ncclGetErrorString(async));
    }
    for (int i = 0; i < aborting.num_comms; i++) ncclCommAbort(aborting.comms[i]);
    pthread_mutex_lock(&aborting.lock);
    aborting.finished = 1;
    pthread_cond_signal(&aborting.finished_signal);
    pthread_mutex_unlock(&aborting.lock);
    return NULL;
}

/* the oldest operation is overdue: abort every communicator (waiting at most ABORT_WAIT_SECONDS
 * for that) and end the job (called with the lock held; nothing returns from here) */
static void overdue(const tracked *op, double waited) {
    for (int i = 0; i < num_comms; i++) {
        aborting.comms[i] = comms[i].comm;
        aborting.names[i] = comms[i].name;
    }
    aborting.num_comms = num_comms;
    pthread_t helper;
    int started = pthread_create(&helper, NULL, abort_communicators, NULL) == 0;
    int finished = 0;
    if (started) {
        pthread_detach(helper);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ABORT_WAIT_SECONDS;
        pthread_mutex_lock(&aborting.lock);
        while (!aborting.finished &&
               pthread_cond_timedwait(&aborting.finished_signal, &aborting.lock, &until) == 0) {
        }
        finished = aborting.finished;
        pthread_mutex_unlock(&aborting.lock);
    }
    char outcome[96];
    if (finished)
        snprintf(outcome, sizeof outcome, "every NCCL communicator is aborted");
    else
        snprintf(outcome, sizeof outcome, "the NCCL communicators' abort did not finish within %d s", ABORT_WAIT_SECONDS);
    FATAL("NCCL %s on group %s did not complete within --distributed-timeout-minutes %g (enqueued %.1f s ago)%s; "
          "%s; the ranks of the group that did not arrive are those without this message", op->operation,
          op->group_name, comm_timeout_seconds() / 60.0, waited, finished ? aborting.errors : "", outcome);
}

static void *watch(void *unused) {
    (void)unused;
    cudaSetDevice(device);
    const struct timespec period = {0, 100 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&lock);
        if (stopping) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int kept = 0;
        double now = now_seconds();
        for (int i = 0; i < count; i++) {
            cudaError_t status = cudaEventQuery(list[i].done);
            if (status == cudaErrorNotReady) {
                if (now - list[i].enqueued > comm_timeout_seconds()) overdue(&list[i], now - list[i].enqueued);
                list[kept++] = list[i];
                continue;
            }
            if (status != cudaSuccess) FATAL("the NCCL watchdog's cudaEventQuery failed: %s", cudaGetErrorString(status));
            cudaEventDestroy(list[i].done);
        }
        count = kept;
        pthread_mutex_unlock(&lock);
        nanosleep(&period, NULL);
    }
}

void nccl_watchdog_add_comm(ncclComm_t comm, const char *group_name) {
    if (comm_timeout_seconds() <= 0) return;
    pthread_mutex_lock(&lock);
    CHECK(num_comms < COMMS_MAX, "the NCCL watchdog watches at most %d communicators", COMMS_MAX);
    comms[num_comms].comm = comm;
    comms[num_comms].name = group_name;
    num_comms++;
    if (!running) {
        CHECK(cudaGetDevice(&device) == cudaSuccess, "cudaGetDevice failed");
        stopping = 0;
        CHECK(pthread_create(&thread, NULL, watch, NULL) == 0, "cannot start the NCCL watchdog thread");
        running = 1;
    }
    pthread_mutex_unlock(&lock);
}

void nccl_watchdog_remove_comm(ncclComm_t comm) {
    pthread_mutex_lock(&lock);
    int last = 0;
    for (int i = 0; i < num_comms; i++)
        if (comms[i].comm == comm) {
            comms[i] = comms[--num_comms];
            last = num_comms == 0;
            break;
        }
    int join = last && running;
    if (join) stopping = 1;
    pthread_mutex_unlock(&lock);
    if (!join) return;
    pthread_join(thread, NULL);
    running = 0;
    for (int i = 0; i < count; i++) cudaEventDestroy(list[i].done);
    count = 0;
}

void nccl_watchdog_track(cudaStream_t stream, const char *operation, const char *group_name) {
    if (!running) return;
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess, "cudaEventCreate failed");
    CHECK(cudaEventRecord(done, stream) == cudaSuccess, "cudaEventRecord failed");
    pthread_mutex_lock(&lock);
    if (count == capacity) {
        capacity = capacity ? 2 * capacity : 256;
        list = realloc(list, sizeof(tracked) * (size_t)capacity);
        CHECK(list, "out of host memory for the NCCL watchdog");
    }
    list[count++] = (tracked){done, operation, group_name, now_seconds()};
    pthread_mutex_unlock(&lock);
}
