/* cuda_device.cu: GPU discovery for backend selection: how many devices this process sees
 * (0 when there is no GPU or no driver, never an error). */
#include <cuda_runtime_api.h>

extern "C" int cuda_device_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return count;
}
