/* gemm_algos.cu: times every algorithm cuBLASLt's heuristic offers (up to 16) for the GEMMs of
 * one GPT training step, next to the one kernels/cuda/cuda_matmul.cu runs (the heuristic's first),
 * so that a per-shape choice can be judged before it is built. Each problem is set up by
 * cuda_matmul.cu's own builders (forward_problem, input_gradient_problem,
 * weight_gradient_problem) with the epilogues training uses, on buffers of small random values,
 * and timed by its tuning's time_algorithm (one warm-up call, then --iters calls, default 20).
 *
 * Usage: gemm_algos [--iters N] [--enumerate [--enumerate-cap K]] [N C F V LAYERS]... (tokens per
 * micro-batch, hidden size, FFN size, padded vocabulary, layers). --enumerate: for every GEMM of the step
 * every configuration cuBLASLt accepts (algorithm
 * id, tile, stages, swizzle, custom option, cluster shape; at most K timed, default 2000, and at
 * most 12 s of GEMMs), the eight fastest timed again, then the fastest and the heuristic's first
 * in turn.
 * Default: GPT-2 124M (32768 768 3072 50304 12) and GPT 1.3B (16384 2048 8192 50304 24).
 * Build: make perf/gemm_algos (kernels/local.mk). Not a test: prints figures only. */
#include <stdio.h>

#include <algorithm>
#include <utility>
#include <vector>

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

/* ---- --enumerate: every configuration cuBLASLt accepts, beyond the heuristic's list ---- */

typedef struct algo_config {
    int id, tile, stages, swizzle, custom, cluster, inner;
} algo_config;

/* one configuration attribute of type T (uint32 for most, int32 for the id, uint16 for shapes) */
template <typename T>
static int config_attribute(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    T value = 0;
    size_t written = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &value, sizeof value, &written));
    return (int)value;
}

static algo_config config_of(const cublasLtMatmulAlgo_t *algo) {
    algo_config c;
    c.id = config_attribute<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
    c.tile = config_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
    c.stages = config_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
    c.swizzle = config_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
    c.custom = config_attribute<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
    c.cluster = config_attribute<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    c.inner = config_attribute<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
    return c;
}

/* one timed configuration's line: "heuristic #3: id 66 tile 24 ...: 781.5 us (703 TFLOP/s)" */
static void print_config(const char *source, int rank, const cublasLtMatmulAlgo_t *algo, double us, double flops) {
    const algo_config c = config_of(algo);
    printf("%s #%d: id %d tile %d stages %d swizzle %d custom %d cluster %d inner %d: %.1f us (%.0f TFLOP/s)\n", source,
           rank, c.id, c.tile, c.stages, c.swizzle, c.custom, c.cluster, c.inner, us, flops / us * 1e-6);
}

/* a capability that is a list of uint32 (tile or stage ids); 0 entries: the list {0} (undefined) */
static int cap_list(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoCapAttributes_t attr, uint32_t *out, int max) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(algo, attr, NULL, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0) {
        out[0] = 0;
        return 1;
    }
    int n = (int)(bytes / sizeof(uint32_t));
    uint32_t *all = (uint32_t *)calloc((size_t)n + 1, sizeof *all);
    size_t written = 0;
    if (all == NULL || cublasLtMatmulAlgoCapGetAttribute(algo, attr, all, bytes, &written) != CUBLAS_STATUS_SUCCESS) {
        free(all);
        out[0] = 0;
        return 1;
    }
    if (n > max) n = max;
    memcpy(out, all, (size_t)n * sizeof *out);
    free(all);
    return n;
}

#define ENUM_KEEP 8
static double enum_first_total, enum_best_total; /* per step, us: the GEMMs enumerated so far */

/* every (algorithm id, tile, stages, swizzle, custom option, cluster shape) that AlgoCheck accepts
 * within our workspace, timed with 2 calls; the 8 fastest timed again with iters calls */
