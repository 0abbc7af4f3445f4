/* comm_nccl.c: the comm interface over NCCL, used with the CUDA backend (device memory).
 *
 * Each process group gets one NCCL communicator, bootstrapped over the group's MPI communicator
 * (rank 0 makes the unique id, MPI_Bcast shares it, ncclCommInitRank joins). Host data (losses,
 * norms, barriers, broadcasts) still goes through MPI.
 *
 * Streams. Blocking collectives and point-to-point transfers run on the backend's compute
 * stream, so they are ordered with the kernels around them and the host never waits for them.
 * The non-blocking data-parallel operations (gradient buckets, parameter gathers) run on the
 * group's side stream: it waits for an event recorded on the compute stream (the gradients are
 * complete), runs the collective, and records the request's completion event; comm wait makes
 * the compute stream wait for that event. So --overlap-grad-reduce really overlaps a bucket's
 * reduction with the rest of the backward, and --moe-shared-expert-overlap the expert dispatch's
 * all-to-alls (ialltoallv) with the shared experts' GEMMs.
 *
 * Point-to-point. NCCL sends and receives complete only together, on streams that run in
 * order, so an eager send could block the stream while the peer's stream waits on something
 * else (MPI's isend never does). A send is therefore deferred and launched with this rank's next
 * receive on the same group, in one ncclGroupStart/End (Megatron batches its pipeline sends and
 * receives the same way), or alone when its request is waited on.
 * A non-blocking receive (irecv: context parallelism's ring) is deferred too, and the next send
 * on its group launches both, with every other pending send and receive of the group, as one
 * NCCL group on the group's side stream (after the compute stream's work so far: the send's data
 * is ready, the receive's buffer free), so the transfer overlaps the kernels queued after it;
 * wait makes the compute stream wait for it. The ring's sends and receives then pair up as
 * NCCL needs them to: irecv(previous) + send(next) per step, every rank alike (its gradient
 * receive goes out with the gradient send that follows the step's compute). A pending receive
 * whose request is waited on before any send launches alone (with the pending sends).
 *
 * One-sided windows (comm.h; --tp-comm-overlap) are not NCCL: the peers' memory is mapped
 * through CUDA IPC and copied by the copy engines (app/parallel/comm_window_cuda.c).
 *
 * Every NCCL and CUDA call is checked; a failure names the call, the group, the rank and the
 * place, and aborts the job. Every operation is tracked by the NCCL watchdog
 * (app/parallel/nccl_watchdog.h), which aborts the communicators and the job when one does not
 * complete within --distributed-timeout-minutes. */
#include "app/parallel/comm.h"
#include "app/core/error.h"
#include "app/parallel/comm_window_cuda.h"
#include "app/parallel/nccl_watchdog.h"
#include "kernels/cuda/cuda_kernels.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_NCCL(call, group)                                                                  \
    do {                                                                                         \
        ncclResult_t nccl_result_ = (call);                                                      \
        if (nccl_result_ != ncclSuccess)                                                         \
            FATAL("%s failed on group %s (rank %d of %d): %s", #call, (group)->name,            \
                  (group)->rank, (group)->size, ncclGetErrorString(nccl_result_));               \
    } while (0)

