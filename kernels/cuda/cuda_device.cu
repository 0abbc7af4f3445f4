/* cuda_device.cu: GPU discovery for backend selection: how many devices this process sees
 * (0 when there is no GPU or no driver, never an error), and its name. */
#include <cuda_runtime_api.h>
#include <stdio.h>

extern "C" int cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return count;
}

/* the device's name as the driver reports it ("NVIDIA H100 80GB HBM3"), for the peak table the
 * application looks MFU's denominator up in; returns 0, or -1 (name empty) when unknown */
extern "C" int cuda_device_name(int device, char *name, int name_length) {
    cudaDeviceProp prop;
    if (name_length > 0) name[0] = '\0';
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (name_length > 0) snprintf(name, (size_t)name_length, "%s", prop.name);
    return 0;
}
