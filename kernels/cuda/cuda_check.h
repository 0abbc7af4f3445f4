/* cuda_check.h: the CUDA error-checking macro: a failing call is named with CUDA's error string,
 * its file and line, and reported through kernels_fatal (kernels/kernels.h), i.e. the handler the
 * application installs, which adds the rank and aborts the job (app/core/error.h). */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"

#define CHECK_CUDA(call)                                                                   \
    do {                                                                                   \
        cudaError_t cuda_err_ = (call);                                                    \
        if (cuda_err_ != cudaSuccess)                                                      \
            kernels_fatal(__FILE__, __LINE__, "%s failed: %s", #call,                      \
                          cudaGetErrorString(cuda_err_));                                  \
    } while (0)

#endif