#define CHECK_CUDA_CALL(call)                                                                    \
    do {                                                                                         \
        cudaError_t cuda_err_ = (call);                                                          \
        if (cuda_err_ != cudaSuccess) FATAL("%s failed: %s", #call, cudaGetErrorString(cuda_err_)); \
    } while (0)

typedef struct pending_p2p {
    void *buf;         /* a send's data (read only) or a receive's destination */
    size_t count;
    comm_dtype dtype;
    int peer;
    cudaEvent_t done;  /* the request's completion event, recorded at launch (requests may move
                        * in memory, their event handle goes with them) */
} pending_p2p;

/* a list of transfers not launched yet */
typedef struct pending_list {
    pending_p2p *items;
    int count, capacity;
} pending_list;

typedef struct nccl_group {
    ncclComm_t comm;          /* NULL for a group of one rank */
    cudaStream_t side_stream; /* non-blocking operations (data-parallel buckets, tensor-parallel input gradients) */
    pending_list sends;       /* sends not launched yet */
    pending_list receives;    /* non-blocking receives not launched yet */
    cuda_window *window;      /* one-sided windows, set up by the first window_register */
} nccl_group;

static cudaStream_t compute(void) { return (cudaStream_t)cuda_stream(); }

static nccl_group *state(const comm_group *group) {
    CHECK(group->backend != NULL, "comm_nccl: group %s was not attached", group->name);
    return group->backend;
}

static ncclDataType_t nccl_type(comm_dtype dtype) {
    return dtype == COMM_BF16 ? ncclBfloat16 : dtype == COMM_FP16 ? ncclFloat16 : ncclFloat32;
}
static ncclRedOp_t nccl_op(comm_op op) { return op == COMM_MAX ? ncclMax : ncclSum; }

/* ---- completion events: a free list, an event per active request ---- */

static cudaEvent_t *free_events;
static int num_free_events, free_events_capacity;

static cudaEvent_t take_event(void) {
    if (num_free_events > 0) return free_events[--num_free_events];
    cudaEvent_t event;
    CHECK_CUDA_CALL(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
}

static void give_event(cudaEvent_t event) {
    if (num_free_events == free_events_capacity) {
        free_events_capacity = free_events_capacity ? 2 * free_events_capacity : 64;
        free_events = realloc(free_events, sizeof(cudaEvent_t) * (size_t)free_events_capacity);
        CHECK(free_events, "out of host memory for CUDA events");
    }
    free_events[num_free_events++] = event;
}

/* ---- groups ---- */

/* NCCL connects point-to-point peers lazily, inside the first ncclGroupEnd that uses them, and
 * that handshake hangs or fails when the two sides' first groups ask for different connections
 * (as the deferred pipeline sends do). So every rank exchanges a word with both ring neighbours
 * at once at start-up, which sets up every connection the pipeline schedules use. */
static void connect_neighbours(comm_group *group) {
    nccl_group *g = group->backend;
    int next = (group->rank + 1) % group->size, prev = (group->rank + group->size - 1) % group->size;
    float *words = NULL;
    CHECK_CUDA_CALL(cudaMalloc((void **)&words, 4 * sizeof(float)));
    CHECK_NCCL(ncclGroupStart(), group);
    CHECK_NCCL(ncclSend(words, 1, ncclFloat32, next, g->comm, compute()), group);
    CHECK_NCCL(ncclRecv(words + 1, 1, ncclFloat32, prev, g->comm, compute()), group);
    CHECK_NCCL(ncclSend(words + 2, 1, ncclFloat32, prev, g->comm, compute()), group);
    CHECK_NCCL(ncclRecv(words + 3, 1, ncclFloat32, next, g->comm, compute()), group);
    CHECK_NCCL(ncclGroupEnd(), group);
    CHECK_CUDA_CALL(cudaStreamSynchronize(compute()));
    CHECK_CUDA_CALL(cudaFree(words));
}

static void nccl_attach(comm_group *group) {
    nccl_group *g = calloc(1, sizeof *g);
    CHECK(g, "out of host memory for an NCCL group");
    if (group->size > 1) {
        ncclUniqueId id;
        if (group->rank == 0) CHECK_NCCL(ncclGetUniqueId(&id), group);
        CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, group->mpi));
        CHECK_NCCL(ncclCommInitRank(&g->comm, group->size, id, group->rank), group);
        nccl_watchdog_add_comm(g->comm, group->name);
        CHECK_CUDA_CALL(cudaStreamCreateWithFlags(&g->side_stream, cudaStreamNonBlocking));
    }
    group->backend = g;
    if (group->point_to_point && group->size > 1) connect_neighbours(group);
}

static void nccl_detach(comm_group *group) {
    nccl_group *g = group->backend;
    if (!g) return;
    CHECK(g->sends.count == 0 && g->receives.count == 0,
          "comm_nccl: group %s detached with %d sends and %d receives not launched", group->name, g->sends.count,
          g->receives.count);
    cuda_window_free(g->window);
    if (g->comm) {
        CHECK_CUDA_CALL(cudaStreamSynchronize(g->side_stream));
        CHECK_CUDA_CALL(cudaStreamSynchronize(compute()));
        nccl_watchdog_remove_comm(g->comm);
        CHECK_NCCL(ncclCommDestroy(g->comm), group);
        CHECK_CUDA_CALL(cudaStreamDestroy(g->side_stream));
    }
    free(g->sends.items);
    free(g->receives.items);
    free(g);
    group->backend = NULL;
}

