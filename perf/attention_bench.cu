/* attention_bench.cu: times the causal flash attention of kernels/cuda/cuda_attention.cu, forward
 * and backward, with CUDA events. Where the Hopper backward is the fused one-pass kernel (head
 * dimension 64 and 128), it also times the two-pass dK/dV and dQ kernels on the same inputs
 * (MTC_ATTENTION_FUSED_BACKWARD=0, as "old") and checks that the two agree (max |new - old| /
 * max |old| over out and dq, dk, dv); elsewhere both lines run the same code.
 *
 * Default shapes: GPT-2 124M (B=32, T=1024, H=12, D=64) and GPT 1.3B (B=8, T=2048, H=16,
 * D=128), without and with attention dropout. Causal FLOPs: forward 2*2*B*H*T*T*D/2 (two
 * products over half the score matrix), backward 2.5 times that (five products: the fused
 * backward computes exactly these; the two-pass ones recompute S, P, dP and dS in their dQ pass,
 * two products more, which are not counted).
 *
 * --bias also times the backward with the qkv bias gradient summed inside it against the
 * backward followed by a pass over dqkv (cuda_bias_backward), alternating, twice.
 *
 * --groups G times grouped-query attention: every B T H D shape given runs with its H query heads
 * in G groups (G divides H; kernels.h's grouped qkv layout; without it G = H), e.g. Llama-3.2-1B's
 * attention: --groups 8 4 4096 32 64 1 16384 32 64. There each shape's "new" line is followed by
 * the backward with the Hopper one pass's head chunks (a group's query heads split over work
 * tiles, the default) and with whole groups (MTC_SM90_BWD_HEAD_SPLIT=0), in this order,
 * alternating twice, and their agreement (dq must be identical: 0.00e+00; dk, dv differ by fp32
 * reassociation before their rounding to bf16, a few 1e-3 at most: AGREE under 1e-2).
 *
 * At head dimension 64 the Hopper one-pass backward has two step sizes (MTC_SM90_BWD_STEP=64 or
 * 128 query rows per step): each shape's "new" line is followed by the backward timed with each
 * ("step 64", "step 128", in this order, alternating twice) and their agreement (max |a - b| /
 * max |b| over dq, dk, dv: AGREE under 1e-2); elsewhere (no sm_90a, or the two-pass request)
 * both lines run the same code.
 *
 * --padded times BERT's bidirectional attention with a key-padding mask instead
 * (cuda_attention_padded_*, the mma.sync kernels on every GPU) with every key visible, the worst
 * case: FLOPs over the whole score matrix, twice the causal figures (BERT-large's shape:
 * --padded 32 512 16 64).
 *
 * --window LEFT times sliding-window attention (--window-size LEFT,0: query t sees keys
 * t - LEFT .. t) after the full causal attention of the same shape, and prints the speed-up; its
 * FLOPs count the window's score elements (T (LEFT + 1) - LEFT (LEFT + 1) / 2 per head, the whole
 * causal triangle where LEFT >= T). It then times the window on the mma.sync kernels
 * (MTC_ATTENTION_SM90_WINDOW=0; on Hopper the default is the wgmma forward and one-pass backward)
 * and checks that the two agree (max |a - b| / max |b| over out, dq, dk, dv under 1e-2: AGREE).
 * Without a dropout given, p = 0 only. E.g. the point of the
 * window: attention_bench --window 4096 1 16384 16 128 (--no-old and --bias are implied).
 *
 * Usage: attention_bench [--no-old] [--bias] [--padded] [--window LEFT] [--groups G] [--iters N] [--dropout P]
 *        [B T H D]...
 * Build: make perf/attention_bench (kernels/local.mk); the tile shapes of cuda_attention.cu can
 * be overridden with -D for variants (ATTN_FWD_WARPS, ...). Not a test: prints figures only. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mma.h>

#include "kernels/cuda/cuda_attention.cu"

typedef __nv_bfloat16 nvbf16; /* the bench times the bf16 kernels */

