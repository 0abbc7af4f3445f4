/* attention_test_util.h: host helpers shared by the CUDA attention tests (cuda_attention_test.c,
 * cuda_bert_kernels_test.c): checked host allocation, the device sync before a download, and the
 * q, k or v part of rows in kernels.h's grouped qkv layout. Include after cuda_test_util.h. */
#ifndef ATTENTION_TEST_UTIL_H
#define ATTENTION_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

static inline void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

/* the kernels run on a non-blocking stream, which does not wait for the default-stream memsets
 * and copies of the helpers: finish those before launching */
static inline void device_sync(void) { TEST_CUDA(cudaDeviceSynchronize()); }

static inline void download_raw(void *host, const void *dev, size_t bytes) {
    device_sync();
    TEST_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* part (0 = q, 1 = k, 2 = v) of rows of H query heads in G groups (kernels.h's layout),
 * gathered into [rows, H or G, D]; returns the element count */
static inline size_t gather_part(float *dst, const float *qkv, size_t rows, int H, int G, int D, int part) {
    size_t row = (size_t)(H + 2 * G) * D, count = 0;
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < (part == 0 ? H : G); h++) {
            size_t at = part == 0 ? qkv_query_offset(h, H, G, D) : qkv_key_offset(h, H, G, D) + (part == 2 ? D : 0);
            memcpy(dst + count, qkv + r * row + at, (size_t)D * sizeof(float));
            count += (size_t)D;
        }
    return count;
}

#endif