/* ---- blocking collectives on the compute stream ---- */

/* test hook (tests/gpu/gpu_hang_test.sh): MTC_FAULT_NCCL_STOP=R:N stops world rank R (SIGSTOP)
 * just before it enqueues its N-th blocking all-reduce of more than one rank. Its peers' GPUs
 * then wait inside that all-reduce and their hosts in the next device synchronization, where
 * only the NCCL watchdog can end the job. */
static void fault_stop_before_allreduce(void) {
    static int stop_rank = -1;
    static long stop_at = -1, seen;
    if (stop_at < 0) {
        const char *spec = getenv("MTC_FAULT_NCCL_STOP");
        stop_at = 0;
        if (spec && sscanf(spec, "%d:%ld", &stop_rank, &stop_at) != 2) stop_at = 0;
    }
    if (stop_at <= 0 || ++seen != stop_at) return;
    int rank = 0;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == stop_rank) raise(SIGSTOP);
}

static void nccl_allreduce(void *buf, size_t count, comm_dtype dtype, comm_op op, const comm_group *group) {
    if (group->size == 1 || count == 0) return;
    fault_stop_before_allreduce();
    nccl_watchdog_begin("all-reduce", group->name);
    CHECK_NCCL(ncclAllReduce(buf, buf, count, nccl_type(dtype), nccl_op(op), state(group)->comm, compute()), group);
    nccl_watchdog_track(compute());
}

static void nccl_allgather(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group) {
    size_t bytes = count * comm_dtype_bytes(dtype);
    if (group->size == 1) {
        if (send != recv && bytes) CHECK_CUDA_CALL(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, compute()));
        return;
    }
    nccl_watchdog_begin("all-gather", group->name);
    CHECK_NCCL(ncclAllGather(send, recv, count, nccl_type(dtype), state(group)->comm, compute()), group);
    nccl_watchdog_track(compute());
}

static void nccl_reduce_scatter(const void *send, void *recv, size_t count, comm_dtype dtype, const comm_group *group) {
    size_t bytes = count * comm_dtype_bytes(dtype);
    if (group->size == 1) {
        if (send != recv && bytes) CHECK_CUDA_CALL(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, compute()));
        return;
    }
    nccl_watchdog_begin("reduce-scatter", group->name);
    CHECK_NCCL(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, state(group)->comm, compute()), group);
    nccl_watchdog_track(compute());
}

/* host memory: MPI */
static void nccl_allreduce_double_host(double *buf, size_t count, comm_op op, const comm_group *group) {
    comm_mpi()->allreduce_double_host(buf, count, op, group);
}
/* grouped sends and receives on `stream`, one pair per peer (NCCL has no all-to-all of its own) */
static void alltoallv_on(cudaStream_t stream, const void *send, const size_t *send_counts, const size_t *send_offsets,
                         void *recv, const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                         const comm_group *group) {
    size_t element = comm_dtype_bytes(dtype);
    CHECK_NCCL(ncclGroupStart(), group);
    for (int p = 0; p < group->size; p++) {
        if (send_counts[p])
            CHECK_NCCL(ncclSend((const char *)send + send_offsets[p] * element, send_counts[p], nccl_type(dtype), p,
                                state(group)->comm, stream), group);
        if (recv_counts[p])
            CHECK_NCCL(ncclRecv((char *)recv + recv_offsets[p] * element, recv_counts[p], nccl_type(dtype), p,
                                state(group)->comm, stream), group);
    }
    CHECK_NCCL(ncclGroupEnd(), group);
}

static void nccl_alltoallv(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                           const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                           const comm_group *group) {
    size_t element = comm_dtype_bytes(dtype);
    if (group->size == 1) {
        if (send_counts[0])
            CHECK_CUDA_CALL(cudaMemcpyAsync((char *)recv + recv_offsets[0] * element,
                                            (const char *)send + send_offsets[0] * element, send_counts[0] * element,
                                            cudaMemcpyDeviceToDevice, compute()));
        return;
    }
    nccl_watchdog_begin("all-to-all", group->name);
    alltoallv_on(compute(), send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype, group);
    nccl_watchdog_track(compute());
}

static void nccl_alltoall_host(const void *send, void *recv, size_t bytes, const comm_group *group) {
    comm_mpi()->alltoall_host(send, recv, bytes, group);
}

