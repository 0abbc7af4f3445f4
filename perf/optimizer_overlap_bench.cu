/* optimizer_overlap_bench.cu: can the AdamW step of GPT 1.3B hide under the next step's forward?
 *
 * The step's AdamW moves about 30 bytes per parameter (fp32 master, moments and gradient in; master,
 * moments and the bf16 copy out): 39 GB at 1.31e9 parameters, ~14 ms on an H100, with nothing else
 * running. The forward's GEMMs are compute-bound and, at the 700 W cap, power-bound. This bench
 * times, through the library's own entry points (cuda_matmul_forward, cuda_adamw_update_ranges):
 *   gemms     the forward's four GEMMs per layer, 24 layers (N = 16384 tokens, C = 2048, F = 8192)
 *   adamw     the AdamW step over 1.31e9 parameters in one launch
 *   serial    adamw, then gemms, on one stream (today's order)
 *   beside    adamw on a low-priority side stream while the gemms run (no dependences)
 *   parts     adamw by model part (embedding, then layer by layer) on the side stream, each part's
 *             event waited for before that layer's GEMMs: what the training step would do
 *   parts-eq  parts with both streams at the default priority
 *   gemms/k   gemms planned for all SMs but k (cuBLASLt's SM count target), nothing beside
 *   adamw/k   adamw on k SMs only (one 1024-thread block on each, cuda_adamw_set_sm_limit)
 *   split/k   the SMs split: the embedding's AdamW first on every SM, then the layers' AdamW by
 *             part on k SMs of a side stream while the GEMMs, planned for the other SMs
 *             (cuBLASLt's SM count target, cuda_matmul_set_sm_count_target), wait for each part
 * (k from --split, default 8,16,24) in rounds (each variant once per round, after warm-up rounds at the same load), median per
 * variant. Not a test: prints figures only.
 *
 * Usage: optimizer_overlap_bench [--rounds N] [--layers L] [--split k1,k2,...]. Build: make perf/optimizer_overlap_bench. */
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"

#define BENCH_CHECK(call)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "optimizer_overlap_bench: %s: %s\n", #call, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const int N = 16384, C = 2048, F = 8192, V = 50304;

typedef struct layer_weights {
    bf16 *qkv, *proj, *fc1, *fc2, *fc1_bias;
} layer_weights;

typedef struct buffers {
    bf16 *x, *qkv_out, *attn, *fc1_out, *gelu_out, *fc2_out;
    std::vector<layer_weights> layers;
    float *master, *grads, *m, *v;
    bf16 *params;
    std::vector<tensor_range> parts; /* embedding, then one range per layer */
    std::vector<cudaEvent_t> part_done;
} buffers;

/* n values of std * N(0, 1) from the library's Philox initializer: fp32 (4-byte elements) or bf16 */
static void *random_normal(size_t n, int fp32, uint64_t stream, float std) {
    void *p;
    BENCH_CHECK(cudaMalloc(&p, n * (fp32 ? sizeof(float) : sizeof(bf16))));
    shard_map flat;
    memset(&flat, 0, sizeof flat);
    flat.rows_held = 1;
    flat.rows_per_block = 1;
    cuda_init_normal(p, fp32, flat, 1234, stream, std, 0, n);
    return p;
}
static bf16 *random_bf16(size_t n, uint64_t stream) { return (bf16 *)random_normal(n, 0, stream, 0.02f); }
static float *random_f32(size_t n, uint64_t stream, float std) { return (float *)random_normal(n, 1, stream, std); }

static void layer_gemms(buffers *b, int l) {
    layer_weights *w = &b->layers[l];
    cuda_matmul_forward(b->qkv_out, NULL, b->x, w->qkv, NULL, N, C, 3 * C);
    cuda_matmul_forward(b->x, NULL, b->attn, w->proj, NULL, N, C, C);
    cuda_matmul_forward(b->fc1_out, b->gelu_out, b->x, w->fc1, w->fc1_bias, N, C, F);
    cuda_matmul_forward(b->x, NULL, b->gelu_out, w->fc2, NULL, N, F, C);
}

static void adamw_part(buffers *b, int p, int step) {
    cuda_adamw_update_ranges(b->master, b->params, b->grads, b->m, b->v, &b->parts[p], 1, 1.0f, 1e-4f, 0.9f, 0.95f,
                             1e-8f, step);
}

static void adamw_all(buffers *b, int step) {
    cuda_adamw_update_ranges(b->master, b->params, b->grads, b->m, b->v, b->parts.data(), (int)b->parts.size(), 1.0f,
                             1e-4f, 0.9f, 0.95f, 1e-8f, step);
}

enum { GEMMS, ADAMW, SERIAL, BESIDE, PARTS, PARTS_EQ, GEMMS_K, ADAMW_K, SPLIT_K };
static const char *kind_names[] = {"gemms", "adamw", "serial", "beside", "parts", "parts-eq", "gemms", "adamw", "split"};

typedef struct variant {
    int kind, sms; /* sms: the k of GEMMS_K, ADAMW_K and SPLIT_K */
} variant;

