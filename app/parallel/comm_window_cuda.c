/* comm_window_cuda.c: one-sided windows for --tp-comm-overlap on the CUDA backend: the ranks of
 * a tensor-parallel group (one node, peer access) map each other's activation buffers through
 * CUDA IPC, and a rank PULLS a peer's rows with cudaMemcpyAsync from the peer's memory into its
 * own on a copy stream: the copy engines move the data over NVLink, no SM is used, so the copy
 * runs beside cuBLAS's persistent GEMM kernels instead of competing with them as NCCL's kernels
 * do (perf/results/scaling/tp-overlap-h200x2-2026-11-23.md). This is the idea of Megatron's/
 * TransformerEngine's userbuffers.
 *
 * Signals. Each rank has a device array flags[ranks] of 32-bit sequence numbers, mapped by every
 * peer. post(peer) is, on the compute stream, cuStreamWriteValue32(peer's flags[me], ++sent[peer])
 * with the default flags: a memory fence (__threadfence_system's semantics, scoped to the stream)
 * precedes the write, so the kernels before it are visible to the peer when it sees the value.
 * fetch(peer) is, on the copy stream: wait for an event of the compute stream (dst is free),
 * cuStreamWaitValue32(flags[peer] >= ++expected[peer]), the copy, an event for wait. Stream memory
 * operations are executed by the GPU's front end, not by a kernel: no SM spins (a spinning kernel
 * would hold an SM that cuBLAS's persistent grid counts on). Posts and fetches between two ranks
 * match in order because both sides count them.
 *
 * Why pulling needs no "slot free" handshake. A source is read by its consumers' copy engines
 * after the owner's post; the owner must not overwrite it before every consumer's copy is done.
 * The exchange patterns of app/parallel/tp_overlap.c keep to this rule: a rank overwrites a
 * source only after it has waited on a LATER post of every consumer, and each consumer makes
 * that later post on its compute stream only after the compute stream waited for its fetch of
 * the source (the GEMM or sum that needed the data comes between). Every tensor-parallel step
 * (all-gather or reduce-scatter) makes every rank fetch from every peer, so the post a rank waits
 * on in one step was made after the peer's fetches of the step before; a source is rewritten at
 * the earliest one step later (a block reduce-scatter rewrites its partials before it waits, so
 * two of them on one buffer must not follow each other directly: app/model/gpt_model.c
 * rs_by_blocks makes the second an NCCL collective). Destinations are local: the fetch's copy starts after the compute
 * stream's work before it, so nothing still reads dst.
 *
 * Registration is collective and symmetric (same buffers, same order, same sizes on every rank):
 * each buffer's allocation (kernels/cuda/cuda_backend.cu makes one cudaMalloc per tensor) is
 * exported with cudaIpcGetMemHandle, the handles and offsets are all-gathered over MPI and
 * opened once per allocation. A peer address is the mapped base plus the local offset. Every
 * copy is tracked by the NCCL watchdog, so a dead peer (a wait that is never satisfied) ends the
 * job after --distributed-timeout-minutes instead of hanging. */
