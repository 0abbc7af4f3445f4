/* papi_cuda_probe.cu: does PAPI's cuda component count on this GPU, and are the counts right?
 * Adds the given cuda::: events to one event set one at a time (each add's result), starts it,
 * then reads per phase the way pretrain_gpt does (PAPI_accum at each switch) over three phases
 * of known work, on the calling thread's CUDA context (the primary one, as the trainer's):
 *   copy   y = 2 x over 256 MiB of floats: DRAM ~268 MB read and ~268 MB written, no tensor work
 *   gemm   cuBLAS bf16 GEMM 4096^3 x 4 (fp32 accumulate; wgmma kernels on sm_90): 5.50e11 FLOPs
 *   copy   the first phase again: counts like the first (a PAPI whose reads return a stale range
 *          repeats an earlier phase's counts here instead)
 * and prints each phase's counts with what they should be near. Exit status: 0 when every event
 * was added and the set started and read; 1 otherwise (the reason printed); 2 on bad usage.
 *   papi_cuda_probe [--device N] EVENT[,EVENT...]   e.g. cuda:::dram__bytes_read:stat=sum
 * Build: perf/papi/build_probes.sh (nvcc, -lcublas, libpapi with an rpath). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <papi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENTS 16

static void cuda_or_die(cudaError_t rc, const char *what) {
    if (rc != cudaSuccess) {
        fprintf(stderr, "papi_cuda_probe: %s: %s\n", what, cudaGetErrorString(rc));
        exit(1);
    }
}

__global__ void scale_kernel(const float *x, float *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = 2.0f * x[i];
}

static const char *papi_error(int rc) {
    const char *text = PAPI_strerror(rc);
    return text ? text : "?";
}

int main(int argc, char **argv) {
    int device = 0, arg = 1;
    if (argc > 2 && !strcmp(argv[1], "--device")) {
        device = atoi(argv[2]);
        arg = 3;
    }
    if (arg != argc - 1) {
        fprintf(stderr, "usage: papi_cuda_probe [--device N] EVENT[,EVENT...]\n");
        return 2;
    }
    cuda_or_die(cudaSetDevice(device), "cudaSetDevice");
    cuda_or_die(cudaFree(0), "cudaFree(0) (making the primary context)");
    cudaDeviceProp prop;
    cuda_or_die(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("GPU %d: %s, sm_%d%d; CUDA driver API %d, runtime %d\n", device, prop.name, prop.major, prop.minor, driver, runtime);

    /* the work: buffers for the copy phases, bf16 matrices for the GEMM phase */
    const size_t n = 64u << 20;   /* floats: 256 MiB */
    const int dim = 4096, gemms = 4;
    float *x, *y;
    __nv_bfloat16 *a, *b, *c;
    cuda_or_die(cudaMalloc(&x, n * sizeof *x), "cudaMalloc");
    cuda_or_die(cudaMalloc(&y, n * sizeof *y), "cudaMalloc");
    cuda_or_die(cudaMemset(x, 0, n * sizeof *x), "cudaMemset");
    size_t matrix = (size_t)dim * dim;
    cuda_or_die(cudaMalloc(&a, matrix * sizeof *a), "cudaMalloc");
    cuda_or_die(cudaMalloc(&b, matrix * sizeof *b), "cudaMalloc");
    cuda_or_die(cudaMalloc(&c, matrix * sizeof *c), "cudaMalloc");
    cuda_or_die(cudaMemset(a, 0, matrix * sizeof *a), "cudaMemset");
    cuda_or_die(cudaMemset(b, 0, matrix * sizeof *b), "cudaMemset");
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "papi_cuda_probe: cublasCreate failed\n");
        return 1;
    }
    const float one = 1.0f, zero = 0.0f;
    /* warm up both (module loading, cuBLAS heuristics) outside the counted phases */
    scale_kernel<<<1024, 256>>>(x, y, n);
    cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &one, a, CUDA_R_16BF, dim, b, CUDA_R_16BF, dim, &zero, c,
                 CUDA_R_16BF, dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cuda_or_die(cudaDeviceSynchronize(), "warm-up");

    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT) {
        printf("PAPI_library_init: %s\n", papi_error(rc));
        return 1;
    }
    printf("PAPI %d.%d.%d.%d\n", PAPI_VERSION_MAJOR(rc), PAPI_VERSION_MINOR(rc), PAPI_VERSION_REVISION(rc),
           PAPI_VERSION_INCREMENT(rc));
    int set = PAPI_NULL, added = 0, all_added = 1;
    char names[MAX_EVENTS][PAPI_HUGE_STR_LEN], list[MAX_EVENTS * PAPI_HUGE_STR_LEN];
    snprintf(list, sizeof list, "%s", argv[arg]);
    rc = PAPI_create_eventset(&set);
    if (rc != PAPI_OK) {
        printf("PAPI_create_eventset: %s\n", papi_error(rc));
        return 1;
    }
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && added < MAX_EVENTS; name = strtok_r(NULL, ",", &save)) {
        int code;
        rc = PAPI_event_name_to_code(name, &code);
        if (rc == PAPI_OK) rc = PAPI_add_event(set, code);
        printf("add %-60s %s\n", name, rc == PAPI_OK ? "ok" : papi_error(rc));
        if (rc == PAPI_OK) {
            snprintf(names[added++], sizeof names[0], "%s", name);
        } else {
            all_added = 0;
        }
    }
    int component = PAPI_get_component_index("cuda");
    const PAPI_component_info_t *info = component >= 0 ? PAPI_get_component_info(component) : NULL;
    printf("cuda component: %s%s\n", !info ? "absent" : info->disabled ? "disabled: " : "enabled",
           info && info->disabled ? info->disabled_reason : "");
    if (added == 0) return 1;
    rc = PAPI_start(set);
    printf("PAPI_start (%d events): %s\n", added, rc == PAPI_OK ? "ok" : papi_error(rc));
    if (rc != PAPI_OK) return 1;

    static const char *const phases[] = {"copy", "gemm", "copy again"};
    long long counts[3][MAX_EVENTS];
    memset(counts, 0, sizeof counts);
    int failed = !all_added;
    for (int phase = 0; phase < 3; phase++) {
        if (phase == 1) {
            for (int i = 0; i < gemms; i++)
                cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &one, a, CUDA_R_16BF, dim, b, CUDA_R_16BF, dim,
                             &zero, c, CUDA_R_16BF, dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else {
            scale_kernel<<<4 * prop.multiProcessorCount, 256>>>(x, y, n);
        }
        cuda_or_die(cudaDeviceSynchronize(), phases[phase]);
        rc = PAPI_accum(set, counts[phase]);
        if (rc != PAPI_OK) {
            printf("PAPI_accum after %s: %s\n", phases[phase], papi_error(rc));
            failed = 1;
            break;
        }
    }
    printf("expected: copy: DRAM ~%.3g bytes read and ~%.3g written, no tensor work; gemm: %.3g FLOPs (bf16, "
           "wgmma on sm_90), DRAM small; copy again: like copy\n",
           (double)(n * sizeof(float)), (double)(n * sizeof(float)), 2.0 * dim * dim * (double)dim * gemms);
    printf("%-62s %14s %14s %14s\n", "event", phases[0], phases[1], phases[2]);
    for (int e = 0; e < added; e++)
        printf("%-62s %14lld %14lld %14lld\n", names[e], counts[0][e], counts[1][e], counts[2][e]);
    long long ignored[MAX_EVENTS];
    rc = PAPI_stop(set, ignored);
    printf("PAPI_stop: %s\n", rc == PAPI_OK ? "ok" : papi_error(rc));
    /* a second start of the same set (the trainer starts again when ranks narrow the set) */
    rc = PAPI_start(set);
    printf("PAPI_start again: %s\n", rc == PAPI_OK ? "ok" : papi_error(rc));
    if (rc == PAPI_OK) PAPI_stop(set, ignored);
    PAPI_cleanup_eventset(set);
    PAPI_destroy_eventset(&set);
    PAPI_shutdown();
    return failed || rc != PAPI_OK;
}