static void nccl_broadcast(void *buf, size_t bytes, int root, const comm_group *group) {
    comm_mpi()->broadcast(buf, bytes, root, group);
}
static void nccl_barrier(const comm_group *group) { comm_mpi()->barrier(group); }

/* ---- point-to-point: sends deferred to the next receive (see the top of the file) ---- */

/* launch the group's pending sends and receives and, when recv_buf is not NULL, one more
 * receive, as one NCCL group on `stream`; each pending transfer's event is recorded after it */
static void launch_p2p(const comm_group *group, cudaStream_t stream, void *recv_buf, size_t recv_count,
                       comm_dtype recv_dtype, int recv_peer) {
    nccl_group *g = state(group);
    for (int i = 0; i < g->sends.count; i++) {
        const pending_p2p *p = &g->sends.items[i];
        CHECK_NCCL(ncclSend(p->buf, p->count, nccl_type(p->dtype), p->peer, g->comm, stream), group);
    }
    for (int i = 0; i < g->receives.count; i++) {
        const pending_p2p *p = &g->receives.items[i];
        CHECK_NCCL(ncclRecv(p->buf, p->count, nccl_type(p->dtype), p->peer, g->comm, stream), group);
    }
    if (recv_buf) CHECK_NCCL(ncclRecv(recv_buf, recv_count, nccl_type(recv_dtype), recv_peer, g->comm, stream), group);
}

static void record_launched(nccl_group *g, cudaStream_t stream) {
    for (int i = 0; i < g->sends.count; i++) CHECK_CUDA_CALL(cudaEventRecord(g->sends.items[i].done, stream));
    for (int i = 0; i < g->receives.count; i++) CHECK_CUDA_CALL(cudaEventRecord(g->receives.items[i].done, stream));
    g->sends.count = 0;
    g->receives.count = 0;
}

/* on the compute stream: the pending transfers and, when recv_buf is not NULL, a blocking receive */
static void launch_on_compute(const comm_group *group, void *recv_buf, size_t recv_count, comm_dtype recv_dtype,
                              int recv_peer) {
    nccl_group *g = state(group);
    if (g->sends.count == 0 && g->receives.count == 0 && recv_buf == NULL) return;
    nccl_watchdog_begin(recv_buf ? "send/receive (pipeline)" : "send/receive", group->name);
    CHECK_NCCL(ncclGroupStart(), group);
    launch_p2p(group, compute(), recv_buf, recv_count, recv_dtype, recv_peer);
    CHECK_NCCL(ncclGroupEnd(), group);
    nccl_watchdog_track(compute());
    record_launched(g, compute());
}

static cudaStream_t side_after_compute(const comm_group *group, const char *operation);

/* on the side stream, after the compute stream's work so far: the pending transfers (the ring's
 * send with the receives posted before it), overlapping what the compute stream does next */
static void launch_on_side(const comm_group *group) {
    nccl_group *g = state(group);
    cudaStream_t stream = side_after_compute(group, "send/receive (context-parallel ring)");
    CHECK_NCCL(ncclGroupStart(), group);
    launch_p2p(group, stream, NULL, 0, COMM_FLOAT, 0);
    CHECK_NCCL(ncclGroupEnd(), group);
    nccl_watchdog_track(stream);
    record_launched(g, stream);
}

/* 1 when the transfer completing with this event has not been launched yet */
static int p2p_pending(const comm_group *group, cudaEvent_t done) {
    const nccl_group *g = state(group);
    for (int i = 0; i < g->sends.count; i++)
        if (g->sends.items[i].done == done) return 1;
    for (int i = 0; i < g->receives.count; i++)
        if (g->receives.items[i].done == done) return 1;
    return 0;
}

/* append a transfer to a pending list; the request completes with its event */
static void defer(pending_list *list, const comm_group *group, void *buf, size_t count, comm_dtype dtype, int peer,
                  comm_request *request) {
    CHECK(group->size > 1, "comm_nccl: point-to-point transfer on group %s of one rank", group->name);
    CHECK(peer >= 0 && peer < group->size, "comm_nccl: peer %d outside group %s of %d ranks", peer, group->name,
          group->size);
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? 2 * list->capacity : 8;
        list->items = realloc(list->items, sizeof(pending_p2p) * (size_t)list->capacity);
        CHECK(list->items, "out of host memory for pending transfers");
    }
    cudaEvent_t done = take_event();
    list->items[list->count++] = (pending_p2p){buf, count, dtype, peer, done};
    request->active = 1;
    request->backend = done;
    request->destination = (void *)group; /* a transfer: the group whose pending lists it may be in */
}