#include "app/parallel/comm_window_cuda.h"
#include "app/core/error.h"
#include "app/parallel/nccl_watchdog.h"

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_CUDA_CALL(call)                                                                    \
    do {                                                                                         \
        cudaError_t cuda_err_ = (call);                                                          \
        if (cuda_err_ != cudaSuccess) FATAL("%s failed: %s", #call, cudaGetErrorString(cuda_err_)); \
    } while (0)

#define CHECK_CU(call)                                                                           \
    do {                                                                                         \
        CUresult cu_result_ = (call);                                                            \
        if (cu_result_ != CUDA_SUCCESS) FATAL("%s failed: CUresult %d", #call, (int)cu_result_); \
    } while (0)

/* driver entry points, through the runtime (no link against libcuda) */
typedef CUresult (*address_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
typedef CUresult (*stream_value_fn)(CUstream stream, CUdeviceptr address, cuuint32_t value, unsigned int flags);
static address_range_fn address_range;
static stream_value_fn write_value, wait_value;

static void *driver_entry(const char *symbol) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    CHECK_CUDA_CALL(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found));
    CHECK(fn && found == cudaDriverEntryPointSuccess, "--tp-comm-overlap: the CUDA driver has no %s", symbol);
    return fn;
}

typedef struct region {
    char *base;        /* this rank's allocation */
    size_t size;
    char **peer_base;  /* [ranks]: each peer's matching allocation mapped here; NULL for this rank */
} region;

struct cuda_window {
    int ranks, rank;
    region *regions;
    int num_regions, capacity;
    uint32_t *flags;       /* this rank's [ranks]: flags[p] = number of posts p made to this rank */
    uint32_t **peer_flags; /* [ranks]: peer p's flags mapped here */
    uint32_t *sent, *expected;
    cudaStream_t copy_stream;
    cudaEvent_t ready;     /* the compute stream's work before a fetch */
    int copied_signals;    /* the driver refused a stream write to a peer's memory: signal with
                            * a local stream write into outbox[peer] and a 4-byte copy of it */
    uint32_t *outbox;      /* [ranks], this rank's device memory */
};

/* the ranks must sit on one node and reach each other's GPUs */
static void check_peers(const comm_group *group) {
    MPI_Comm node;
    int node_size;
    CHECK_MPI(MPI_Comm_split_type(group->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_size(node, &node_size));
    CHECK_MPI(MPI_Comm_free(&node));
    CHECK(node_size == group->size,
          "--tp-comm-overlap needs every rank of the tensor-parallel group on one node (it maps the peers' GPU "
          "memory); group %s spans nodes (%d of its %d ranks on this one)", group->name, node_size, group->size);
    char bus[32], *buses = malloc(sizeof bus * (size_t)group->size);
    CHECK(buses, "out of host memory");
    int device;
    CHECK_CUDA_CALL(cudaGetDevice(&device));
    CHECK_CUDA_CALL(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device));
    CHECK_MPI(MPI_Allgather(bus, (int)sizeof bus, MPI_CHAR, buses, (int)sizeof bus, MPI_CHAR, group->mpi));
    for (int p = 0; p < group->size; p++) {
        int peer_device, can = 0;
        if (p == group->rank) continue;
        if (cudaDeviceGetByPCIBusId(&peer_device, buses + sizeof bus * (size_t)p) != cudaSuccess) {
            (void)cudaGetLastError(); /* not visible here: cudaIpcOpenMemHandle will tell */
            continue;
        }
        CHECK(peer_device != device, "--tp-comm-overlap: ranks %d and %d of group %s share GPU %s",
              group->rank, p, group->name, bus);
        CHECK_CUDA_CALL(cudaDeviceCanAccessPeer(&can, device, peer_device));
        CHECK(can, "--tp-comm-overlap needs peer access between the GPUs of the tensor-parallel group: GPU %s "
              "cannot access GPU %s", bus, buses + sizeof bus * (size_t)p);
    }
    free(buses);
}

/* export the allocation at base, all-gather the handles, open the peers' (NULL at this rank) */
static void map_peers(char *base, size_t offset, char **peer_base, const comm_group *group) {
    cudaIpcMemHandle_t handle, *handles = malloc(sizeof handle * (size_t)group->size);
    unsigned long long *offsets = malloc(sizeof *offsets * (size_t)group->size), local = offset;
    CHECK(handles && offsets, "out of host memory");
    CHECK_CUDA_CALL(cudaIpcGetMemHandle(&handle, base));
    CHECK_MPI(MPI_Allgather(&handle, (int)sizeof handle, MPI_BYTE, handles, (int)sizeof handle, MPI_BYTE, group->mpi));
    CHECK_MPI(MPI_Allgather(&local, 1, MPI_UNSIGNED_LONG_LONG, offsets, 1, MPI_UNSIGNED_LONG_LONG, group->mpi));
    for (int p = 0; p < group->size; p++) {
        CHECK(offsets[p] == local, "--tp-comm-overlap: a buffer registered at offset %llu on rank %d and %llu on "
              "rank %d of group %s (registration must be symmetric)", local, group->rank, offsets[p], p, group->name);
        peer_base[p] = NULL;
        if (p == group->rank) continue;
        void *mapped = NULL;
        CHECK_CUDA_CALL(cudaIpcOpenMemHandle(&mapped, handles[p], cudaIpcMemLazyEnablePeerAccess));
        peer_base[p] = mapped;
    }
    free(handles);
    free(offsets);
}

static cuda_window *window_create(const comm_group *group) {
    check_peers(group);
    if (!address_range) {
        address_range = (address_range_fn)driver_entry("cuMemGetAddressRange");
        write_value = (stream_value_fn)driver_entry("cuStreamWriteValue32");
        wait_value = (stream_value_fn)driver_entry("cuStreamWaitValue32");
    }
    cuda_window *w = calloc(1, sizeof *w);
    CHECK(w, "out of host memory");
    w->ranks = group->size;
    w->rank = group->rank;
    w->peer_flags = calloc((size_t)w->ranks, sizeof *w->peer_flags);
    w->sent = calloc((size_t)w->ranks, sizeof *w->sent);
    w->expected = calloc((size_t)w->ranks, sizeof *w->expected);
    CHECK(w->peer_flags && w->sent && w->expected, "out of host memory");
    CHECK_CUDA_CALL(cudaMalloc((void **)&w->flags, 256 + sizeof(uint32_t) * (size_t)w->ranks));
    CHECK_CUDA_CALL(cudaMemset(w->flags, 0, 256 + sizeof(uint32_t) * (size_t)w->ranks));
    CHECK_CUDA_CALL(cudaDeviceSynchronize());
    map_peers((char *)w->flags, 0, (char **)w->peer_flags, group);
    CHECK_CUDA_CALL(cudaStreamCreateWithFlags(&w->copy_stream, cudaStreamNonBlocking));
    CHECK_CUDA_CALL(cudaEventCreateWithFlags(&w->ready, cudaEventDisableTiming));
    CHECK_CUDA_CALL(cudaMalloc((void **)&w->outbox, sizeof(uint32_t) * (size_t)w->ranks));
    CHECK_MPI(MPI_Barrier(group->mpi)); /* every flag array is zero and mapped before any post */
    return w;
}

void cuda_window_register(cuda_window **window, void *buf, size_t bytes, const comm_group *group) {
    if (group->size == 1 || buf == NULL) return;
    if (!*window) *window = window_create(group);
    cuda_window *w = *window;
    CUdeviceptr base;
    size_t size;
    CHECK_CU(address_range(&base, &size, (CUdeviceptr)buf));
    CHECK((char *)buf + bytes <= (char *)base + size,
          "--tp-comm-overlap: a buffer of %zu bytes registered past the end of its allocation", bytes);
    int known = 0, all_known = 0;
    for (int i = 0; i < w->num_regions; i++) known |= w->regions[i].base == (char *)base;
    CHECK_MPI(MPI_Allreduce(&known, &all_known, 1, MPI_INT, MPI_SUM, group->mpi));
    CHECK(all_known == 0 || all_known == group->size,
          "--tp-comm-overlap: buffer registration is not symmetric over group %s", group->name);
    if (known) return;
    if (w->num_regions == w->capacity) {
        w->capacity = w->capacity ? 2 * w->capacity : 64;
        w->regions = realloc(w->regions, sizeof(region) * (size_t)w->capacity);
        CHECK(w->regions, "out of host memory");
    }
    region *r = &w->regions[w->num_regions++];
    r->base = (char *)base;
    r->size = size;
    r->peer_base = calloc((size_t)w->ranks, sizeof(char *));
    CHECK(r->peer_base, "out of host memory");
    map_peers(r->base, (size_t)((char *)buf - r->base), r->peer_base, group);
}

/* the peer's address of local address src */
static const char *peer_address(const cuda_window *w, const void *src, size_t bytes, int peer) {
    const char *s = src;
    for (int i = w->num_regions - 1; i >= 0; i--) {
        const region *r = &w->regions[i];
        if (s >= r->base && s + bytes <= r->base + r->size) return r->peer_base[peer] + (s - r->base);
    }
    FATAL("--tp-comm-overlap: fetch of %zu bytes at %p, outside every registered buffer", bytes, src);
    return NULL;
}

void cuda_window_post(cuda_window *w, int peer, const comm_group *group, cudaStream_t stream) {
    CHECK(w, "--tp-comm-overlap: post on group %s before any buffer was registered", group->name);
    uint32_t value = ++w->sent[peer];
    if (!w->copied_signals) {
        CUresult result = write_value((CUstream)stream, (CUdeviceptr)(w->peer_flags[peer] + w->rank), value,
                                      CU_STREAM_WRITE_VALUE_DEFAULT);
        if (result == CUDA_SUCCESS) return;
        if (w->rank == 0)
            fprintf(stderr, "--tp-comm-overlap: cuStreamWriteValue32 to a peer's memory failed (CUresult %d); "
                    "signalling with 4-byte copies instead\n", (int)result);
        w->copied_signals = 1;
    }
    /* the compute stream writes the value locally, then copies it into the peer's flag (the copy
     * follows the kernels before it in stream order, as the write would) */
    CHECK_CU(write_value((CUstream)stream, (CUdeviceptr)(w->outbox + peer), value, CU_STREAM_WRITE_VALUE_DEFAULT));
    CHECK_CUDA_CALL(cudaMemcpyAsync(w->peer_flags[peer] + w->rank, w->outbox + peer, sizeof(uint32_t),
                                    cudaMemcpyDeviceToDevice, stream));
}

void cuda_window_fetch(cuda_window *w, void *dst, const void *src, size_t bytes, int peer,
                       const comm_group *group, cudaStream_t stream, cudaEvent_t done) {
    CHECK(w, "--tp-comm-overlap: fetch on group %s before any buffer was registered", group->name);
    const char *from = peer_address(w, src, bytes, peer);
    uint32_t value = ++w->expected[peer];
    nccl_watchdog_begin("fetch (tp-comm-overlap)", group->name);
    CHECK_CUDA_CALL(cudaEventRecord(w->ready, stream));
    CHECK_CUDA_CALL(cudaStreamWaitEvent(w->copy_stream, w->ready, 0));
    CHECK_CU(wait_value((CUstream)w->copy_stream, (CUdeviceptr)(w->flags + peer), value, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK_CUDA_CALL(cudaMemcpyAsync(dst, from, bytes, cudaMemcpyDeviceToDevice, w->copy_stream));
    nccl_watchdog_track(w->copy_stream);
    CHECK_CUDA_CALL(cudaEventRecord(done, w->copy_stream));
}

void cuda_window_free(cuda_window *w) {
    if (!w) return;
    CHECK_CUDA_CALL(cudaStreamSynchronize(w->copy_stream));
    for (int i = 0; i < w->num_regions; i++) {
        for (int p = 0; p < w->ranks; p++)
            if (w->regions[i].peer_base[p]) CHECK_CUDA_CALL(cudaIpcCloseMemHandle(w->regions[i].peer_base[p]));
        free(w->regions[i].peer_base);
    }
    for (int p = 0; p < w->ranks; p++)
        if (w->peer_flags[p]) CHECK_CUDA_CALL(cudaIpcCloseMemHandle(w->peer_flags[p]));
    CHECK_CUDA_CALL(cudaFree(w->flags));
    CHECK_CUDA_CALL(cudaFree(w->outbox));
    CHECK_CUDA_CALL(cudaEventDestroy(w->ready));
    CHECK_CUDA_CALL(cudaStreamDestroy(w->copy_stream));
    free(w->regions);
    free(w->peer_flags);
    free(w->sent);
    free(w->expected);
    free(w);
}
