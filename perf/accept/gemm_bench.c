/* gemm_bench.c: matrix-multiply rate through the kernel interface (kernel_ops->matmul_forward:
 * OpenBLAS sgemm, fp32, on the CPU backend; cuBLASLt bf16 with fp32 accumulation on CUDA), the
 * GEMM check of the cluster acceptance suite (perf/accept/accept).
 *
 *   mpiexec -n R perf/accept/gemm_bench [--device cpu|cuda] [--scale S] [--warmup W] [--repeat K]
 *
 * Every rank times the same shapes at once (one GPU per rank, as in training), so a slow GPU or
 * a throttled node shows up as the minimum over ranks. matmul_forward computes
 * out[N,OC] = x[N,IC] W[OC,IC]^T, a GEMM of M = N, N = OC, K = IC: 2*M*N*K floating-point
 * operations; the rate is that over the median time of K repeats after W warm-ups. The shapes
 * are 4096^3, 8192x8192x1024 and the QKV, fc1 and fc2 GEMMs of a hidden-4096 transformer layer on
 * 8192 tokens (micro-batch 4 x sequence 2048); --scale S divides every dimension by S (the CPU
 * runs them at S = 4, or 16 with --quick in the driver). The output is checked at 64 sampled
 * elements against a double-precision dot product of the same (rounded) inputs.
 * RESULT lines: gemm_tflops (the first shape, minimum over ranks), gemm_tflops_best (best shape,
 * minimum over ranks), gemm_wrong (sampled elements out of tolerance, all ranks and shapes).
 * On a GPU with fp8 tensor cores (compute capability 8.9 and later) the same shapes again as fp8
 * (e4m3) GEMMs through cuBLASLt (gemm_fp8.c): gemm_fp8_tflops, gemm_fp8_tflops_best,
 * gemm_fp8_wrong; elsewhere one line says why not. */
#include "perf/accept/bench_common.h"
#include "perf/accept/gemm_fp8.h"

#include <math.h>

typedef struct gemm_shape {
    const char *name;
    int m, n, k; /* rows of x (tokens), output features, input features */
} gemm_shape;

