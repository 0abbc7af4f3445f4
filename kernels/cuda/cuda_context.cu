/* cuda_context.cu: the CUDA backend's per-process state: the selected device, the compute stream
 * every kernel runs on, and the cuBLASLt handle with its workspace. One GPU per rank. */
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

/* for cuda_matmul.cu */
cublasLtHandle_t cuda_cublaslt_handle(void) { return context_cublaslt; }
void *cuda_cublaslt_workspace(size_t *bytes) {
    *bytes = cublaslt_workspace_bytes;
    return context_cublaslt_workspace;
}
