/* gemm_algos.cu: times every algorithm cuBLASLt's heuristic offers (up to 16) for the GEMMs of
 * one GPT training step, next to the one kernels/cuda/cuda_matmul.cu runs (the heuristic's first),
 * so that a per-shape choice can be judged before it is built. Each problem is set up by
 * cuda_matmul.cu's own builders (forward_problem, input_gradient_problem,
 * weight_gradient_problem) with the epilogues training uses, on buffers of small random values,
 * and timed by its tuning's time_algorithm (one warm-up call, then --iters calls, default 20).
 *
 * Usage: gemm_algos [--iters N] [N C F V LAYERS]... (tokens per micro-batch, hidden size, FFN
 * size, padded vocabulary, layers)
 * Default: GPT-2 124M (32768 768 3072 50304 12) and GPT 1.3B (16384 2048 8192 50304 24).
 * Build: make perf/gemm_algos (kernels/local.mk). Not a test: prints figures only. */
#include <stdio.h>

#include "kernels/cuda/cuda_matmul.cu"

#define MAX_ALGOS 16

static __global__ void fill_kernel(__nv_bfloat16 *x, size_t n, unsigned int seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned int h = (unsigned int)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = __float2bfloat16(((float)(h & 0xFFFF) / 65536.0f - 0.5f) * 0.1f);
    }
}

static void *bench_alloc(size_t bytes, unsigned int seed) {
    void *p = NULL;
    CHECK_CUDA(cudaMalloc(&p, bytes));
    fill_kernel<<<1024, 256>>>((__nv_bfloat16 *)p, bytes / 2, seed);
    CHECK_LAUNCH();
    return p;
}

typedef struct step_gemm {
    const char *name;
    int calls; /* per step, for the weighted total */
    gemm_problem p;
} step_gemm;

/* times the heuristic's algorithms for one problem; returns the first's and the best's time */
static void survey(const step_gemm *g, int iters, double *first_us, double *best_us) {
    gemm_plan *plan = plan_for(&g->p);
    *first_us = *best_us = 0.0;
    if (!plan->has_algo) {
        printf("| %s | %d x %d x %d | no algorithm | | | |\n", g->name, g->p.m, g->p.n, g->p.k);
        return;
    }
    set_epilogue_pointers(plan->desc, &g->p);
    cublasLtMatmulPreference_t preference = plan_preference(&plan->key);
    cublasLtMatmulHeuristicResult_t results[MAX_ALGOS];
    int returned = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(cuda_cublaslt_handle(), plan->desc, plan->a_layout, plan->b_layout,
                                                plan->d_layout, plan->d_layout, preference, MAX_ALGOS, results,
                                                &returned));
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(preference));
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    int best = 0;
    double times[MAX_ALGOS];
    for (int i = 0; i < returned; i++) {
        times[i] = results[i].state == CUBLAS_STATUS_SUCCESS
                       ? time_algorithm(plan, &g->p, g->p.d, &results[i].algo, iters, start, stop)
                       : -1.0;
        if (times[i] > 0 && (times[best] <= 0 || times[i] < times[best])) best = i;
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    double flops = 2.0 * g->p.m * (double)g->p.n * g->p.k;
    *first_us = times[0];
    *best_us = times[best];
    printf("| %s | %d x %d x %d | %d | %.1f (%.0f TFLOP/s) | %.1f (%.0f TFLOP/s), #%d | %.3f |\n", g->name, g->p.m,
           g->p.n, g->p.k, returned, times[0], flops / times[0] * 1e-6, times[best], flops / times[best] * 1e-6, best,
           times[0] / times[best]);
}

