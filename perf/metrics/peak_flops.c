/* peak_flops.c: see peak_flops.h. Dense figures at boost clock, from NVIDIA's datasheets; the
 * datasheets print tensor-core rates "with sparsity", twice the dense rate, so those are halved:
 *   H100 SXM5 / H800 / GH200: NVIDIA H100 Tensor Core GPU datasheet and the Hopper architecture
 *     whitepaper (132 SMs at 1830 MHz): FP8 1978.9, BF16/FP16 989.4, TF32 494.7, FP32 66.9
 *   H100 PCIe: datasheet: FP8 3026 / 2, BF16/FP16 1513 / 2, TF32 756 / 2, FP32 51
 *   H100 NVL, H200 NVL: datasheets: FP8 3341 / 2, BF16/FP16 1671 / 2, TF32 835 / 2, FP32 60
 *   H200 (SXM): H200 datasheet: the H100 SXM5 figures (same GH100 compute; only memory differs)
 *   A100 40 GB and 80 GB, SXM4 and PCIe, A800: A100 datasheet: BF16/FP16 312, TF32 156,
 *     FP32 19.5, no FP8 */
#include "perf/metrics/peak_flops.h"

#include <string.h>

static const char *const dtype_names[PEAK_DTYPE_COUNT] = {"bf16", "fp16", "fp8", "tf32", "fp32"};

typedef struct gpu_peak {
    const char *pattern;                 /* a substring of the driver's device name */
    double tflops[PEAK_DTYPE_COUNT];     /* bf16, fp16, fp8, tf32, fp32 */
} gpu_peak;

/* first match wins: the longer names come before their prefixes ("GH200" holds "H200") */
static const gpu_peak table[] = {
    {"GH200", {989.4, 989.4, 1978.9, 494.7, 66.9}},
    {"H200 NVL", {835.5, 835.5, 1670.5, 417.5, 60.0}},
    {"H200", {989.4, 989.4, 1978.9, 494.7, 66.9}},
    {"H100 PCIe", {756.5, 756.5, 1513.0, 378.0, 51.0}},
    {"H100 NVL", {835.5, 835.5, 1670.5, 417.5, 60.0}},
    {"H100", {989.4, 989.4, 1978.9, 494.7, 66.9}},
    {"H800", {989.4, 989.4, 1978.9, 494.7, 66.9}},
    {"A100", {312.0, 312.0, 0.0, 156.0, 19.5}},
    {"A800", {312.0, 312.0, 0.0, 156.0, 19.5}},
};

int peak_dtype_from_name(const char *name) {
    for (int i = 0; i < PEAK_DTYPE_COUNT; i++)
        if (name && strcmp(name, dtype_names[i]) == 0) return i;
    return -1;
}

const char *peak_dtype_name(peak_dtype dtype) {
    return dtype >= 0 && dtype < PEAK_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

double peak_tflops_lookup(const char *device_name, peak_dtype dtype) {
    if (!device_name || dtype < 0 || dtype >= PEAK_DTYPE_COUNT) return 0.0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(device_name, table[i].pattern)) return table[i].tflops[dtype];
    return 0.0;
}
