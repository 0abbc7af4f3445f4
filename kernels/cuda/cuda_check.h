/* cuda_check.h: the CUDA error-checking macro: a failing call is named with its rank, file and
 * line, and the job is aborted (see app/error.h for the host side). */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_CUDA(call)                                                                   \
    do {                                                                                   \
        cudaError_t cuda_err_ = (call);                                                    \
        if (cuda_err_ != cudaSuccess) {                                                    \
            fprintf(stderr, "FATAL at %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,  \
                    cudaGetErrorString(cuda_err_));                                        \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