static void bench_shape(int N, int C, int F, int V, int layers, int iters) {
    size_t big = (size_t)N * (size_t)(F > V ? F : V) * 2 + 256;
    size_t wbig = (size_t)(F > V ? F : V) * (size_t)C * 4 + 256;
    __nv_bfloat16 *x = (__nv_bfloat16 *)bench_alloc(big, 1), *y = (__nv_bfloat16 *)bench_alloc(big, 2);
    __nv_bfloat16 *z = (__nv_bfloat16 *)bench_alloc(big, 3), *w = (__nv_bfloat16 *)bench_alloc(wbig, 4);
    __nv_bfloat16 *aux = (__nv_bfloat16 *)bench_alloc(big, 5), *bias = (__nv_bfloat16 *)bench_alloc(4 * (size_t)F * 4 + 256, 6);
    float *dw = (float *)bench_alloc(wbig, 7);
    CHECK_CUDA(cudaMemset(dw, 0, wbig));
    step_gemm g[20];
    int n = 0;
#define ADD(NAME, CALLS, PROBLEM) do { g[n].name = NAME; g[n].calls = CALLS; g[n].p = PROBLEM; n++; } while (0)
    gemm_problem p;
    p = forward_problem(x, w, N, C, 3 * C); p.d = y; p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    ADD("qkv forward (bias)", layers, p);
    p = forward_problem(x, w, N, C, C); p.d = y; p.c = z; p.accumulate = true; p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    ADD("proj forward (residual, bias)", layers, p);
    p = forward_problem(x, w, N, C, F); p.d = y; p.aux = aux; p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    ADD("fc1 forward (gelu aux, bias)", layers, p);
    p = forward_problem(x, w, N, F, C); p.d = y; p.c = z; p.accumulate = true; p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_BIAS;
    ADD("fc2 forward (residual, bias)", layers, p);
    p = forward_problem(x, w, N, C, V); p.d = y;
    ADD("logits forward", 1, p);
    p = input_gradient_problem(y, x, w, N, C, V);
    ADD("logits dx", 1, p);
    p = input_gradient_problem(y, x, w, N, F, C); p.aux = aux; p.epilogue = CUBLASLT_EPILOGUE_DGELU;
    ADD("fc2 dx (dgelu)", layers, p);
    p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    ADD("fc2 dx (dgelu, fc1's bias gradient)", 0, p);
    p = input_gradient_problem(y, x, w, N, C, F);
    ADD("fc1 dx", layers, p);
    p = input_gradient_problem(y, x, w, N, C, C);
    ADD("proj dx", layers, p);
    p = input_gradient_problem(y, x, w, N, C, 3 * C);
    ADD("qkv dx", layers, p);
    p = weight_gradient_problem(dw, x, y, N, C, V);
    ADD("logits dW", 1, p);
    p = weight_gradient_problem(dw, x, y, N, F, C);
    ADD("fc2 dW", layers, p);
    p = weight_gradient_problem(dw, x, y, N, C, F);
    ADD("fc1 dW", layers, p);
    p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    ADD("fc1 dW (BGRADB: fc1's bias gradient, fp32)", 0, p);
    p = weight_gradient_problem(dw, x, y, N, C, C);
    ADD("proj dW", layers, p);
    p = weight_gradient_problem(dw, x, y, N, C, 3 * C);
    ADD("qkv dW", layers, p);
    p.bias = bias; p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    ADD("qkv dW (BGRADB: qkv's bias gradient, fp32)", 0, p);
#undef ADD
    printf("\n## N=%d C=%d F=%d V=%d, %d layers\n\n", N, C, F, V, layers);
    printf("| GEMM | m x n x k | algos | heuristic's first, us | best, us | first / best |\n");
    printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
    double first_total = 0.0, best_total = 0.0;
    for (int i = 0; i < n; i++) {
        double first, best;
        survey(&g[i], iters, &first, &best);
        first_total += g[i].calls * first;
        best_total += g[i].calls * best;
    }
    printf("\nper step: heuristic's first %.2f ms, best of each %.2f ms (%.1f%% less)\n", first_total * 1e-3,
           best_total * 1e-3, 100.0 * (1.0 - best_total / first_total));
    CHECK_CUDA(cudaFree(x)); CHECK_CUDA(cudaFree(y)); CHECK_CUDA(cudaFree(z)); CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(aux)); CHECK_CUDA(cudaFree(bias)); CHECK_CUDA(cudaFree(dw));
}

int main(int argc, char **argv) {
    int iters = 20, nshapes = 0;
    int shapes[8][5];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = atoi(argv[++i]);
        else if (i + 4 < argc && nshapes < 8) {
            for (int j = 0; j < 5; j++) shapes[nshapes][j] = atoi(argv[i + j]);
            nshapes++;
            i += 4;
        } else {
            fprintf(stderr, "usage: %s [--iters N] [N C F V LAYERS]...\n", argv[0]);
            return 2;
        }
    }
    if (nshapes == 0) {
        const int defaults[2][5] = {{32768, 768, 3072, 50304, 12}, {16384, 2048, 8192, 50304, 24}};
        memcpy(shapes, defaults, sizeof defaults);
        nshapes = 2;
    }
    if (iters < 1) iters = 1;
    cuda_context_init(0);
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("# gemm_algos on %s (%d SMs), %d timed calls per algorithm\n", prop.name, prop.multiProcessorCount, iters);
    for (int s = 0; s < nshapes; s++)
        bench_shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], iters);
    return 0;
}