/* the bench owns the stream the kernels run on (compute_stream() asks cuda_stream()) */
static cudaStream_t bench_stream;
extern "C" void *cuda_stream(void) { return (void *)bench_stream; }

/* uniform bf16 in [-scale, scale] from a hash of the index */
static __global__ void bench_fill_kernel(nvbf16 *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        x[i] = __float2bfloat16(scale * ((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f));
    }
}

/* max |a - b| / max |b| over n bf16 values (host copies) */
static double bench_rel_err(const uint16_t *a, const uint16_t *b, size_t n, size_t stride,
                            size_t offset, size_t len) {
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t base = 0; base < n; base += stride)
        for (size_t i = base + offset; i < base + offset + len; i++) {
            uint32_t ua = (uint32_t)a[i] << 16, ub = (uint32_t)b[i] << 16;
            float fa, fb;
            memcpy(&fa, &ua, 4);
            memcpy(&fb, &ub, 4);
            double diff = fabs((double)fa - (double)fb);
            if (!(diff <= max_diff)) max_diff = diff; /* NaN propagates */
            if (fabs((double)fb) > max_ref) max_ref = fabs((double)fb);
        }
    return max_ref > 0 ? max_diff / max_ref : max_diff;
}

typedef struct timing { double fwd_ms, bwd_ms; } timing;

/* the sliding window the mha_ kernels run with (-1: none; --window) */
static int bench_window = -1;
/* the key/value groups of the shapes (--groups; 0: as many as query heads) */
static int bench_groups = 0;
static int groups_of(int H) { return bench_groups > 0 ? bench_groups : H; }
/* bf16 values of qkv [B, T, (H + 2G) D] */
static size_t qkv_count(int B, int T, int H, int D) { return (size_t)B * T * (H + 2 * groups_of(H)) * D; }

/* the kernels with multi-head attention (one query head per group), or --groups' grouped-query */
static void mha_forward(bf16 *out, void *ws, const bf16 *qkv, int B, int T, int H, int D,
                        int head_start, int total_heads, dropout_rng rng) {
    cuda_attention_forward(out, ws, qkv, B, T, H, groups_of(H), D, head_start, total_heads, bench_window, rng);
}
static void mha_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                         const void *ws, int B, int T, int H, int D, int head_start,
                         int total_heads, dropout_rng rng) {
    cuda_attention_backward(dqkv, NULL, dout, qkv, out, ws, B, T, H, groups_of(H), D, head_start, total_heads,
                            bench_window, rng);
}
/* the backward with the Hopper one pass's step size at D 64 forced (MTC_SM90_BWD_STEP) */
static void step_backward(const char *step, bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                          const void *ws, int B, int T, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    setenv("MTC_SM90_BWD_STEP", step, 1);
    mha_backward(dqkv, dout, qkv, out, ws, B, T, H, D, head_start, total_heads, rng);
    unsetenv("MTC_SM90_BWD_STEP");
}
static void step64_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out, const void *ws, int B,
                            int T, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    step_backward("64", dqkv, dout, qkv, out, ws, B, T, H, D, head_start, total_heads, rng);
}
static void step128_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out, const void *ws, int B,
                             int T, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    step_backward("128", dqkv, dout, qkv, out, ws, B, T, H, D, head_start, total_heads, rng);
}
/* the backward with head chunks (the default; set here so that an MTC_SM90_BWD_HEAD_SPLIT=0 in the
 * environment does not turn both lines into whole groups) */
