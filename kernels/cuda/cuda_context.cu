/* cuda_context.cu: the CUDA backend's per-process state: the selected device, the compute stream
 * every kernel runs on, and the cuBLASLt handle with its workspace. One GPU per rank. Besides,
 * a few "lanes": side streams, each with its own cuBLASLt workspace, on which independent GEMMs
 * (the experts' grouped GEMMs) run side by side (cuda_lane_fork / cuda_lane_join). */
#include <cublasLt.h>

#include "kernels/cuda/cuda_common.cuh"

static cudaStream_t context_stream;
static cudaStream_t selected_stream; /* cuda_stream_select's, or NULL: the compute stream */
static cublasLtHandle_t context_cublaslt;
static void *context_cublaslt_workspace;
static int context_ready;

/* cuBLASLt's recommended workspace on Hopper */
static const size_t cublaslt_workspace_bytes = 32u << 20;

extern "C" void cuda_context_init(int device) {
    if (context_ready) return;
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamCreateWithFlags(&context_stream, cudaStreamNonBlocking));
    CHECK_CUBLAS(cublasLtCreate(&context_cublaslt));
    CHECK_CUDA(cudaMalloc(&context_cublaslt_workspace, cublaslt_workspace_bytes));
    kernels_memory_record_alloc(context_cublaslt_workspace, cublaslt_workspace_bytes);
    context_ready = 1;
}

extern "C" void *cuda_stream(void) { return (void *)(selected_stream ? selected_stream : context_stream); }

/* launches go to stream from now on (NULL: the compute stream again); returns the one before */
extern "C" void *cuda_stream_select(void *stream) {
    void *before = cuda_stream();
    selected_stream = (cudaStream_t)stream;
    return before;
}

extern "C" void cuda_synchronize(void) { CHECK_CUDA(cudaStreamSynchronize(context_stream)); }

/* ---- lanes ----
 * Lane l's stream and workspace are made on first use. cuda_lane_fork(n) makes lanes 0..n-1
 * wait for what the current stream has queued; cuda_lane_select(l) sends launches to lane l;
 * cuda_lane_join(n) makes the stream current at the fork wait for the n lanes and selects it
 * again. A GEMM on a lane uses the lane's workspace, so that GEMMs on two lanes never share one. */
static cudaStream_t lane_stream[CUDA_LANES_MAX];
static void *lane_workspace[CUDA_LANES_MAX];
static cudaEvent_t lane_done[CUDA_LANES_MAX], fork_ready;
static cudaStream_t fork_origin;

static void lane_make(int lane) {
    if (lane_stream[lane]) return;
    CHECK_CUDA(cudaStreamCreateWithFlags(&lane_stream[lane], cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&lane_done[lane], cudaEventDisableTiming));
    CHECK_CUDA(cudaMalloc(&lane_workspace[lane], cublaslt_workspace_bytes));
    kernels_memory_record_alloc(lane_workspace[lane], cublaslt_workspace_bytes);
    if (!fork_ready) CHECK_CUDA(cudaEventCreateWithFlags(&fork_ready, cudaEventDisableTiming));
}

void cuda_lane_fork(int lanes) {
    for (int l = 0; l < lanes; l++) lane_make(l);
    fork_origin = (cudaStream_t)cuda_stream();
    CHECK_CUDA(cudaEventRecord(fork_ready, fork_origin));
    for (int l = 0; l < lanes; l++) CHECK_CUDA(cudaStreamWaitEvent(lane_stream[l], fork_ready, 0));
}

void cuda_lane_select(int lane) { selected_stream = lane_stream[lane]; }

void cuda_lane_join(int lanes) {
    for (int l = 0; l < lanes; l++) {
        CHECK_CUDA(cudaEventRecord(lane_done[l], lane_stream[l]));
        CHECK_CUDA(cudaStreamWaitEvent(fork_origin, lane_done[l], 0));
    }
    selected_stream = fork_origin == context_stream ? (cudaStream_t)NULL : fork_origin;
}

/* for cuda_matmul.cu */
cublasLtHandle_t cuda_cublaslt_handle(void) { return context_cublaslt; }
void *cuda_cublaslt_workspace(size_t *bytes) {
    *bytes = cublaslt_workspace_bytes;
    for (int l = 0; l < CUDA_LANES_MAX; l++)
        if (selected_stream && selected_stream == lane_stream[l]) return lane_workspace[l];
    return context_cublaslt_workspace;
}