static const gemm_shape shapes[] = {
    {"square 4096^3", 4096, 4096, 4096},
    {"8192x8192x1024", 8192, 8192, 1024},
    {"qkv h4096 (8192 tokens)", 8192, 3 * 4096, 4096},
    {"mlp fc1 h4096", 8192, 4 * 4096, 4096},
    {"mlp fc2 h4096", 8192, 4096, 4 * 4096},
};
#define NUM_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* a reproducible value in [-1, 1) for element i of a matrix */
static float fill_value(uint64_t seed, size_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (float)((double)(z >> 40) / (double)(1ull << 23) - 1.0);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "gemm_bench";
    kernels_set_error_handler(error_report_fatal);
    const char *device = "cpu", *value;
    int scale = 1, warmup = 2, repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (bench_flag(argc, argv, &i, "--device", &device)) continue;
        if (bench_flag(argc, argv, &i, "--scale", &value)) { scale = atoi(value); continue; }
        if (bench_flag(argc, argv, &i, "--warmup", &value)) { warmup = atoi(value); continue; }
        if (bench_flag(argc, argv, &i, "--repeat", &value)) { repeat = atoi(value); continue; }
        user_error("unknown argument '%s' (usage: gemm_bench [--device cpu|cuda] [--scale S] [--warmup W] [--repeat K])", argv[i]);
    }
    if (scale < 1 || warmup < 0 || repeat < 1 || repeat > 1000) user_error("--scale >= 1, --warmup >= 0, 1 <= --repeat <= 1000");
    int rank, size, local_rank, nodes;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_placement(&local_rank, &nodes);
    char gpu[256];
    const kernel_ops *ops = bench_backend(device, local_rank, gpu, (int)sizeof gpu);
    if (!ops) FATAL("--device %s: not available in this build or no GPU visible", device);
    const int bf16 = ops->act_bytes == 2;
    if (rank == 0) {
        printf("# GEMM through kernel_ops->matmul_forward: backend %s (%s, %s), %d ranks on %d nodes, "
               "dimensions / %d, %d warm-up + %d timed (median)\n",
               ops->name, gpu, bf16 ? "bf16 in/out, fp32 accumulate" : "fp32", size, nodes, scale, warmup, repeat);
        printf("# %-26s %7s %7s %7s %10s %12s %12s %12s %7s\n", "shape", "M", "N", "K", "GFLOP",
               "time(ms)", "TFLOP/s min", "TFLOP/s avg", "#wrong");
    }
    double first_min = 0, best_min = 0;
    long long wrong_total = 0;
    for (int s = 0; s < NUM_SHAPES; s++) {
        int m = shapes[s].m / scale, n = shapes[s].n / scale, k = shapes[s].k / scale;
        if (m < 1) m = 1;
        if (n < 1) n = 1;
        if (k < 1) k = 1;
        size_t x_elems = (size_t)m * k, w_elems = (size_t)n * k, out_elems = (size_t)m * n;
        float *host_x = malloc(sizeof(float) * x_elems), *host_w = malloc(sizeof(float) * w_elems);
        CHECK(host_x && host_w, "out of host memory for a %dx%dx%d GEMM", m, n, k);
        for (size_t i = 0; i < x_elems; i++) host_x[i] = fill_value(2 * (uint64_t)s + 1, i);
        for (size_t i = 0; i < w_elems; i++) host_w[i] = fill_value(2 * (uint64_t)s + 2, i);
        void *x = ops->alloc(x_elems * ops->act_bytes), *w = ops->alloc(w_elems * ops->act_bytes);
        void *out = ops->alloc(out_elems * ops->act_bytes);
        ops->copy_from_host_float(x, host_x, x_elems);
        ops->copy_from_host_float(w, host_w, w_elems);
        /* the reference uses the inputs as the backend holds them (rounded to bf16 on CUDA) */
        ops->copy_to_host_float(host_x, x, x_elems);
        ops->copy_to_host_float(host_w, w, w_elems);
        for (int i = 0; i < warmup; i++) ops->matmul_forward(out, NULL, x, w, NULL, m, k, n);
        ops->synchronize();
        double times[1000];
        for (int r = 0; r < repeat; r++) {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = bench_now();
            ops->matmul_forward(out, NULL, x, w, NULL, m, k, n);
            ops->synchronize();
            times[r] = bench_now() - t0;
        }
        qsort(times, (size_t)repeat, sizeof times[0], compare_doubles);
        double t = times[repeat / 2], flops = 2.0 * m * n * (double)k;
        double tflops = flops / t / 1e12, tflops_min, tflops_sum;
        /* check sampled elements against a double-precision dot product */
        enum { SAMPLES = 64 };
        float got[SAMPLES];
        long long wrong = 0;
        for (int q = 0; q < SAMPLES; q++) {
            size_t row = (size_t)((fill_value(777, (size_t)q) + 1.0f) * 0.5 * m) % (size_t)m;
            size_t col = (size_t)((fill_value(778, (size_t)q) + 1.0f) * 0.5 * n) % (size_t)n;
            if (q == 0) row = 0, col = 0;
            if (q == 1) row = (size_t)m - 1, col = (size_t)n - 1;
            ops->copy_to_host_float(&got[q], act_at(ops, out, row * (size_t)n + col), 1);
            double ref = 0, abs_sum = 0;
            for (int j = 0; j < k; j++) {
                double p = (double)host_x[row * (size_t)k + (size_t)j] * host_w[col * (size_t)k + (size_t)j];
                ref += p;
                abs_sum += fabs(p);
            }
            /* fp32 accumulation error grows like sqrt(K) eps sum|p|; bf16 output rounds at 2^-8 */
            double tol = (bf16 ? 4e-3 * fabs(ref) : 0) + 1e-5 * abs_sum + 1e-6;
            if (!(fabs(got[q] - ref) <= tol)) wrong++;
        }
        CHECK_MPI(MPI_Allreduce(&tflops, &tflops_min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(&tflops, &tflops_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        long long wrong_all = 0;
        CHECK_MPI(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        wrong_total += wrong_all;
        if (s == 0) first_min = tflops_min;
        if (tflops_min > best_min) best_min = tflops_min;
        if (rank == 0)
            printf("  %-26s %7d %7d %7d %10.2f %12.3f %12.4g %12.4g %7lld\n", shapes[s].name, m, n, k, flops / 1e9,
                   1e3 * t, tflops_min, tflops_sum / size, wrong_all);
        ops->release(x);
        ops->release(w);
        ops->release(out);
        free(host_x);
        free(host_w);
    }
    /* fp8: every rank must have it, or none measures */
    char note[256] = "";
    int fp8 = strcmp(device, "cuda") == 0 ? gemm_fp8_available(note, sizeof note)
                                          : (snprintf(note, sizeof note, "the CPU backend has no fp8"), 0);
    int fp8_all = 0;
    CHECK_MPI(MPI_Allreduce(&fp8, &fp8_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    double fp8_first = 0, fp8_best = 0;
    long long fp8_wrong_total = 0;
    int fp8_measured = fp8_all;
    if (fp8_all && rank == 0)
        printf("# fp8 (e4m3) GEMM through cuBLASLt: A^T B, per-tensor scales 1, fp32 accumulation, bf16 out\n");
    for (int s = 0; fp8_all && s < NUM_SHAPES; s++) {
        int m = shapes[s].m / scale, n = shapes[s].n / scale, k = shapes[s].k / scale;
        if (m < 16) m = 16;  /* cuBLASLt's fp8 GEMMs want dimensions in multiples of 16 */
        if (n < 16) n = 16;
        if (k < 16) k = 16;
        m -= m % 16, n -= n % 16, k -= k % 16;
        double seconds = 0;
        long long wrong = 0;
        int fast = 0;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        int ok = gemm_fp8_measure(m, n, k, warmup, repeat, &seconds, &wrong, &fast, note, sizeof note), ok_all = 0;
        CHECK_MPI(MPI_Allreduce(&ok, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        if (!ok_all) {
            if (rank == 0) printf("  %-26s fp8 not measured: %s\n", shapes[s].name, ok ? "failed on another rank" : note);
            fp8_measured = 0;
            continue;
        }
        double flops = 2.0 * m * n * (double)k, tflops = flops / seconds / 1e12, tflops_min, tflops_sum;
        long long wrong_all = 0;
        CHECK_MPI(MPI_Allreduce(&tflops, &tflops_min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(&tflops, &tflops_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        fp8_wrong_total += wrong_all;
        if (s == 0) fp8_first = tflops_min;
        if (tflops_min > fp8_best) fp8_best = tflops_min;
        if (rank == 0)
            printf("  %-26s %7d %7d %7d %10.2f %12.3f %12.4g %12.4g %7lld  fp8%s\n", shapes[s].name, m, n, k, flops / 1e9,
                   1e3 * seconds, tflops_min, tflops_sum / size, wrong_all, fast ? " fast-accumulation" : "");
    }
    if (rank == 0) {
        if (!fp8_measured) printf("# fp8: not measured (%s)\n", note);
        if (fp8_measured) {
            bench_result("gemm_fp8_tflops", fp8_first);
            bench_result("gemm_fp8_tflops_best", fp8_best);
            bench_result("gemm_fp8_wrong", (double)fp8_wrong_total);
        }
        bench_result("gemm_tflops", first_min);
        bench_result("gemm_tflops_best", best_min);
        bench_result("gemm_wrong", (double)wrong_total);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