typedef struct streams {
    cudaStream_t high, low, normal_a, normal_b;
} streams;

static double run_variant(variant vt, buffers *b, const streams *s, int layers, int step, int device_sms) {
    const int variant = vt.kind;
    BENCH_CHECK(cudaDeviceSynchronize());
    const bool equal = variant == PARTS_EQ || variant == SPLIT_K;
    cudaStream_t main_stream = equal ? s->normal_a : s->high;
    cudaStream_t side_stream = equal ? s->normal_b : s->low;
    cudaEvent_t start, stop_main, stop_side;
    BENCH_CHECK(cudaEventCreate(&start));
    BENCH_CHECK(cudaEventCreate(&stop_main));
    BENCH_CHECK(cudaEventCreate(&stop_side));
    cuda_stream_select(main_stream);
    BENCH_CHECK(cudaEventRecord(start, main_stream));
    BENCH_CHECK(cudaStreamWaitEvent(side_stream, start, 0));
    switch (variant) {
    case GEMMS:
        for (int l = 0; l < layers; l++) layer_gemms(b, l);
        break;
    case ADAMW:
        adamw_all(b, step);
        break;
    case SERIAL:
        adamw_all(b, step);
        for (int l = 0; l < layers; l++) layer_gemms(b, l);
        break;
    case BESIDE:
        cuda_stream_select(side_stream);
        adamw_all(b, step);
        cuda_stream_select(main_stream);
        for (int l = 0; l < layers; l++) layer_gemms(b, l);
        break;
    case PARTS:
    case PARTS_EQ:
        cuda_stream_select(side_stream);
        for (size_t p = 0; p < b->parts.size(); p++) {
            adamw_part(b, (int)p, step);
            BENCH_CHECK(cudaEventRecord(b->part_done[p], side_stream));
        }
        cuda_stream_select(main_stream);
        BENCH_CHECK(cudaStreamWaitEvent(main_stream, b->part_done[0], 0));
        for (int l = 0; l < layers; l++) {
            BENCH_CHECK(cudaStreamWaitEvent(main_stream, b->part_done[1 + l], 0));
            layer_gemms(b, l);
        }
        break;
    case GEMMS_K:
        cuda_matmul_set_sm_count_target(device_sms - vt.sms);
        for (int l = 0; l < layers; l++) layer_gemms(b, l);
        cuda_matmul_set_sm_count_target(0);
        break;
    case ADAMW_K:
        cuda_adamw_set_sm_limit(vt.sms);
        adamw_all(b, step);
        cuda_adamw_set_sm_limit(0);
        break;
    case SPLIT_K:
        adamw_part(b, 0, step); /* the embedding, first needed, on every SM */
        BENCH_CHECK(cudaEventRecord(b->part_done[0], main_stream));
        BENCH_CHECK(cudaStreamWaitEvent(side_stream, b->part_done[0], 0));
        cuda_stream_select(side_stream);
        cuda_adamw_set_sm_limit(vt.sms);
        for (size_t p = 1; p < b->parts.size(); p++) {
            adamw_part(b, (int)p, step);
            BENCH_CHECK(cudaEventRecord(b->part_done[p], side_stream));
        }
        cuda_adamw_set_sm_limit(0);
        cuda_stream_select(main_stream);
        cuda_matmul_set_sm_count_target(device_sms - vt.sms);
        for (int l = 0; l < layers; l++) {
            BENCH_CHECK(cudaStreamWaitEvent(main_stream, b->part_done[1 + l], 0));
            layer_gemms(b, l);
        }
        cuda_matmul_set_sm_count_target(0);
        break;
    }
    BENCH_CHECK(cudaEventRecord(stop_main, main_stream));
    BENCH_CHECK(cudaEventRecord(stop_side, side_stream));
    cuda_stream_select(NULL);
    BENCH_CHECK(cudaDeviceSynchronize());
    float main_ms = 0.0f, side_ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&main_ms, start, stop_main));
    BENCH_CHECK(cudaEventElapsedTime(&side_ms, start, stop_side));
    BENCH_CHECK(cudaEventDestroy(start));
    BENCH_CHECK(cudaEventDestroy(stop_main));
    BENCH_CHECK(cudaEventDestroy(stop_side));
    return std::max(main_ms, side_ms);
}

