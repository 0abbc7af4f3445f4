/* cuda_device.cu: GPU discovery for backend selection: how many devices this process sees
 * (0 when there is no GPU or no driver, never an error), and its peak rate for MFU. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

extern "C" int cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return count;
}

/* the dense bf16 tensor-core peak of a device, recognized from its name (MFU); 0 when unknown */
extern "C" double cuda_peak_bf16_tflops(int device, char *name, int name_length) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        if (name_length > 0) name[0] = '\0';
        return 0.0;
    }
    if (name_length > 0) snprintf(name, (size_t)name_length, "%s", prop.name);
    struct { const char *pattern; double tflops; } table[] = {
        {"H200", 989.4}, {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.4},
        {"GH200", 989.4}, {"A100", 312.0}, {"A800", 312.0}, {"H800", 989.4},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(prop.name, table[i].pattern)) return table[i].tflops;
    return 0.0;
}
