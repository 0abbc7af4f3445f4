/* cuda_common.cuh: what every CUDA kernel file shares: bf16 views of the C storage type, the
 * compute stream, launch-size arithmetic and the checks after a launch. Device code only; C code
 * includes cuda_kernels.h instead. */
#ifndef CUDA_COMMON_CUH
#define CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "cuda_kernels.h"

/* the C storage type and CUDA's bf16 have the same bits */
static inline __nv_bfloat16 *as_nv(bf16 *p) { return reinterpret_cast<__nv_bfloat16 *>(p); }
static inline const __nv_bfloat16 *as_nv(const bf16 *p) {
    return reinterpret_cast<const __nv_bfloat16 *>(p);
}

static inline cudaStream_t compute_stream(void) { return (cudaStream_t)cuda_stream(); }

static inline unsigned int ceil_div(size_t a, size_t b) { return (unsigned int)((a + b - 1) / b); }

/* after every launch: a bad configuration is reported at its call site, not at the next sync */
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())

#endif /* CUDA_COMMON_CUH */
