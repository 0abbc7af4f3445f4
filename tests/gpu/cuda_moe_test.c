/* cuda_moe_test.c: the CUDA backend's mixture-of-experts operations (kernels/cuda/cuda_moe.cu)
 * against the fp32 CPU reference (kernels/cpu/cpu_moe.c), through the two backends' kernel
 * tables:
 *   - routing for every score function (softmax with and without pre-softmax, sigmoid,
 *     sqrt-softplus), the top-k scaling factor, group-limited top-k, capacity dropping by
 *     probability and by position: the same experts for every choice (the router is fp32 on
 *     both backends; only expf's last bits differ), weights within 1e-5, the aux and z losses
 *     and the tokens per expert within 1e-5 (aux_loss and seq_aux_loss);
 *   - the router's backward (weights, aux and z losses together): dlogits within 1e-4;
 *   - the statistics and the backward twice: the same bits (fixed-order sums, integer atomics);
 *   - the permutation of the choices by expert (rows per expert, each choice's row, each row's
 *     token): exact, with dropped choices, partial chunks and 1 to 256 experts;
 *   - the experts' grouped GEMMs (forward, input and weight gradients; uneven and empty blocks)
 *     within the compute dtype's tolerance, with tuning off and on: the first size bucket of a
 *     family (sizes of the same powers of two) is timed (cuda_matmul_tuned_problems grows), the
 *     other buckets of the family take its algorithm untimed, the weight gradients still add
 *     once, and the results stay within the tolerance;
 *   - row gathers (exact), the weighted combination and its backward, the gradient's
 *     uncombination, the input jitter and the compute-dtype to fp32 conversion, within the
 *     compute dtype's tolerance (bf16 1e-2).
 * Skips (exit 77) without a GPU. */
#include <stdarg.h>

#include "tests/gpu/cuda_test_util.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

static const kernel_ops *cpu, *gpu;

static float *host_floats(size_t n, uint64_t seed, float scale) {
    float *x = (float *)malloc(n * sizeof(float) + 4);
    fill_random(x, n, seed, scale);
    return x;
}