static void head_chunk_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out, const void *ws, int B,
                                int T, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    setenv("MTC_SM90_BWD_HEAD_SPLIT", "1", 1);
    mha_backward(dqkv, dout, qkv, out, ws, B, T, H, D, head_start, total_heads, rng);
    unsetenv("MTC_SM90_BWD_HEAD_SPLIT");
}
/* the backward with whole groups per work tile (MTC_SM90_BWD_HEAD_SPLIT=0: no head chunks) */
static void whole_group_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out, const void *ws, int B,
                                 int T, int H, int D, int head_start, int total_heads, dropout_rng rng) {
    setenv("MTC_SM90_BWD_HEAD_SPLIT", "0", 1);
    mha_backward(dqkv, dout, qkv, out, ws, B, T, H, D, head_start, total_heads, rng);
    unsetenv("MTC_SM90_BWD_HEAD_SPLIT");
}
/* --padded: the bidirectional kernels, every key of bench_key_valid [B, T] visible */
static int *bench_key_valid;
static void padded_forward(bf16 *out, void *ws, const bf16 *qkv, int B, int T, int H, int D,
                           int head_start, int total_heads, dropout_rng rng) {
    cuda_attention_padded_forward(out, ws, qkv, bench_key_valid, B, T, H, H, D, head_start, total_heads, rng);
}
static void padded_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                            const void *ws, int B, int T, int H, int D, int head_start,
                            int total_heads, dropout_rng rng) {
    cuda_attention_padded_backward(dqkv, NULL, dout, qkv, out, bench_key_valid, ws, B, T, H, H, D, head_start,
                                   total_heads, rng);
}
/* "old": the two-pass Hopper backward where the fused one would run */
static void old_mha_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                             const void *ws, int B, int T, int H, int D, int head_start,
                             int total_heads, dropout_rng rng) {
    setenv("MTC_ATTENTION_FUSED_BACKWARD", "0", 1);
    cuda_attention_backward(dqkv, NULL, dout, qkv, out, ws, B, T, H, groups_of(H), D, head_start, total_heads, -1,
                            rng);
    unsetenv("MTC_ATTENTION_FUSED_BACKWARD");
}

/* the qkv bias gradient: summed inside the backward (Hopper's one pass), or a pass over dqkv after */
static float *bench_dbias;
static void fused_bias_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                                const void *ws, int B, int T, int H, int D, int head_start,
                                int total_heads, dropout_rng rng) {
    cuda_attention_backward(dqkv, bench_dbias, dout, qkv, out, ws, B, T, H, groups_of(H), D, head_start, total_heads,
                            -1, rng);
}
static void pass_bias_backward(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                               const void *ws, int B, int T, int H, int D, int head_start,
                               int total_heads, dropout_rng rng) {
    cuda_attention_backward(dqkv, NULL, dout, qkv, out, ws, B, T, H, groups_of(H), D, head_start, total_heads, -1,
                            rng);
    cuda_bias_backward(bench_dbias, dqkv, B * T, (H + 2 * groups_of(H)) * D);
}

typedef void (*forward_fn)(bf16 *, void *, const bf16 *, int, int, int, int, int, int, dropout_rng);
typedef void (*backward_fn)(bf16 *, const bf16 *, const bf16 *, const bf16 *, const void *, int,
                            int, int, int, int, int, dropout_rng);

