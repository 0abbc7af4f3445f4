/* peak_flops.h: dense peak TFLOP/s per GPU type and data type, the denominator of MFU and HFU.
 * Lookup by the device name the driver reports ("NVIDIA H100 80GB HBM3"); 0 when unknown. */
#ifndef PERF_PEAK_FLOPS_H
#define PERF_PEAK_FLOPS_H

typedef enum peak_dtype {
    PEAK_BF16,    /* tensor cores, dense (no 2:4 sparsity) */
    PEAK_FP16,
    PEAK_FP8,     /* 0 where the GPU has no FP8 tensor cores */
    PEAK_TF32,
    PEAK_FP32,    /* CUDA cores, no tensor cores */
    PEAK_DTYPE_COUNT
} peak_dtype;

/* "bf16", "fp16", "fp8", "tf32", "fp32"; -1 for any other name */
int peak_dtype_from_name(const char *name);
const char *peak_dtype_name(peak_dtype dtype);

/* dense peak TFLOP/s of one GPU; 0 when the name is not in the table */
double peak_tflops_lookup(const char *device_name, peak_dtype dtype);

#endif