static void enumerate_configs(const step_gemm *g, int iters, int max_timed) {
    gemm_plan *plan = plan_for(&g->p);
    if (!plan->has_algo) return;
    set_epilogue_pointers(plan->desc, &g->p);
    cublasLtHandle_t handle = cuda_cublaslt_handle();
    size_t workspace_bytes = 0;
    (void)cuda_cublaslt_workspace(&workspace_bytes);
    const double flops = 2.0 * g->p.m * (double)g->p.n * g->p.k;
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    printf("\n### %s, %d x %d x %d\n\n", g->name, g->p.m, g->p.n, g->p.k);
    int first_id = -1;
    cublasLtMatmulAlgo_t heuristic_first;
    {
        cublasLtMatmulPreference_t preference = plan_preference(&plan->key);
        cublasLtMatmulHeuristicResult_t results[MAX_ALGOS];
        int returned = 0;
        CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a_layout, plan->b_layout, plan->d_layout,
                                                    plan->d_layout, preference, 8, results, &returned));
        CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(preference));
        for (int i = 0; i < returned; i++)
            print_config("heuristic", i, &results[i].algo,
                         time_algorithm(plan, &g->p, g->p.d, &results[i].algo, iters, start, stop), flops);
        if (returned > 0) {
            first_id = config_of(&results[0].algo).id;
            heuristic_first = results[0].algo;
        }
    }
    int ids[512], nids = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoGetIds(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, g->p.ab_type, g->p.ab_type,
                                          g->p.d_type, g->p.d_type, 512, ids, &nids));
    for (int a = 0, front = 0; a < nids; a++) /* the heuristic's first algorithm id first */
        if (ids[a] == first_id) {
            int t = ids[front]; ids[front] = ids[a]; ids[a] = t;
            front++;
        }
    static const int clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                   CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
    std::vector<std::pair<double, cublasLtMatmulAlgo_t>> times; /* us, configuration */
    int checked = 0, accepted = 0, timed = 0, ids_with_epilogue = 0;
    double spent_us = 0.0;
    for (int a = 0; a < nids && timed < max_timed; a++) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, g->p.ab_type, g->p.ab_type, g->p.d_type,
                                   g->p.d_type, ids[a], &algo) != CUBLAS_STATUS_SUCCESS)
            continue;
        size_t written = 0;
        uint32_t epilogues = 0;
        if (g->p.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
            (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_EPILOGUE_MASK, &epilogues, sizeof epilogues,
                                               &written) != CUBLAS_STATUS_SUCCESS ||
             (epilogues & (uint32_t)g->p.epilogue) != (uint32_t)g->p.epilogue))
            continue;
        ids_with_epilogue++;
        uint32_t tiles[128], stages[128];
        int ntiles = cap_list(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, 128);
        int nstages = cap_list(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, 128);
        int32_t swizzle_support = 0, custom_max = 0;
        (void)cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swizzle_support,
                                                sizeof swizzle_support, &written);
        (void)cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max,
                                                sizeof custom_max, &written);
        if (custom_max > 15) custom_max = 15;
        for (int t = 0; t < ntiles && timed < max_timed; t++)
            for (int st = 0; st < nstages && timed < max_timed; st++)
                for (uint32_t sw = 0; sw <= (swizzle_support ? 1u : 0u) && timed < max_timed; sw++)
                    for (uint32_t cu = 0; cu <= (uint32_t)custom_max && timed < max_timed; cu++)
                        for (int cl = 0; cl < 4 && timed < max_timed; cl++) {
                            uint16_t cluster = (uint16_t)clusters[cl];
                            int32_t splitk = 1;
                            CHECK_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t], sizeof tiles[t]));
                            CHECK_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[st], sizeof stages[st]));
                            CHECK_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw));
                            CHECK_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cu, sizeof cu));
                            CHECK_CUBLAS(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk));
                            if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                                                     sizeof cluster) != CUBLAS_STATUS_SUCCESS &&
                                cl > 0)
                                continue; /* no cluster shapes: the first pass only */
                            checked++;
                            cublasLtMatmulHeuristicResult_t check;
                            memset(&check, 0, sizeof check);
                            if (cublasLtMatmulAlgoCheck(handle, plan->desc, plan->a_layout, plan->b_layout, plan->d_layout,
                                                        plan->d_layout, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
                                check.workspaceSize > workspace_bytes)
                                continue;
                            accepted++;
                            double us = time_algorithm(plan, &g->p, g->p.d, &algo, 2, start, stop);
                            timed++;
                            spent_us += 3 * (us > 0 ? us : 0);
                            if (spent_us > 12e6) timed = max_timed; /* 12 s of GEMMs per problem at most */
                            if (us > 0) times.push_back({us, algo});
                        }
    }
    (void)cudaGetLastError();
    printf("\n%d algorithm ids, %d with the epilogue; %d configurations checked, %d accepted, %d timed%s\n", nids,
           ids_with_epilogue, checked, accepted, timed, timed >= max_timed ? " (cap reached)" : "");
    const size_t kept = times.size() < ENUM_KEEP ? times.size() : ENUM_KEEP;
    std::partial_sort(times.begin(), times.begin() + kept, times.end(),
                      [](const auto &x, const auto &y) { return x.first < y.first; });
    for (size_t i = 0; i < kept; i++)
        print_config("enumerated", (int)i, &times[i].second,
                     time_algorithm(plan, &g->p, g->p.d, &times[i].second, iters, start, stop), flops);
    if (kept > 0 && first_id >= 0) { /* the heuristic's first and the enumeration's first in turn, medians of 7 rounds */
        const cublasLtMatmulAlgo_t *fastest = &times[0].second;
        double a[7], b[7];
        for (int r = 0; r < 7; r++) {
            a[r] = time_algorithm(plan, &g->p, g->p.d, &heuristic_first, iters, start, stop);
            b[r] = time_algorithm(plan, &g->p, g->p.d, fastest, iters, start, stop);
        }
        std::sort(a, a + 7);
        std::sort(b, b + 7);
        printf("in turn (7 rounds of %d calls): heuristic's first %.1f us, enumerated first %.1f us: %.3f\n", iters, a[3],
               b[3], a[3] / b[3]);
        enum_first_total += g->calls * a[3];
        enum_best_total += g->calls * (b[3] < a[3] ? b[3] : a[3]);
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
}

