/* nccl_watchdog.c: see nccl_watchdog.h. The training thread stamps operations (begin), then
 * puts a completion marker behind each on its stream (track) and appends it to a list under a
 * mutex; the watchdog thread polls the list every 100 ms, reading the markers from mapped host
 * memory (no CUDA call), drops the completed operations and ends the job when a pending one (or
 * the one being enqueued) is older than the timeout, having started the communicators' aborts. */
#include "app/parallel/nccl_watchdog.h"
#include "app/parallel/timeout.h"
#include "app/core/error.h"

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { COMMS_MAX = 16, STREAMS_MAX = 64 };

typedef struct tracked {
    int stream_slot;
    uint32_t sequence;   /* complete once the slot's marker reaches it */
    const char *operation, *group_name;
    double enqueued;
} tracked;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static int running, stopping;
static tracked *list;
static int count, capacity;
static struct { ncclComm_t comm; const char *name; } comms[COMMS_MAX];
static int num_comms;
/* the operation being enqueued now (between begin and track), watched like a pending one */
static struct { int active; const char *operation, *group_name; double since; } enqueueing;

/* completion markers: one 32-bit sequence number per stream in mapped (pinned) host memory,
 * written by the stream (cuStreamWriteValue32) and read by the watchdog thread */
typedef CUresult (*stream_write_value_fn)(CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags);
static stream_write_value_fn write_value;
static volatile uint32_t *markers;     /* host address */
static CUdeviceptr markers_device;     /* the same memory, for the GPU */
static struct { cudaStream_t stream; uint32_t issued; } streams[STREAMS_MAX];
static int num_streams;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 1 when the marker of slot has reached sequence (modulo 2^32) */
static int marker_reached(int slot, uint32_t sequence) { return (int32_t)(markers[slot] - sequence) >= 0; }

static void markers_create(void) {
    void *host = NULL, *device = NULL;
    enum cudaDriverEntryPointQueryResult found;
    void *fn = NULL;
    CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &found) == cudaSuccess &&
              fn && found == cudaDriverEntryPointSuccess,
          "the NCCL watchdog: the CUDA driver has no cuStreamWriteValue32");
    write_value = (stream_write_value_fn)fn;
    CHECK(cudaHostAlloc(&host, STREAMS_MAX * sizeof(uint32_t), cudaHostAllocMapped) == cudaSuccess,
          "the NCCL watchdog: cudaHostAlloc of its completion markers failed");
    CHECK(cudaHostGetDevicePointer(&device, host, 0) == cudaSuccess,
          "the NCCL watchdog: cudaHostGetDevicePointer failed");
    markers = host;
    markers_device = (CUdeviceptr)device;
    for (int i = 0; i < STREAMS_MAX; i++) markers[i] = 0;
    num_streams = 0;
}

static void markers_free(void) {
    cudaFreeHost((void *)markers);
    markers = NULL;
    num_streams = 0;
}

/* the slot of stream: its own, or a new one, or one whose operations are all complete (a
 * stream handle can be reused after its stream is destroyed; the slot's count goes on, so
 * sequence numbers in a slot only grow) */
static int stream_slot(cudaStream_t stream) {
    for (int i = 0; i < num_streams; i++)
        if (streams[i].stream == stream) return i;
    if (num_streams < STREAMS_MAX) {
        streams[num_streams].stream = stream;
        streams[num_streams].issued = 0;
        return num_streams++;
    }
    for (int i = 0; i < STREAMS_MAX; i++)
        if (marker_reached(i, streams[i].issued)) {
            streams[i].stream = stream;
            return i;
        }
    FATAL("the NCCL watchdog: more than %d streams with operations in flight", STREAMS_MAX);
}

/* the communicators' aborts, run by a helper thread that the job does not wait for: ncclCommAbort
 * frees device memory, and that waits for the device while another communicator's kernel still
 * spins (on two H100s every abort of a job with a stopped rank was still running 5 s later), so
 * it can wait forever. The job waits only (at most ERRORS_WAIT_NS) for the groups' asynchronous
 * errors, read first, for its message; MPI_Abort then ends every rank, kernels included. */
static const long ERRORS_WAIT_NS = 500L * 1000 * 1000;
static struct {
    pthread_mutex_t lock;
    pthread_cond_t signal;
    int errors_read, aborted;
    ncclComm_t comms[COMMS_MAX];
    const char *names[COMMS_MAX];
    int num_comms;
    char errors[512];    /* the groups' asynchronous errors, read before the aborts */
} aborting = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0}, {0}, 0, ""};