static int *download_int(const int *d, size_t n) {
    int *x = (int *)malloc(n * sizeof(int) + 4);
    TEST_CUDA(cudaDeviceSynchronize());
    TEST_CUDA(cudaMemcpy(x, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    return x;
}

/* one router configuration: forward and backward on both backends */
static void test_route(const char *what, int N, moe_router_spec spec) {
    int E = spec.num_experts, k = spec.topk;
    size_t NE = (size_t)N * E, Nk = (size_t)N * k;
    float *logits = host_floats(NE, 7000 + NE + (size_t)spec.score_function, 3.0f);
    float *dweight = host_floats(Nk, 7100 + Nk, 1.0f);
    int *want_expert = (int *)malloc(sizeof(int) * Nk);
    float *want_weight = (float *)malloc(sizeof(float) * Nk), *want_stats = (float *)malloc(sizeof(float) * MOE_ROUTER_STATS(E));
    float *want_dlogits = (float *)malloc(sizeof(float) * NE);
    cpu->moe_route_forward(want_expert, want_weight, want_stats, logits, N, spec, 1);
    cpu->moe_route_backward(want_dlogits, dweight, logits, want_expert, N, spec, 0.5f);

    float *d_logits = upload_float(logits, NE), *d_dweight = upload_float(dweight, Nk);
    int *d_expert = (int *)device_alloc(sizeof(int) * Nk);
    float *d_weight = (float *)device_alloc(sizeof(float) * Nk);
    float *d_stats = (float *)device_alloc(sizeof(float) * MOE_ROUTER_STATS(E));
    float *d_dlogits = (float *)device_alloc(sizeof(float) * NE);
    poison(d_expert, sizeof(int) * Nk);
    poison(d_weight, sizeof(float) * Nk);
    poison(d_dlogits, sizeof(float) * NE);
    gpu->moe_route_forward(d_expert, d_weight, d_stats, d_logits, N, spec, 1);
    gpu->moe_route_backward(d_dlogits, d_dweight, d_logits, d_expert, N, spec, 0.5f);
    int *got_expert = download_int(d_expert, Nk);
    float *got_weight = download_float(d_weight, Nk), *got_stats = download_float(d_stats, MOE_ROUTER_STATS(E));
    float *got_dlogits = download_float(d_dlogits, NE);

    size_t same = 0, dropped = 0;
    for (size_t i = 0; i < Nk; i++) {
        same += got_expert[i] == want_expert[i];
        dropped += want_expert[i] < 0;
    }
    tap_ok(same == Nk, "%s: the CPU's experts for %zu of %zu choices (%zu dropped)", what, same, Nk, dropped);
    expect_below(relative_error(got_weight, want_weight, Nk), 1e-5, "%s: routing weights", what);
    expect_below(relative_error(got_stats, want_stats, 2), 1e-5, "%s: aux loss %.6g and z loss %.6g", what,
                 want_stats[0], want_stats[1]);
    expect_below(relative_error(got_stats + 2, want_stats + 2, (size_t)E), 1e-6, "%s: tokens per expert", what);
    expect_below(relative_error(got_dlogits, want_dlogits, NE), 1e-4, "%s: router backward", what);

    /* again: the same bits */
    gpu->moe_route_forward(d_expert, d_weight, d_stats, d_logits, N, spec, 1);
    gpu->moe_route_backward(d_dlogits, d_dweight, d_logits, d_expert, N, spec, 0.5f);
    float *again_stats = download_float(d_stats, MOE_ROUTER_STATS(E)), *again_dlogits = download_float(d_dlogits, NE);
    tap_ok(memcmp(again_stats, got_stats, sizeof(float) * MOE_ROUTER_STATS(E)) == 0 &&
               memcmp(again_dlogits, got_dlogits, sizeof(float) * NE) == 0,
           "%s: statistics and backward bitwise identical on a second run", what);

    free(logits); free(dweight); free(want_expert); free(want_weight); free(want_stats); free(want_dlogits);
    free(got_expert); free(got_weight); free(got_stats); free(got_dlogits); free(again_stats); free(again_dlogits);
    cudaFree(d_logits); cudaFree(d_dweight); cudaFree(d_expert); cudaFree(d_weight); cudaFree(d_stats);
    cudaFree(d_dlogits);
}

static moe_router_spec router(int E, int k, int fn) {
    moe_router_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.num_experts = E;
    spec.topk = k;
    spec.score_function = fn;
    spec.balancing = MOE_BALANCE_AUX_LOSS;
    spec.aux_loss_coeff = 1e-2f;
    spec.z_loss_coeff = 1e-3f;
    spec.seq_length = 64;
    return spec;
}

/* a device copy of host floats in the compute dtype, and back */
static void *upload_act(const float *x, size_t n) {
    void *d = gpu->alloc(gpu->act_bytes * n);
    gpu->copy_from_host_float(d, x, n);
    return d;
}
static float *download_act(const void *d, size_t n) {
    float *x = (float *)malloc(sizeof(float) * n + 4);
    gpu->copy_to_host_float(x, d, n);
    return x;
}
/* host floats rounded to the compute dtype (what the GPU holds) */
static float *act_random(size_t n, uint64_t seed, float scale) {
    float *x = host_floats(n, seed, scale);
    void *d = upload_act(x, n);
    float *r = download_act(d, n);
    gpu->release(d);
    free(x);
    return r;
}

/* the permutation of M choices (k per token) over E experts, a tenth dropped, skewed to the low
 * experts: exactly the CPU's */
static void test_permutation(int M, int k, int E, uint64_t seed) {
    int *expert = (int *)malloc(sizeof(int) * (size_t)M + 4);
    for (int i = 0; i < M; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(seed >> 33);
        expert[i] = r % 10 == 0 ? -1 : (int)((r / 10 % E) * (r / 10 % E) / E);
    }
    int *want_rows = (int *)malloc(sizeof(int) * (size_t)(E + 1)), *want_slot = (int *)malloc(sizeof(int) * (size_t)M + 4);
    int *want_token = (int *)calloc((size_t)M + 1, sizeof(int));
    cpu->moe_permutation(want_rows, want_slot, want_token, expert, M, k, E);
    int *d_expert = (int *)gpu->alloc(sizeof(int) * (size_t)M + 4), *d_rows = (int *)gpu->alloc(sizeof(int) * (size_t)(E + 1));
    int *d_slot = (int *)gpu->alloc(sizeof(int) * (size_t)M + 4), *d_token = (int *)gpu->alloc(sizeof(int) * (size_t)M + 4);
    gpu->copy_from_host(d_expert, expert, sizeof(int) * (size_t)M);
    gpu->moe_permutation(d_rows, d_slot, d_token, d_expert, M, k, E);
    int *rows = download_int(d_rows, (size_t)E + 1), *slot = download_int(d_slot, (size_t)M);
    int *token = download_int(d_token, (size_t)want_rows[E]);
    int rows_same = !memcmp(rows, want_rows, sizeof(int) * (size_t)(E + 1));
    tap_ok(rows_same, "moe_permutation M=%d k=%d E=%d: rows per expert as the CPU's (%d kept)", M, k, E, want_rows[E]);
    tap_ok(!memcmp(slot, want_slot, sizeof(int) * (size_t)M), "moe_permutation M=%d k=%d E=%d: each choice's row", M, k, E);
    tap_ok(rows_same && !memcmp(token, want_token, sizeof(int) * (size_t)want_rows[E]),
           "moe_permutation M=%d k=%d E=%d: each row's token", M, k, E);
    gpu->release(d_expert), gpu->release(d_rows), gpu->release(d_slot), gpu->release(d_token);
    free(expert), free(want_rows), free(want_slot), free(want_token), free(rows), free(slot), free(token);
}

/* grouped GEMMs over `groups` blocks of the given row counts, `calls` times the same call (the
 * weight gradients added up over the calls, as micro-batches do), against the CPU's */
static void test_grouped(const int *counts, int groups, int IC, int OC, int calls) {
    int *rows = (int *)malloc(sizeof(int) * (size_t)(groups + 1));
    rows[0] = 0;
    for (int g = 0; g < groups; g++) rows[g + 1] = rows[g] + counts[g];
    size_t R = (size_t)rows[groups], WN = (size_t)OC * IC;
    float *x = act_random(R * IC, 9000 + R, 1.0f), *dout = act_random(R * OC, 9001 + R, 1.0f);
    float *w_all = act_random(WN * groups, 9002 + WN, 0.1f);
    const void **w = (const void **)malloc(sizeof(void *) * groups), **d_w = (const void **)malloc(sizeof(void *) * groups);
    float **dw = (float **)malloc(sizeof(float *) * groups), **d_dw = (float **)malloc(sizeof(float *) * groups);
    for (int g = 0; g < groups; g++) {
        w[g] = w_all + WN * g;
        dw[g] = (float *)calloc(WN, sizeof(float));
        d_w[g] = upload_act(w_all + WN * g, WN);
        d_dw[g] = (float *)gpu->alloc(sizeof(float) * WN);
        float *zero = (float *)calloc(WN, sizeof(float));
        gpu->copy_from_host(d_dw[g], zero, sizeof(float) * WN);
        free(zero);
    }
    float *want_out = (float *)malloc(sizeof(float) * R * OC + 4), *want_dx = (float *)malloc(sizeof(float) * R * IC + 4);
    cpu->grouped_matmul_forward(want_out, x, w, rows, groups, IC, OC);
    for (int c = 0; c < calls; c++) cpu->grouped_matmul_backward(want_dx, dw, dout, x, w, rows, groups, IC, OC);
    void *d_x = upload_act(x, R * IC), *d_dout = upload_act(dout, R * OC);
    void *d_out = gpu->alloc(gpu->act_bytes * R * OC + 16), *d_dx = gpu->alloc(gpu->act_bytes * R * IC + 16);
    for (int c = 0; c < calls; c++) {
        gpu->grouped_matmul_forward(d_out, d_x, d_w, rows, groups, IC, OC);
        gpu->grouped_matmul_backward(d_dx, d_dw, d_dout, d_x, d_w, rows, groups, IC, OC);
    }
    float *got_out = download_act(d_out, R * OC), *got_dx = download_act(d_dx, R * IC);
    double worst_dw = 0.0;
    for (int g = 0; g < groups; g++) {
        float *got = (float *)malloc(sizeof(float) * WN);
        TEST_CUDA(cudaDeviceSynchronize());
        gpu->copy_to_host(got, d_dw[g], sizeof(float) * WN);
        double e = relative_error(got, dw[g], WN);
        if (e > worst_dw) worst_dw = e;
        free(got);
    }
    expect_below(relative_error(got_out, want_out, R * OC), ACT_TOL, "grouped_matmul_forward %d groups %d x %d, %d calls",
                 groups, IC, OC, calls);
    expect_below(relative_error(got_dx, want_dx, R * IC), ACT_TOL, "grouped_matmul_backward dx %d groups %d x %d, %d calls",
                 groups, IC, OC, calls);
    expect_below(worst_dw, ACT_TOL, "grouped_matmul_backward dweight (added over %d calls) %d groups %d x %d", calls,
                 groups, IC, OC);
    for (int g = 0; g < groups; g++) gpu->release((void *)d_w[g]), gpu->release(d_dw[g]), free(dw[g]);
    gpu->release(d_x), gpu->release(d_dout), gpu->release(d_out), gpu->release(d_dx);
    free(rows), free(x), free(dout), free(w_all), free(w), free(d_w), free(dw), free(d_dw);
    free(want_out), free(want_dx), free(got_out), free(got_dx);
}

/* gathers, combination and its backward, uncombination; k choices per token, some dropped */
static void test_dispatch(int N, int k, int C) {
    int M = N * k;
    size_t NC = (size_t)N * C, MC = (size_t)M * C;
    /* a permutation of the choices into rows; every fifth choice dropped */
    int *slot_row = (int *)malloc(sizeof(int) * (size_t)M), *rows = (int *)malloc(sizeof(int) * (size_t)M);
    for (int i = 0; i < M; i++) slot_row[i] = (int)(((long)i * 7919) % M);
    for (int i = 0; i < M; i++) rows[slot_row[i]] = i / k;
    for (int i = 0; i < M; i += 5) slot_row[i] = -1;
    float *x = act_random(NC, 8000 + NC, 1.0f), *y = act_random(MC, 8001 + MC, 1.0f);
    float *dout = act_random(NC, 8002 + NC, 1.0f), *weight = host_floats((size_t)M, 8003, 1.0f);
    for (int i = 0; i < M; i++) if (slot_row[i] < 0) weight[i] = 0.0f;

    float *want_g = (float *)malloc(sizeof(float) * MC), *want_out = (float *)malloc(sizeof(float) * NC);
    float *want_dy = (float *)calloc(MC, sizeof(float)), *want_dw = (float *)malloc(sizeof(float) * (size_t)M);
    float *want_dx = (float *)malloc(sizeof(float) * NC);
    cpu->gather_rows(want_g, x, rows, M, C);
    cpu->moe_combine(want_out, y, slot_row, weight, N, k, C);
    cpu->moe_combine_backward(want_dy, want_dw, dout, y, slot_row, weight, N, k, C);
    cpu->moe_uncombine(want_dx, y, slot_row, N, k, C);

    void *d_x = upload_act(x, NC), *d_y = upload_act(y, MC), *d_dout = upload_act(dout, NC);
    int *d_slot = upload_int(slot_row, (size_t)M), *d_rows = upload_int(rows, (size_t)M);
    float *d_weight = upload_float(weight, (size_t)M);
    void *d_g = gpu->alloc(gpu->act_bytes * MC), *d_out = gpu->alloc(gpu->act_bytes * NC);
    void *d_dy = gpu->alloc(gpu->act_bytes * MC), *d_dx = gpu->alloc(gpu->act_bytes * NC);
    float *d_dw = (float *)device_alloc(sizeof(float) * (size_t)M);
    float *zeros = (float *)calloc(MC, sizeof(float));
    gpu->copy_from_host_float(d_dy, zeros, MC); /* rows of dropped choices are not written */
    poison(d_g, gpu->act_bytes * MC);
    poison(d_out, gpu->act_bytes * NC);
    poison(d_dx, gpu->act_bytes * NC);
    poison(d_dw, sizeof(float) * (size_t)M);
    gpu->gather_rows(d_g, d_x, d_rows, M, C);
    gpu->moe_combine(d_out, d_y, d_slot, d_weight, N, k, C);
    gpu->moe_combine_backward(d_dy, d_dw, d_dout, d_y, d_slot, d_weight, N, k, C);
    gpu->moe_uncombine(d_dx, d_y, d_slot, N, k, C);
    float *got_g = download_act(d_g, MC), *got_out = download_act(d_out, NC), *got_dy = download_act(d_dy, MC);
    float *got_dx = download_act(d_dx, NC), *got_dw = download_float(d_dw, (size_t)M);
    tap_ok(memcmp(got_g, want_g, sizeof(float) * MC) == 0, "gather_rows N=%d k=%d C=%d: exact", N, k, C);
    expect_below(relative_error(got_out, want_out, NC), ACT_TOL, "moe_combine N=%d k=%d C=%d", N, k, C);
    expect_below(relative_error(got_dy, want_dy, MC), ACT_TOL, "moe_combine_backward dy N=%d k=%d C=%d", N, k, C);
    expect_below(relative_error(got_dw, want_dw, (size_t)M), 1e-4, "moe_combine_backward dweight N=%d k=%d C=%d", N, k, C);
    expect_below(relative_error(got_dx, want_dx, NC), ACT_TOL, "moe_uncombine N=%d k=%d C=%d", N, k, C);

    free(slot_row); free(rows); free(x); free(y); free(dout); free(weight); free(want_g); free(want_out);
    free(want_dy); free(want_dw); free(want_dx); free(got_g); free(got_out); free(got_dy); free(got_dx); free(got_dw);
    free(zeros);
    void *buffers[] = {d_x, d_y, d_dout, d_g, d_out, d_dy, d_dx};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) gpu->release(buffers[i]);
    cudaFree(d_slot); cudaFree(d_rows); cudaFree(d_weight); cudaFree(d_dw);
}

/* the router's input jitter (out of place and in place) and act_to_float */
static void test_jitter(size_t n) {
    float *x = act_random(n, 9000 + n, 2.0f), *want = (float *)malloc(sizeof(float) * n);
    dropout_rng rng = {0.0f, 1234, 77, 5000};
    cpu->uniform_jitter(want, x, n, 0.01f, rng);
    void *d_x = upload_act(x, n), *d_out = gpu->alloc(gpu->act_bytes * n);
    poison(d_out, gpu->act_bytes * n);
    gpu->uniform_jitter(d_out, d_x, n, 0.01f, rng);
    float *got = download_act(d_out, n);
    expect_below(relative_error(got, want, n), ACT_TOL, "uniform_jitter n=%zu", n);
    gpu->uniform_jitter(d_x, d_x, n, 0.01f, rng);
    float *got_in_place = download_act(d_x, n);
    tap_ok(memcmp(got_in_place, got, sizeof(float) * n) == 0, "uniform_jitter in place n=%zu: the same values", n);
    float *d_f = (float *)device_alloc(sizeof(float) * n);
    poison(d_f, sizeof(float) * n);
    gpu->act_to_float(d_f, d_out, n);
    float *got_f = download_float(d_f, n);
    tap_ok(memcmp(got_f, got, sizeof(float) * n) == 0, "act_to_float n=%zu: exact", n);
    free(x); free(want); free(got); free(got_in_place); free(got_f);
    gpu->release(d_x); gpu->release(d_out); cudaFree(d_f);
}

int main(void) {
    skip_without_gpu();
    cpu = kernels_cpu();
#ifdef TEST_FP16
    gpu = kernels_cuda_fp16();
#else
    gpu = kernels_cuda();
#endif
    tap_diag("testing the %s mixture-of-experts kernels", TEST_DTYPE_NAME);

    test_route("softmax top-2 of 8", 1024, router(8, 2, MOE_SCORE_SOFTMAX));
    moe_router_spec spec = router(8, 2, MOE_SCORE_SOFTMAX);
    spec.pre_softmax = 1;
    test_route("pre-softmax top-2 of 8", 1000, spec);
    spec = router(64, 6, MOE_SCORE_SIGMOID);
    spec.topk_scaling_factor = 2.5f;
    test_route("sigmoid top-6 of 64, scaling 2.5", 512, spec);
    spec = router(32, 4, MOE_SCORE_SQRTSOFTPLUS);
    spec.balancing = MOE_BALANCE_SEQ_AUX_LOSS;
    test_route("sqrt-softplus top-4 of 32, seq_aux_loss", 512, spec);
    spec = router(256, 8, MOE_SCORE_SIGMOID);
    spec.num_groups = 8;
    spec.group_topk = 4;
    test_route("sigmoid top-8 of 256 in 4 of 8 groups", 256, spec);
    spec = router(8, 2, MOE_SCORE_SOFTMAX);
    spec.capacity_factor = 1.0f;
    test_route("capacity 1.0, drop by probability", 1024, spec);
    spec.drop_by_position = 1;
    test_route("capacity 1.0, drop by position", 1024, spec);
    spec = router(16, 1, MOE_SCORE_SOFTMAX);
    spec.balancing = MOE_BALANCE_NONE;
    spec.z_loss_coeff = 0.0f;
    test_route("top-1 of 16, no losses", 700, spec);

    test_permutation(32768, 2, 8, 1);
    test_permutation(1000, 3, 64, 2);  /* a partial chunk */
    test_permutation(5000, 8, 256, 3);
    test_permutation(2049, 1, 1, 4);
    int uneven[5] = {700, 0, 1300, 64, 2100};
    test_grouped(uneven, 5, 256, 512, 1);
    /* tuning on: the three GEMMs (forward, input and weight gradients) of two buckets (3072 and
     * 3328 rows) of one family (4096) each time their candidates once, 20 calls in all */
    cuda_matmul_set_tuning(1);
    int tuned_before = cuda_matmul_tuned_problems();
    int family[4] = {3000, 2900, 3100, 0};
    test_grouped(family, 4, 1024, 1536, 20);
    int tuned = cuda_matmul_tuned_problems() - tuned_before;
    tap_ok(tuned == 3, "grouped GEMMs: one timing per GEMM of a family of size buckets (%d timed, want 3)", tuned);
    /* other buckets of the same family (2816 and 3584 rows): their family's algorithm, untimed */
    int same_family[2] = {2600, 3500};
    test_grouped(same_family, 2, 1024, 1536, 2);
    tap_ok(cuda_matmul_tuned_problems() - tuned_before == tuned,
           "grouped GEMMs: new buckets of a tuned family take its algorithm untimed");
    cuda_matmul_set_tuning(0);
    test_dispatch(512, 2, 256);
    test_dispatch(77, 3, 100); /* C % 8 != 0: the scalar gather */
    test_jitter(64 * 1024);
    test_jitter(1001);
    return tap_done();
}