static int enumerate_mode, enumerate_cap = 2000;

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
    if (enumerate_mode) { /* every GEMM of the step */
        printf("\n## N=%d C=%d F=%d V=%d: every configuration\n", N, C, F, V);
        enum_first_total = enum_best_total = 0.0;
        for (int i = 0; i < n; i++)
            if (g[i].calls > 0) enumerate_configs(&g[i], iters, enumerate_cap);
        printf("\nper step: heuristic's first %.2f ms, the faster of it and the enumeration's first %.2f ms (%.1f%% less)\n",
               enum_first_total * 1e-3, enum_best_total * 1e-3, 100.0 * (1.0 - enum_best_total / enum_first_total));
        CHECK_CUDA(cudaFree(x)); CHECK_CUDA(cudaFree(y)); CHECK_CUDA(cudaFree(z)); CHECK_CUDA(cudaFree(w));
        CHECK_CUDA(cudaFree(aux)); CHECK_CUDA(cudaFree(bias)); CHECK_CUDA(cudaFree(dw));
        return;
    }
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
        else if (strcmp(argv[i], "--enumerate") == 0) enumerate_mode = 1;
        else if (strcmp(argv[i], "--enumerate-cap") == 0 && i + 1 < argc) enumerate_cap = atoi(argv[++i]);
        else if (i + 4 < argc && nshapes < 8) {
            for (int j = 0; j < 5; j++) shapes[nshapes][j] = atoi(argv[i + j]);
            nshapes++;
            i += 4;
        } else {
            fprintf(stderr, "usage: %s [--iters N] [--enumerate [--enumerate-cap K]] [N C F V LAYERS]...\n", argv[0]);
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