static void aborting_set(int *flag) {
    pthread_mutex_lock(&aborting.lock);
    *flag = 1;
    pthread_cond_signal(&aborting.signal);
    pthread_mutex_unlock(&aborting.lock);
}

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
    aborting_set(&aborting.errors_read);
    for (int i = 0; i < aborting.num_comms; i++) ncclCommAbort(aborting.comms[i]);
    aborting_set(&aborting.aborted);
    return NULL;
}

/* an operation is overdue: start the communicators' aborts and end the job (called with the lock
 * held; nothing returns from here) */
static void overdue(const char *operation, const char *group_name, double waited, int still_enqueueing) {
    for (int i = 0; i < num_comms; i++) {
        aborting.comms[i] = comms[i].comm;
        aborting.names[i] = comms[i].name;
    }
    aborting.num_comms = num_comms;
    pthread_t helper;
    int errors_read = 0, aborted = 0;
    if (pthread_create(&helper, NULL, abort_communicators, NULL) == 0) {
        pthread_detach(helper);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += ERRORS_WAIT_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&aborting.lock);
        while (!aborting.errors_read && pthread_cond_timedwait(&aborting.signal, &aborting.lock, &until) == 0) {
        }
        errors_read = aborting.errors_read;
        aborted = aborting.aborted;
        pthread_mutex_unlock(&aborting.lock);
    }
    const char *outcome = aborted ? "every NCCL communicator is aborted"
                                  : "the job ends while the NCCL communicators' aborts run";
    FATAL("NCCL %s on group %s did not complete within --distributed-timeout-minutes %g (enqueued %.1f s ago%s)%s; "
          "%s; the ranks of the group that did not arrive are those without this message", operation, group_name,
          comm_timeout_seconds() / 60.0, waited, still_enqueueing ? "; the host is still inside the NCCL call" : "",
          errors_read ? aborting.errors : "", outcome);
}

/* the watchdog thread: no CUDA call here (see nccl_watchdog.h) */
static void *watch(void *unused) {
    (void)unused;
    const struct timespec period = {0, 100 * 1000 * 1000};
    for (;;) {
        pthread_mutex_lock(&lock);
        if (stopping) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        double now = now_seconds(), timeout = comm_timeout_seconds();
        if (enqueueing.active && now - enqueueing.since > timeout)
            overdue(enqueueing.operation, enqueueing.group_name, now - enqueueing.since, 1);
        int kept = 0;
        for (int i = 0; i < count; i++) {
            if (marker_reached(list[i].stream_slot, list[i].sequence)) continue;
            if (now - list[i].enqueued > timeout)
                overdue(list[i].operation, list[i].group_name, now - list[i].enqueued, 0);
            list[kept++] = list[i];
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
        markers_create();
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
    count = 0;
    enqueueing.active = 0;
    markers_free();
}

void nccl_watchdog_begin(const char *operation, const char *group_name) {
    if (!running) return;
    pthread_mutex_lock(&lock);
    enqueueing.operation = operation;
    enqueueing.group_name = group_name;
    enqueueing.since = now_seconds();
    enqueueing.active = 1;
    pthread_mutex_unlock(&lock);
}

void nccl_watchdog_track(cudaStream_t stream) {
    if (!running) return;
    CHECK(enqueueing.active, "the NCCL watchdog: an operation tracked without nccl_watchdog_begin");
    int slot = stream_slot(stream);
    uint32_t sequence = ++streams[slot].issued;
    CUresult result = write_value((CUstream)stream, markers_device + (CUdeviceptr)slot * sizeof(uint32_t), sequence,
                                  CU_STREAM_WRITE_VALUE_DEFAULT);
    CHECK(result == CUDA_SUCCESS, "the NCCL watchdog: cuStreamWriteValue32 of a completion marker failed (CUresult %d)",
          (int)result);
    pthread_mutex_lock(&lock);
    if (count == capacity) {
        capacity = capacity ? 2 * capacity : 256;
        list = realloc(list, sizeof(tracked) * (size_t)capacity);
        CHECK(list, "out of host memory for the NCCL watchdog");
    }
    list[count++] = (tracked){slot, sequence, enqueueing.operation, enqueueing.group_name, enqueueing.since};
    enqueueing.active = 0;
    pthread_mutex_unlock(&lock);
}
