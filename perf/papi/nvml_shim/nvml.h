/* nvml.h (shim): the three NVML functions PAPI's cuda component declares pointers to and looks up
 * with dlsym in the driver's libnvidia-ml.so.1 at run time (the driver branch, to refuse CUPTI's
 * legacy APIs on R580+), with NVML's ABI values. build_papi_cuda.sh puts it into PAPI's source when
 * the CUDA toolkit has no nvml.h (a toolkit assembled from NVIDIA's pip wheels ships none). */
#ifndef PERF_PAPI_NVML_SHIM_H
#define PERF_PAPI_NVML_SHIM_H

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlShutdown(void);

#endif