static void nccl_send(const void *buf, size_t count, comm_dtype dtype, int peer, int tag,
                      const comm_group *group, comm_request *request) {
    (void)tag; /* NCCL matches sends and receives between two ranks in order */
    nccl_group *g = state(group);
    defer(&g->sends, group, (void *)buf, count, dtype, peer, request);
    if (g->receives.count > 0) launch_on_side(group); /* the ring: a send pairs with the receives before it */
}

static void nccl_irecv(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group,
                       comm_request *request) {
    (void)tag;
    defer(&state(group)->receives, group, buf, count, dtype, peer, request);
}

static void nccl_recv(void *buf, size_t count, comm_dtype dtype, int peer, int tag, const comm_group *group) {
    (void)tag;
    launch_on_compute(group, buf, count, dtype, peer);
}

/* ---- non-blocking data-parallel collectives on the side stream ---- */

/* the side stream waits for the compute stream's work so far (the operands are ready); the
 * operation is stamped for the NCCL watchdog */
static cudaStream_t side_after_compute(const comm_group *group, const char *operation) {
    nccl_group *g = state(group);
    nccl_watchdog_begin(operation, group->name);
    cudaEvent_t ready = take_event();
    CHECK_CUDA_CALL(cudaEventRecord(ready, compute()));
    CHECK_CUDA_CALL(cudaStreamWaitEvent(g->side_stream, ready, 0));
    give_event(ready); /* the wait has captured it */
    return g->side_stream;
}

static void side_done(const comm_group *group, comm_request *request) {
    nccl_watchdog_track(state(group)->side_stream);
    request->active = 1;
    request->destination = NULL;
    request->backend = take_event();
    CHECK_CUDA_CALL(cudaEventRecord((cudaEvent_t)request->backend, state(group)->side_stream));
}

static void nccl_iallreduce(float *buf, size_t count, const comm_group *group, comm_request *request) {
    if (group->size == 1 || count == 0) { request->active = 0; return; }
    cudaStream_t stream = side_after_compute(group, "all-reduce (bucket)");
    CHECK_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, state(group)->comm, stream), group);
    side_done(group, request);
}

static void nccl_ireduce_scatter(float *buf, size_t count, const comm_group *group, comm_request *request) {
    if (group->size == 1 || count == 0) { request->active = 0; return; }
    cudaStream_t stream = side_after_compute(group, "reduce-scatter (bucket)");
    /* in place: this rank's block of the sum lands at buf + rank*count */
    CHECK_NCCL(ncclReduceScatter(buf, buf + (size_t)group->rank * count, count, ncclFloat32, ncclSum,
                                 state(group)->comm, stream), group);
    side_done(group, request);
}

static void nccl_iallgather(void *buf, size_t count, comm_dtype dtype, const comm_group *group, comm_request *request) {
    if (group->size == 1 || count == 0) { request->active = 0; return; }
    cudaStream_t stream = side_after_compute(group, "all-gather (parameters)");
    const char *own_block = (const char *)buf + (size_t)group->rank * count * comm_dtype_bytes(dtype);
    CHECK_NCCL(ncclAllGather(own_block, buf, count, nccl_type(dtype), state(group)->comm, stream), group);
    side_done(group, request);
}

/* tensor-parallel input gradients: the side stream runs the reduction while the compute stream
 * goes on with the weight gradient; a group of one rank copies (reduce-scatter) or does nothing */
static void nccl_ireduce_scatter_into(const void *send, void *recv, size_t count, comm_dtype dtype,
                                      const comm_group *group, comm_request *request) {
    if (group->size == 1 || count == 0) {
        nccl_reduce_scatter(send, recv, count, dtype, group);
        request->active = 0;
        return;
    }
    cudaStream_t stream = side_after_compute(group, "reduce-scatter (input gradient)");
    CHECK_NCCL(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, state(group)->comm, stream), group);
    side_done(group, request);
}