static timing bench_time(forward_fn fwd, backward_fn bwd, bf16 *out, void *ws, bf16 *dqkv,
                         const bf16 *qkv, const bf16 *dout, int B, int T, int H, int D,
                         dropout_rng rng, int iters) {
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    timing tm;
    for (int warm = 0; warm < 2; warm++) {
        fwd(out, ws, qkv, B, T, H, D, 0, H, rng);
        bwd(dqkv, dout, qkv, out, ws, B, T, H, D, 0, H, rng);
    }
    CHECK_CUDA(cudaEventRecord(start, bench_stream));
    for (int i = 0; i < iters; i++) fwd(out, ws, qkv, B, T, H, D, 0, H, rng);
    CHECK_CUDA(cudaEventRecord(stop, bench_stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    tm.fwd_ms = ms / iters;
    CHECK_CUDA(cudaEventRecord(start, bench_stream));
    for (int i = 0; i < iters; i++) bwd(dqkv, dout, qkv, out, ws, B, T, H, D, 0, H, rng);
    CHECK_CUDA(cudaEventRecord(stop, bench_stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    tm.bwd_ms = ms / iters;
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    return tm;
}

/* bench_rel_err of the dq, dk and dv parts of two dqkv: per group (per + 2) D values, its per query
 * heads, then its key head and value head */
static void bench_part_errors(const uint16_t *a, const uint16_t *b, size_t n_qkv, int H, int D, double *e_dq,
                              double *e_dk, double *e_dv) {
    const int per = H / groups_of(H);
    const size_t stride = (size_t)(per + 2) * D;
    *e_dq = bench_rel_err(a, b, n_qkv, stride, 0, (size_t)per * D);
    *e_dk = bench_rel_err(a, b, n_qkv, stride, (size_t)per * D, D);
    *e_dv = bench_rel_err(a, b, n_qkv, stride, (size_t)(per + 1) * D, D);
}

/* "     WHAT: dq .. dk .. dv ..  AGREE" (each part under 1e-2) or DIFFER, for two device dqkv
 * made by two variants of the backward on the same inputs */
static void bench_print_agreement(const char *what, const bf16 *d_a, const bf16 *d_b, size_t n_qkv, int H, int D) {
    CHECK_CUDA(cudaStreamSynchronize(bench_stream));
    uint16_t *h_a = (uint16_t *)malloc(n_qkv * 2), *h_b = (uint16_t *)malloc(n_qkv * 2);
    CHECK_CUDA(cudaMemcpy(h_a, d_a, n_qkv * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h_b, d_b, n_qkv * 2, cudaMemcpyDeviceToHost));
    double e_dq, e_dk, e_dv;
    bench_part_errors(h_a, h_b, n_qkv, H, D, &e_dq, &e_dk, &e_dv);
    printf("     %s: dq %.2e  dk %.2e  dv %.2e  %s\n", what, e_dq, e_dk, e_dv,
           e_dq < 1e-2 && e_dk < 1e-2 && e_dv < 1e-2 ? "AGREE" : "DIFFER");
    free(h_a);
    free(h_b);
}

static __global__ void bench_ones_kernel(int *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = 1;
}

/* --window: the full causal attention, then the window's, on the same inputs */
static void bench_window_shape(int B, int T, int H, int D, float p, int iters, int window) {
    const size_t n_qkv = qkv_count(B, T, H, D), n_out = (size_t)B * T * H * D;
    const double W = window < T ? window : T, pairs = (double)T * (W + 1.0) - W * (W + 1.0) / 2.0;
    const double full_flop = 2.0 * B * H * (double)T * T * D, win_flop = 4.0 * B * H * pairs * D;
    dropout_rng rng = {p, 1234u, 77u, 0u};
    bf16 *qkv, *dout, *out, *dqkv;
    void *ws;
    CHECK_CUDA(cudaMalloc(&qkv, n_qkv * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&dqkv, n_qkv * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&dout, n_out * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&out, n_out * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&ws, cuda_attention_workspace_bytes(B, T, H, D)));
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(as_nv(qkv), n_qkv, 1u, 1.7f);
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(as_nv(dout), n_out, 2u, 1.0f);
    CHECK_LAUNCH();
    bench_window = -1;
    timing tf = bench_time(mha_forward, mha_backward, out, ws, dqkv, qkv, dout, B, T, H, D, rng, iters);
    printf("full        B=%d T=%d H=%d D=%d p=%.2f  fwd %8.3f ms %6.1f TFLOP/s  bwd %8.3f ms %6.1f TFLOP/s\n", B, T, H,
           D, (double)p, tf.fwd_ms, full_flop / tf.fwd_ms * 1e-9, tf.bwd_ms, 2.5 * full_flop / tf.bwd_ms * 1e-9);
    bench_window = window;
    timing tw = bench_time(mha_forward, mha_backward, out, ws, dqkv, qkv, dout, B, T, H, D, rng, iters);
    printf("window %-4d B=%d T=%d H=%d D=%d p=%.2f  fwd %8.3f ms %6.1f TFLOP/s  bwd %8.3f ms %6.1f TFLOP/s"
           "  (speed-up fwd %.2fx bwd %.2fx; work %.2f of the full)\n",
           window, B, T, H, D, (double)p, tw.fwd_ms, win_flop / tw.fwd_ms * 1e-9, tw.bwd_ms,
           2.5 * win_flop / tw.bwd_ms * 1e-9, tf.fwd_ms / tw.fwd_ms, tf.bwd_ms / tw.bwd_ms, win_flop / full_flop);
    fflush(stdout);
    /* the same window on the mma.sync kernels, into buffers of their own, and the agreement */
    bf16 *out_m, *dqkv_m;
    void *ws_m;
    CHECK_CUDA(cudaMalloc(&out_m, n_out * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&dqkv_m, n_qkv * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&ws_m, cuda_attention_workspace_bytes(B, T, H, D)));
    setenv("MTC_ATTENTION_SM90_WINDOW", "0", 1);
    timing tm = bench_time(mha_forward, mha_backward, out_m, ws_m, dqkv_m, qkv, dout, B, T, H, D, rng, iters);
    unsetenv("MTC_ATTENTION_SM90_WINDOW");
    CHECK_CUDA(cudaStreamSynchronize(bench_stream));
    uint16_t *h_a = (uint16_t *)malloc(n_qkv * 2), *h_b = (uint16_t *)malloc(n_qkv * 2);
    CHECK_CUDA(cudaMemcpy(h_a, out, n_out * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h_b, out_m, n_out * 2, cudaMemcpyDeviceToHost));
    const double e_out = bench_rel_err(h_a, h_b, n_out, n_out, 0, n_out);
    CHECK_CUDA(cudaMemcpy(h_a, dqkv, n_qkv * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(h_b, dqkv_m, n_qkv * 2, cudaMemcpyDeviceToHost));
    double e_dq, e_dk, e_dv;
    bench_part_errors(h_a, h_b, n_qkv, H, D, &e_dq, &e_dk, &e_dv);
    printf("mma.sync    B=%d T=%d H=%d D=%d p=%.2f  fwd %8.3f ms  bwd %8.3f ms (the window on the mma.sync kernels)\n"
           "     default vs mma.sync: out %.2e  dq %.2e  dk %.2e  dv %.2e  %s\n",
           B, T, H, D, (double)p, tm.fwd_ms, tm.bwd_ms, e_out, e_dq, e_dk, e_dv,
           e_out < 1e-2 && e_dq < 1e-2 && e_dk < 1e-2 && e_dv < 1e-2 ? "AGREE" : "DIFFER");
    free(h_a);
    free(h_b);
    CHECK_CUDA(cudaFree(out_m));
    CHECK_CUDA(cudaFree(dqkv_m));
    CHECK_CUDA(cudaFree(ws_m));
    bench_window = -1;
    fflush(stdout);
    CHECK_CUDA(cudaFree(qkv));
    CHECK_CUDA(cudaFree(dqkv));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(ws));
}

static void bench_shape(int B, int T, int H, int D, float p, int iters, int with_old, int with_bias, int padded) {
    const size_t n_qkv = qkv_count(B, T, H, D), n_out = (size_t)B * T * H * D;
    const double fwd_flop = (padded ? 4.0 : 2.0) * B * H * (double)T * T * D, bwd_flop = 2.5 * fwd_flop;
    dropout_rng rng = {p, 1234u, 77u, 0u};
    bf16 *qkv, *dout, *out, *dqkv, *out_old = NULL, *dqkv_old = NULL;
    void *ws;
    CHECK_CUDA(cudaMalloc(&qkv, n_qkv * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&dqkv, n_qkv * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&dout, n_out * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&out, n_out * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&ws, cuda_attention_workspace_bytes(B, T, H, D)));
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(as_nv(qkv), n_qkv, 1u, 1.7f);
    bench_fill_kernel<<<1024, 256, 0, bench_stream>>>(as_nv(dout), n_out, 2u, 1.0f);
    CHECK_LAUNCH();
    if (padded) {
        CHECK_CUDA(cudaMalloc(&bench_key_valid, (size_t)B * T * sizeof(int)));
        bench_ones_kernel<<<256, 256, 0, bench_stream>>>(bench_key_valid, (size_t)B * T);
        CHECK_LAUNCH();
        with_old = with_bias = 0;
    }

    timing tn = bench_time(padded ? padded_forward : mha_forward, padded ? padded_backward : mha_backward, out, ws,
                           dqkv, qkv, dout, B, T, H, D, rng, iters);
    printf("%s B=%d T=%d H=%d D=%d p=%.2f  fwd %8.3f ms %6.1f TFLOP/s  bwd %8.3f ms %6.1f TFLOP/s\n",
           padded ? "padded" : "new ", B, T, H, D, (double)p, tn.fwd_ms, fwd_flop / tn.fwd_ms * 1e-9, tn.bwd_ms,
           bwd_flop / tn.bwd_ms * 1e-9);
    fflush(stdout);
    if (padded) {
        CHECK_CUDA(cudaFree(bench_key_valid));
        bench_key_valid = NULL;
    }
    if (!padded && D == 64) { /* the one pass's two step sizes, alternating twice, into buffers of their own */
        bf16 *dqkv_64, *dqkv_128;
        CHECK_CUDA(cudaMalloc(&dqkv_64, n_qkv * sizeof(bf16)));
        CHECK_CUDA(cudaMalloc(&dqkv_128, n_qkv * sizeof(bf16)));
        for (int round = 0; round < 2; round++) {
            timing t64 = bench_time(mha_forward, step64_backward, out, ws, dqkv_64, qkv, dout, B, T, H, D, rng, iters);
            timing t128 =
                bench_time(mha_forward, step128_backward, out, ws, dqkv_128, qkv, dout, B, T, H, D, rng, iters);
            printf("step 64  B=%d T=%d H=%d D=%d p=%.2f  bwd %8.3f ms %6.1f TFLOP/s\n", B, T, H, D, (double)p,
                   t64.bwd_ms, bwd_flop / t64.bwd_ms * 1e-9);
            printf("step 128 B=%d T=%d H=%d D=%d p=%.2f  bwd %8.3f ms %6.1f TFLOP/s  (speed-up over step 64 %.2fx)\n", B,
                   T, H, D, (double)p, t128.bwd_ms, bwd_flop / t128.bwd_ms * 1e-9, t64.bwd_ms / t128.bwd_ms);
            fflush(stdout);
        }
        bench_print_agreement("step 128 vs step 64", dqkv_128, dqkv_64, n_qkv, H, D);
        CHECK_CUDA(cudaFree(dqkv_64));
        CHECK_CUDA(cudaFree(dqkv_128));
        fflush(stdout);
    }
    if (!padded && groups_of(H) < H) { /* GQA: head chunks against whole groups, alternating twice */
        bf16 *dqkv_split, *dqkv_whole;
        CHECK_CUDA(cudaMalloc(&dqkv_split, n_qkv * sizeof(bf16)));
        CHECK_CUDA(cudaMalloc(&dqkv_whole, n_qkv * sizeof(bf16)));
        for (int round = 0; round < 2; round++) {
            timing ts =
                bench_time(mha_forward, head_chunk_backward, out, ws, dqkv_split, qkv, dout, B, T, H, D, rng, iters);
            timing tw =
                bench_time(mha_forward, whole_group_backward, out, ws, dqkv_whole, qkv, dout, B, T, H, D, rng, iters);
            printf("chunks   B=%d T=%d H=%d G=%d D=%d p=%.2f  bwd %8.3f ms %6.1f TFLOP/s  (speed-up over whole groups "
                   "%.2fx)\n", B, T, H, groups_of(H), D, (double)p, ts.bwd_ms, bwd_flop / ts.bwd_ms * 1e-9,
                   tw.bwd_ms / ts.bwd_ms);
            printf("groups   B=%d T=%d H=%d G=%d D=%d p=%.2f  bwd %8.3f ms %6.1f TFLOP/s  (MTC_SM90_BWD_HEAD_SPLIT=0)\n",
                   B, T, H, groups_of(H), D, (double)p, tw.bwd_ms, bwd_flop / tw.bwd_ms * 1e-9);
            fflush(stdout);
        }
        bench_print_agreement("chunks vs whole groups", dqkv_split, dqkv_whole, n_qkv, H, D);
        CHECK_CUDA(cudaFree(dqkv_split));
        CHECK_CUDA(cudaFree(dqkv_whole));
        fflush(stdout);
    }
    if (with_bias) { /* alternating, twice */
        const size_t columns = (size_t)(H + 2 * groups_of(H)) * D;
        CHECK_CUDA(cudaMalloc(&bench_dbias, columns * sizeof(float)));
        CHECK_CUDA(cudaMemsetAsync(bench_dbias, 0, columns * sizeof(float), bench_stream));
        for (int round = 0; round < 2; round++) {
            timing tf = bench_time(mha_forward, fused_bias_backward, out, ws, dqkv, qkv, dout, B, T, H, D, rng, iters);
            timing tp = bench_time(mha_forward, pass_bias_backward, out, ws, dqkv, qkv, dout, B, T, H, D, rng, iters);
            printf("bias B=%d T=%d H=%d D=%d  bwd with the bias inside %8.3f ms, bwd then a pass %8.3f ms"
                   "  (inside saves %.1f us)\n", B, T, H, D, tf.bwd_ms, tp.bwd_ms, 1000.0 * (tp.bwd_ms - tf.bwd_ms));
        }
        CHECK_CUDA(cudaFree(bench_dbias));
        fflush(stdout);
    }
    if (with_old) {
        CHECK_CUDA(cudaMalloc(&out_old, n_out * sizeof(bf16)));
        CHECK_CUDA(cudaMalloc(&dqkv_old, n_qkv * sizeof(bf16)));
        void *ws_old;
        CHECK_CUDA(cudaMalloc(&ws_old, cuda_attention_workspace_bytes(B, T, H, D)));
        timing to = bench_time(mha_forward, old_mha_backward, out_old, ws_old, dqkv_old,
                               qkv, dout, B, T, H, D, rng, iters);
        printf("old  B=%d T=%d H=%d D=%d p=%.2f  fwd %8.3f ms %6.1f TFLOP/s  bwd %8.3f ms %6.1f TFLOP/s"
               "  (speed-up fwd %.2fx bwd %.2fx)\n",
               B, T, H, D, (double)p, to.fwd_ms, fwd_flop / to.fwd_ms * 1e-9, to.bwd_ms,
               bwd_flop / to.bwd_ms * 1e-9, to.fwd_ms / tn.fwd_ms, to.bwd_ms / tn.bwd_ms);
        /* agreement: both computed from the same inputs (the new backward from the new out) */
        CHECK_CUDA(cudaStreamSynchronize(bench_stream));
        uint16_t *h_new = (uint16_t *)malloc(n_qkv * 2), *h_old = (uint16_t *)malloc(n_qkv * 2);
        CHECK_CUDA(cudaMemcpy(h_new, out, n_out * 2, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(h_old, out_old, n_out * 2, cudaMemcpyDeviceToHost));
        double e_out = bench_rel_err(h_new, h_old, n_out, n_out, 0, n_out);
        CHECK_CUDA(cudaMemcpy(h_new, dqkv, n_qkv * 2, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(h_old, dqkv_old, n_qkv * 2, cudaMemcpyDeviceToHost));
        double e_dq, e_dk, e_dv;
        bench_part_errors(h_new, h_old, n_qkv, H, D, &e_dq, &e_dk, &e_dv);
        printf("     new vs old: out %.2e  dq %.2e  dk %.2e  dv %.2e  %s\n", e_out, e_dq, e_dk,
               e_dv, e_out < 1e-2 && e_dq < 1e-2 && e_dk < 1e-2 && e_dv < 1e-2 ? "AGREE" : "DIFFER");
        free(h_new);
        free(h_old);
        CHECK_CUDA(cudaFree(out_old));
        CHECK_CUDA(cudaFree(dqkv_old));
        CHECK_CUDA(cudaFree(ws_old));
    }
    fflush(stdout);
    CHECK_CUDA(cudaFree(qkv));
    CHECK_CUDA(cudaFree(dqkv));
    CHECK_CUDA(cudaFree(dout));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(ws));
}

int main(int argc, char **argv) {
    int with_old = 1, with_bias = 0, padded = 0, iters = 10, nshapes = 0, window = -1;
    float dropout = -1.0f; /* default: both 0 and 0.1 */
    int shapes[16][4];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-old") == 0) with_old = 0;
        else if (strcmp(argv[i], "--bias") == 0) with_bias = 1;
        else if (strcmp(argv[i], "--padded") == 0) padded = 1;
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) window = atoi(argv[++i]);
        else if (strcmp(argv[i], "--groups") == 0 && i + 1 < argc) bench_groups = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dropout") == 0 && i + 1 < argc) dropout = (float)atof(argv[++i]);
        else if (i + 3 < argc && nshapes < 16) {
            for (int j = 0; j < 4; j++) shapes[nshapes][j] = atoi(argv[i + j]);
            nshapes++;
            i += 3;
        } else {
            fprintf(stderr, "usage: %s [--no-old] [--bias] [--padded] [--window LEFT] [--groups G] [--iters N] "
                            "[--dropout P] [B T H D]...\n", argv[0]);
            return 2;
        }
    }
    if (window < -1 || (window >= 0 && padded)) {
        fprintf(stderr, "%s: --window takes LEFT >= 0 (causal attention only, not with --padded)\n", argv[0]);
        return 2;
    }
    if (bench_groups < 0 || (bench_groups > 0 && padded)) {
        fprintf(stderr, "%s: --groups takes G > 0 (causal attention only, not with --padded)\n", argv[0]);
        return 2;
    }
    if (nshapes == 0) {
        const int defaults[2][4] = {{32, 1024, 12, 64}, {8, 2048, 16, 128}};
        memcpy(shapes, defaults, sizeof defaults);
        nshapes = 2;
    }
    if (iters < 1) iters = 1;
    for (int s = 0; s < nshapes; s++)
        if (bench_groups > 0 && shapes[s][2] % bench_groups != 0) {
            fprintf(stderr, "%s: --groups %d does not divide H = %d\n", argv[0], bench_groups, shapes[s][2]);
            return 2;
        }
    CHECK_CUDA(cudaStreamCreateWithFlags(&bench_stream, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("# attention_bench on %s (%d SMs), fwd-warps %d fwd-bn %d dq-warps %d/%d dkdv-warps %d "
           "dkdv-bm %d/%d, %d iterations", prop.name, prop.multiProcessorCount, ATTN_FWD_WARPS,
           ATTN_FWD_BN, ATTN_DQ_WARPS_64, ATTN_DQ_WARPS_128, ATTN_DKDV_WARPS, ATTN_DKDV_BM_64,
           ATTN_DKDV_BM_128, iters);
    if (bench_groups > 0) printf(", %d key/value groups (GQA)", bench_groups);
    printf(", D 64 one-pass step %d by default\n", cuda_attention_sm90_backward_step(64));
    for (int s = 0; s < nshapes; s++) {
        if (window >= 0) {
            bench_window_shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], dropout < 0.0f ? 0.0f : dropout,
                               iters, window);
        } else if (dropout < 0.0f) {
            bench_shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 0.0f, iters, with_old, with_bias,
                        padded);
            bench_shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 0.1f, iters, with_old, with_bias,
                        padded);
        } else {
            bench_shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], dropout, iters,
                        with_old, with_bias, padded);
        }
    }
    return 0;
}