int main(int argc, char **argv) {
    int rounds = 7, layers = 24;
    const char *split = "8,16,24";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc) layers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--split") == 0 && i + 1 < argc) split = argv[++i];
        else {
            fprintf(stderr,
                    "optimizer_overlap_bench: unknown argument '%s' (usage: [--rounds N] [--layers L] [--split k,...])\n",
                    argv[i]);
            return 2;
        }
    }
    std::vector<variant> variants;
    for (int k = GEMMS; k <= PARTS_EQ; k++) variants.push_back(variant{k, 0});
    std::vector<int> split_sms;
    for (const char *at = split; *at;) {
        char *end;
        long k = strtol(at, &end, 10);
        if (end == at || k < 1 || k > 64 || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "optimizer_overlap_bench: --split '%s': expected SM counts 1-64 separated by commas\n",
                    split);
            return 2;
        }
        split_sms.push_back((int)k);
        at = *end ? end + 1 : end;
    }
    for (int k : split_sms) variants.push_back(variant{GEMMS_K, k});
    for (int k : split_sms) variants.push_back(variant{ADAMW_K, k});
    for (int k : split_sms) variants.push_back(variant{SPLIT_K, k});
    if (rounds < 1 || layers < 1) {
        fprintf(stderr, "optimizer_overlap_bench: --rounds and --layers must be positive\n");
        return 2;
    }
    cuda_context_init(0);
    cudaDeviceProp prop;
    BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
    buffers b;
    b.x = random_bf16((size_t)N * C, 1);
    b.attn = random_bf16((size_t)N * C, 2);
    b.qkv_out = random_bf16((size_t)N * 3 * C, 3);
    b.fc1_out = random_bf16((size_t)N * F, 4);
    b.gelu_out = random_bf16((size_t)N * F, 5);
    b.fc2_out = random_bf16((size_t)N * C, 6);
    for (int l = 0; l < layers; l++) {
        layer_weights w = {random_bf16((size_t)3 * C * C, 10 + l), random_bf16((size_t)C * C, 100 + l),
                           random_bf16((size_t)F * C, 200 + l), random_bf16((size_t)C * F, 300 + l),
                           random_bf16((size_t)F, 400 + l)};
        b.layers.push_back(w);
    }
    /* the parameter layout of GPT 1.3B: the (tied) embedding, then 24 layers of 12 C^2 + 13 C */
    size_t embedding = (size_t)V * C + (size_t)2048 * C, per_layer = (size_t)12 * C * C + 13 * (size_t)C;
    size_t total = embedding + per_layer * layers;
    b.parts.push_back(tensor_range{0, 0, embedding, 0.1f});
    for (int l = 0; l < layers; l++)
        b.parts.push_back(tensor_range{embedding + per_layer * l, embedding + per_layer * l, per_layer, 0.1f});
    b.master = random_f32(total, 500, 0.02f);
    b.grads = random_f32(total, 501, 1e-3f);
    b.m = random_f32(total, 502, 1e-4f);
    b.v = random_f32(total, 503, 1e-6f);
    BENCH_CHECK(cudaMemset(b.v, 0, total * sizeof(float))); /* v >= 0: start it at zero */
    BENCH_CHECK(cudaMalloc(&b.params, total * sizeof(bf16)));
    b.part_done.resize(b.parts.size());
    for (auto &e : b.part_done) BENCH_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    streams s;
    int least, greatest;
    BENCH_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    BENCH_CHECK(cudaStreamCreateWithPriority(&s.high, cudaStreamNonBlocking, greatest));
    BENCH_CHECK(cudaStreamCreateWithPriority(&s.low, cudaStreamNonBlocking, least));
    BENCH_CHECK(cudaStreamCreateWithFlags(&s.normal_a, cudaStreamNonBlocking));
    BENCH_CHECK(cudaStreamCreateWithFlags(&s.normal_b, cudaStreamNonBlocking));
    BENCH_CHECK(cudaDeviceSynchronize());
    double gemm_flops = 2.0 * N * C * (3.0 * C + C + F + F) * layers;
    printf("# %s, %d SMs; %d layers of GEMMs (%.2f TFLOP), AdamW over %.3g parameters (%.1f GB moved)\n", prop.name,
           prop.multiProcessorCount, layers, gemm_flops * 1e-12, (double)total, total * 30.0 * 1e-9);
    const size_t count = variants.size();
    std::vector<std::vector<double>> times(count);
    int step = 1;
    for (int r = -2; r < rounds; r++)
        for (size_t v = 0; v < count; v++) {
            double ms = run_variant(variants[v], &b, &s, layers, step++, prop.multiProcessorCount);
            if (r >= 0) times[v].push_back(ms);
        }
    printf("| variant | median ms | min ms | max ms |\n| --- | ---: | ---: | ---: |\n");
    std::vector<double> median(count);
    for (size_t v = 0; v < count; v++) {
        std::vector<double> t = times[v];
        std::sort(t.begin(), t.end());
        median[v] = t[t.size() / 2];
        char name[32];
        if (variants[v].kind >= GEMMS_K) snprintf(name, sizeof name, "%s/%d", kind_names[variants[v].kind], variants[v].sms);
        else snprintf(name, sizeof name, "%s", kind_names[variants[v].kind]);
        printf("| %s | %.2f | %.2f | %.2f |\n", name, median[v], t.front(), t.back());
    }
    printf("# hidden by beside: %.2f ms, by parts: %.2f ms, by parts-eq: %.2f ms (of adamw %.2f ms; serial - x)\n",
           median[SERIAL] - median[BESIDE], median[SERIAL] - median[PARTS], median[SERIAL] - median[PARTS_EQ],
           median[ADAMW]);
    return 0;
}