static void nccl_iallreduce_into(void *buf, size_t count, comm_dtype dtype, const comm_group *group,
                                 comm_request *request) {
    if (group->size == 1 || count == 0) { request->active = 0; return; }
    cudaStream_t stream = side_after_compute(group, "all-reduce (input gradient)");
    CHECK_NCCL(ncclAllReduce(buf, buf, count, nccl_type(dtype), ncclSum, state(group)->comm, stream), group);
    side_done(group, request);
}

/* the expert dispatch overlapped with the shared experts: the side stream runs the grouped sends
 * and receives after the compute stream's work so far (the rows to send are complete, the receive
 * buffer free) while the compute stream goes on; a group of one rank copies on the compute stream */
static void nccl_ialltoallv(const void *send, const size_t *send_counts, const size_t *send_offsets, void *recv,
                            const size_t *recv_counts, const size_t *recv_offsets, comm_dtype dtype,
                            const comm_group *group, comm_request *request) {
    if (group->size == 1) {
        nccl_alltoallv(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype, group);
        request->active = 0;
        return;
    }
    cudaStream_t stream = side_after_compute(group, "all-to-all (expert dispatch, overlapped)");
    alltoallv_on(stream, send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype, group);
    side_done(group, request);
}

/* ---- completion ---- */

static void complete(comm_request *request) {
    cudaEvent_t event = (cudaEvent_t)request->backend;
    CHECK_CUDA_CALL(cudaStreamWaitEvent(compute(), event, 0));
    give_event(event);
    request->backend = NULL;
    request->active = 0;
}

/* ---- one-sided windows (comm_window_cuda.c) ---- */

static void nccl_window_register(void *buf, size_t bytes, const comm_group *group) {
    cuda_window_register(&state(group)->window, buf, bytes, group);
}

static void nccl_post(const void *src, size_t bytes, int peer, const comm_group *group) {
    (void)src, (void)bytes; /* the peer reads it in place */
    cuda_window_post(state(group)->window, peer, group, compute());
}

static void nccl_fetch(void *dst, const void *src, size_t bytes, int peer, const comm_group *group,
                       comm_request *request) {
    request->active = 1;
    request->destination = NULL;
    request->backend = take_event();
    cuda_window_fetch(state(group)->window, dst, src, bytes, peer, group, compute(), (cudaEvent_t)request->backend);
}

static void nccl_window_flush(const comm_group *group) { (void)group; /* see comm_window_cuda.c: pulls need none */ }

static void nccl_wait(comm_request *request) {
    if (!request->active) return;
    const comm_group *group = request->destination;
    if (group && p2p_pending(group, (cudaEvent_t)request->backend)) launch_on_compute(group, NULL, 0, COMM_FLOAT, 0);
    complete(request);
}

static int nccl_test(comm_request *request) {
    if (!request->active) return 1;
    const comm_group *group = request->destination;
    if (group && p2p_pending(group, (cudaEvent_t)request->backend)) return 0; /* waits for the next receive or send */
    cudaError_t status = cudaEventQuery((cudaEvent_t)request->backend);
    if (status == cudaErrorNotReady) return 0;
    CHECK_CUDA_CALL(status);
    complete(request);
    return 1;
}

const comm_ops *comm_nccl(void) {
    static const comm_ops ops = {
        .name = "nccl",
        .attach = nccl_attach,
        .detach = nccl_detach,
        .allreduce = nccl_allreduce,
        .allreduce_double_host = nccl_allreduce_double_host,
        .broadcast = nccl_broadcast,
        .alltoallv = nccl_alltoallv,
        .ialltoallv = nccl_ialltoallv,
        .alltoall_host = nccl_alltoall_host,
        .barrier = nccl_barrier,
        .allgather = nccl_allgather,
        .reduce_scatter = nccl_reduce_scatter,
        .send = nccl_send,
        .recv = nccl_recv,
        .irecv = nccl_irecv,
        .iallreduce_float = nccl_iallreduce,
        .ireduce_scatter_float = nccl_ireduce_scatter,
        .iallgather = nccl_iallgather,
        .ireduce_scatter_into = nccl_ireduce_scatter_into,
        .iallreduce_into = nccl_iallreduce_into,
        .window_register = nccl_window_register,
        .post = nccl_post,
        .fetch = nccl_fetch,
        .window_flush = nccl_window_flush,
        .wait = nccl_wait,
        .test = nccl_test,
    };
    return &ops;
}
