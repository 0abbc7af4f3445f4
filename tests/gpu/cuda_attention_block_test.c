/* cuda_attention_block_test.c: the CUDA backend's ring-attention operations of context
 * parallelism (kernels/cuda/cuda_attention_block.cu) against the fp32 CPU reference
 * (kernels/cpu/cpu_attention_block.c), through the two backends' kernel tables, on random inputs
 * rounded to the compute dtype first (so both backends see the same values):
 *   - attention_kv_pack, attention_kv_unpack, columns_to_blocks, blocks_to_columns: exact (copies);
 *   - attention_block_forward over the blocks context parallelism computes (a rank's own block,
 *     a later rank's: rows that see no key get out 0 and lse -inf, an earlier rank's whole block,
 *     CP4 with dropout 0.1 and a head offset, grouped-query attention, a non-causal block of one
 *     piece with Tq != Tk, pieces of 300 rows over many tiles, head dimensions 64, 128 and 40):
 *     out within ACT_TOL (bf16 1e-2, fp16
 *     2e-3: the output's rounding), lse within 1e-4 and its -inf rows the CPU's;
 *   - attention_merge: out within ACT_TOL, lse within 1e-5 (rows whose block lse is -inf unchanged);
 *   - attention_block_backward from the CPU's merged out and lse, accumulating into random dqkv
 *     and dkv: within ACT_TOL (the dropout mask must be the CPU's for this to hold), the key and
 *     value heads of dqkv untouched (exact), and a second run bitwise identical (no atomics).
 * Sliding windows (spec.windowed, --window-size): the same comparisons for windows inside a piece,
 * across the pieces, 0, and a block wholly outside every query's window (out 0, lse -inf; the
 * backward adds nothing).
 * Built with -DTEST_FP16 for the fp16 kernels. Skips (exit 77) without a GPU. */
#include "tests/gpu/cuda_test_util.h"
#include "kernels/kernels.h"
#include "tests/tap.h"

static const kernel_ops *cpu, *gpu;

static float *host_floats(size_t n, uint64_t seed, float scale) {
    float *x = (float *)malloc(n * sizeof(float) + 4);
    fill_random(x, n, seed, scale);
    round_to_bf16(x, n);
    return x;
}

static float *copy_floats(const float *x, size_t n) {
    float *y = (float *)malloc(n * sizeof(float) + 4);
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* the span of context-parallel rank `rank` of `cp` (context_parallel_span's), pieces of L rows */
static attention_span cp_span(int cp, int rank, int L) {
    attention_span s = {2, L, {rank * L, (2 * cp - 1 - rank) * L}};
    return s;
}

static int rows_of(attention_span s) { return s.pieces * s.piece_length; }

/* 1 when got is exactly want (bitwise, after the dtype's rounding) */
static int same_values(const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

/* relative error of lse over the rows where want is finite; the rows where it is -inf must be
 * -inf in got too (else +inf) */
static double lse_error(const float *got, const float *want, size_t n, size_t *empty_rows) {
    double max_diff = 0.0, max_want = 0.0;
    *empty_rows = 0;
    for (size_t i = 0; i < n; i++) {
        if (want[i] == -INFINITY) {
            if (got[i] != -INFINITY) return INFINITY;
            (*empty_rows)++;
            continue;
        }
        if (!isfinite(got[i])) return INFINITY;
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > max_diff) max_diff = d;
        if (fabs((double)want[i]) > max_want) max_want = fabs((double)want[i]);
    }
    return max_want > 0.0 ? max_diff / max_want : max_diff;
}

static void test_copies(int rows, int H, int G, int D) {
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, nq = (size_t)rows * C3, nkv = (size_t)rows * KV;
    float *qkv = host_floats(nq, 11 + nq, 1.0f), *dkv = host_floats(nkv, 12 + nkv, 1.0f);
    float *want_kv = (float *)malloc(sizeof(float) * nkv), *want_dqkv = copy_floats(qkv, nq);
    cpu->attention_kv_pack(want_kv, qkv, rows, H, G, D);
    cpu->attention_kv_unpack(want_dqkv, dkv, rows, H, G, D);
    bf16 *d_qkv = upload_bf16(qkv, nq), *d_dkv = upload_bf16(dkv, nkv), *d_kv = (bf16 *)device_alloc(2 * nkv);
    poison(d_kv, 2 * nkv);
    gpu->attention_kv_pack(d_kv, d_qkv, rows, H, G, D);
    gpu->attention_kv_unpack(d_qkv, d_dkv, rows, H, G, D); /* into qkv: the query heads stay */
    float *got_kv = download_bf16(d_kv, nkv), *got_dqkv = download_bf16(d_qkv, nq);
    tap_ok(same_values(got_kv, want_kv, nkv), "attention_kv_pack rows=%d H=%d G=%d D=%d: exact", rows, H, G, D);
    tap_ok(same_values(got_dqkv, want_dqkv, nq), "attention_kv_unpack rows=%d H=%d G=%d D=%d: exact, query heads kept",
           rows, H, G, D);
    free(qkv); free(dkv); free(want_kv); free(want_dqkv); free(got_kv); free(got_dqkv);
    cudaFree(d_qkv); cudaFree(d_dkv); cudaFree(d_kv);
}

static void test_column_blocks(int rows, int blocks, int width) {
    size_t n = (size_t)rows * blocks * width;
    float *in = host_floats(n, 21 + n, 1.0f), *want = (float *)malloc(sizeof(float) * n);
    float *want_back = (float *)malloc(sizeof(float) * n);
    cpu->columns_to_blocks(want, in, rows, blocks, width);
    cpu->blocks_to_columns(want_back, want, rows, blocks, width);
    bf16 *d_in = upload_bf16(in, n), *d_out = (bf16 *)device_alloc(2 * n), *d_back = (bf16 *)device_alloc(2 * n);
    poison(d_out, 2 * n);
    poison(d_back, 2 * n);
    gpu->columns_to_blocks(d_out, d_in, rows, blocks, width);
    gpu->blocks_to_columns(d_back, d_out, rows, blocks, width);
    float *got = download_bf16(d_out, n), *got_back = download_bf16(d_back, n);
    tap_ok(same_values(got, want, n), "columns_to_blocks rows=%d blocks=%d width=%d: exact", rows, blocks, width);
    tap_ok(same_values(got_back, want_back, n) && same_values(got_back, in, n),
           "blocks_to_columns rows=%d blocks=%d width=%d: exact, the inverse", rows, blocks, width);
    free(in); free(want); free(want_back); free(got); free(got_back);
    cudaFree(d_in); cudaFree(d_out); cudaFree(d_back);
}

/* one block: forward, then backward from the CPU's out and lse (a single block's result is the
 * merged one of a ring with one step), both backends */
static void test_block(const char *what, int B, int H, int G, int D, attention_block_spec spec, float p) {
    int Tq = rows_of(spec.q), Tk = rows_of(spec.k);
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D;
    size_t nq = (size_t)B * Tq * C3, nk = (size_t)B * Tk * C3, nkv = (size_t)B * Tk * KV;
    size_t nout = (size_t)B * Tq * H * D, nlse = (size_t)B * H * Tq;
    dropout_rng rng = {p, 1234, 77 + (uint64_t)D, 999};
    float *qkv = host_floats(nq, 100 + nq + (size_t)D, 1.0f), *qkv_k = host_floats(nk, 200 + nk, 1.0f);
    float *kv = (float *)malloc(sizeof(float) * nkv);
    cpu->attention_kv_pack(kv, qkv_k, B * Tk, H, G, D);
    float *want_out = (float *)malloc(sizeof(float) * nout), *want_lse = (float *)malloc(sizeof(float) * nlse);
    cpu->attention_block_forward(want_out, want_lse, qkv, kv, B, H, G, D, spec, rng);

    bf16 *d_qkv = upload_bf16(qkv, nq), *d_kv = upload_bf16(kv, nkv), *d_out = (bf16 *)device_alloc(2 * nout);
    float *d_lse = (float *)device_alloc(sizeof(float) * nlse);
    poison(d_out, 2 * nout);
    poison(d_lse, sizeof(float) * nlse);
    gpu->attention_block_forward(d_out, d_lse, d_qkv, d_kv, B, H, G, D, spec, rng);
    float *got_out = download_bf16(d_out, nout), *got_lse = download_float(d_lse, nlse);
    size_t empty = 0;
    expect_below(relative_error(got_out, want_out, nout), ACT_TOL, "%s: forward out", what);
    expect_below(lse_error(got_lse, want_lse, nlse, &empty), 1e-4, "%s: forward lse (%zu of %zu rows see no key)",
                 what, empty, nlse);

    /* backward: out rounded to the dtype for both (it is an input: delta = dout . out) */
    round_to_bf16(want_out, nout);
    float *dout = host_floats(nout, 300 + nout, 1.0f);
    float *dqkv0 = host_floats(nq, 400 + nq, 0.5f), *dkv0 = host_floats(nkv, 500 + nkv, 0.5f);
    float *want_dqkv = copy_floats(dqkv0, nq), *want_dkv = copy_floats(dkv0, nkv);
    cpu->attention_block_backward(want_dqkv, want_dkv, dout, qkv, kv, want_out, want_lse, B, H, G, D, spec, rng);
    bf16 *d_dout = upload_bf16(dout, nout), *d_want_out = upload_bf16(want_out, nout);
    float *d_want_lse = upload_float(want_lse, nlse);
    float *got_dqkv = NULL, *got_dkv = NULL;
    int identical = 1;
    for (int run = 0; run < 2; run++) {
        bf16 *d_dqkv = upload_bf16(dqkv0, nq), *d_dkv = upload_bf16(dkv0, nkv);
        gpu->attention_block_backward(d_dqkv, d_dkv, d_dout, d_qkv, d_kv, d_want_out, d_want_lse, B, H, G, D, spec,
                                      rng);
        float *a = download_bf16(d_dqkv, nq), *b = download_bf16(d_dkv, nkv);
        if (run == 0) {
            got_dqkv = a;
            got_dkv = b;
        } else {
            identical = same_values(a, got_dqkv, nq) && same_values(b, got_dkv, nkv);
            free(a); free(b);
        }
        cudaFree(d_dqkv); cudaFree(d_dkv);
    }
    expect_below(relative_error(got_dqkv, want_dqkv, nq), ACT_TOL, "%s: backward dqkv (accumulated)", what);
    expect_below(relative_error(got_dkv, want_dkv, nkv), ACT_TOL, "%s: backward dkv (accumulated)", what);
    int untouched = 1; /* the key and value heads of dqkv keep their values */
    for (size_t r = 0; r < (size_t)B * Tq; r++)
        for (int g = 0; g < G; g++)
            for (int e = 0; e < 2 * D; e++) {
                size_t at = r * C3 + qkv_key_offset(g, H, G, D) + (size_t)e;
                if (got_dqkv[at] != dqkv0[at]) untouched = 0;
            }
    tap_ok(untouched, "%s: backward leaves dqkv's key and value heads untouched", what);
    tap_ok(identical, "%s: backward bitwise identical on a second run", what);

    free(qkv); free(qkv_k); free(kv); free(want_out); free(want_lse); free(got_out); free(got_lse);
    free(dout); free(dqkv0); free(dkv0); free(want_dqkv); free(want_dkv); free(got_dqkv); free(got_dkv);
    cudaFree(d_qkv); cudaFree(d_kv); cudaFree(d_out); cudaFree(d_lse); cudaFree(d_dout); cudaFree(d_want_out);
    cudaFree(d_want_lse);
}

static void test_merge(int B, int T, int H, int D) {
    size_t nout = (size_t)B * T * H * D, nlse = (size_t)B * H * T;
    float *out = host_floats(nout, 600 + nout, 1.0f), *block_out = host_floats(nout, 700 + nout, 1.0f);
    float *lse = host_floats(nlse, 800 + nlse, 4.0f), *block_lse = host_floats(nlse, 900 + nlse, 4.0f);
    for (size_t i = 0; i < nlse; i += 7) block_lse[i] = -INFINITY; /* a block that adds nothing */
    for (size_t i = 3; i < nlse; i += 11) { /* a running result that has seen nothing yet (out 0) */
        lse[i] = -INFINITY;
        size_t b = i / ((size_t)H * T), h = i / T % H, t = i % T;
        for (int d = 0; d < D; d++) out[((b * T + t) * H + h) * D + d] = 0.0f;
    }
    float *want_out = copy_floats(out, nout), *want_lse = copy_floats(lse, nlse);
    cpu->attention_merge(want_out, want_lse, block_out, block_lse, B, T, H, D);
    bf16 *d_out = upload_bf16(out, nout), *d_block_out = upload_bf16(block_out, nout);
    float *d_lse = upload_float(lse, nlse), *d_block_lse = upload_float(block_lse, nlse);
    gpu->attention_merge(d_out, d_lse, d_block_out, d_block_lse, B, T, H, D);
    float *got_out = download_bf16(d_out, nout), *got_lse = download_float(d_lse, nlse);
    size_t empty = 0;
    expect_below(relative_error(got_out, want_out, nout), ACT_TOL, "attention_merge B=%d T=%d H=%d D=%d: out", B, T, H,
                 D);
    expect_below(lse_error(got_lse, want_lse, nlse, &empty), 1e-5, "attention_merge B=%d T=%d H=%d D=%d: lse", B, T, H,
                 D);
    int kept = 1;
    for (size_t i = 0; i < nlse; i += 7)
        if (got_lse[i] != lse[i] && !(isinf(lse[i]) && isinf(got_lse[i]))) kept = 0;
    tap_ok(kept, "attention_merge: rows whose block lse is -inf keep their lse");
    free(out); free(block_out); free(lse); free(block_lse); free(want_out); free(want_lse); free(got_out);
    free(got_lse);
    cudaFree(d_out); cudaFree(d_block_out); cudaFree(d_lse); cudaFree(d_block_lse);
}

int main(void) {
    skip_without_gpu();
    cpu = kernels_cpu();
    gpu = kernels_cuda(); /* kernels_cuda_fp16 with -DTEST_FP16 (cuda_fp16_map.h) */
    tap_diag("testing the %s ring-attention kernels", TEST_DTYPE_NAME);

    test_copies(37, 4, 2, 64);
    test_copies(20, 6, 6, 40);
    test_column_blocks(48, 2, 3 * 64);
    test_column_blocks(33, 4, 40);

    attention_block_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.causal = 1;
    spec.total_heads = 4;
    /* CP2, pieces of 40 rows: rank 0 holds positions [0,40) and [120,160) */
    spec.total_T = 160;
    spec.q = cp_span(2, 0, 40);
    spec.k = cp_span(2, 0, 40);
    test_block("CP2 rank 0, own block, H4 G2 D64", 2, 4, 2, 64, spec, 0.0f);
    spec.k = cp_span(2, 1, 40);
    test_block("CP2 rank 0, block of rank 1 (first piece sees nothing)", 2, 4, 2, 64, spec, 0.0f);
    spec.q = cp_span(2, 1, 40);
    spec.k = cp_span(2, 0, 40);
    test_block("CP2 rank 1, block of rank 0, dropout 0.1", 2, 4, 2, 64, spec, 0.1f);
    /* CP4, pieces of 24 rows, heads 4..7 of 8 (a tensor-parallel rank's), dropout */
    spec.total_T = 8 * 24;
    spec.head_start = 4;
    spec.total_heads = 8;
    spec.q = cp_span(4, 2, 24);
    spec.k = cp_span(4, 1, 24);
    test_block("CP4 rank 2, block of rank 1, heads 4-7 of 8, dropout 0.1, D128", 1, 4, 4, 128, spec, 0.1f);
    spec.k = cp_span(4, 2, 24);
    test_block("CP4 rank 2, own block, GQA H8 G2, dropout 0.2, D40", 2, 8, 2, 40, spec, 0.2f);
    /* long pieces (300 rows: many 64-row tiles, tiles skipped, unmasked and masked, a piece
     * boundary inside a tile) */
    spec.total_T = 4 * 300;
    spec.head_start = 0;
    spec.total_heads = 4;
    spec.q = cp_span(2, 1, 300);
    spec.k = cp_span(2, 1, 300);
    test_block("CP2 rank 1, own block, pieces of 300, MQA H4 G1, dropout 0.1", 1, 4, 1, 64, spec, 0.1f);
    spec.k = cp_span(2, 0, 300);
    test_block("CP2 rank 1, block of rank 0, pieces of 300, H4 G2", 2, 4, 2, 64, spec, 0.0f);
    spec.q = cp_span(2, 0, 300);
    spec.k = cp_span(2, 1, 300);
    test_block("CP2 rank 0, block of rank 1, pieces of 300, H4 G4, D128", 1, 4, 4, 128, spec, 0.0f);
    /* non-causal, one piece each side, Tq != Tk */
    attention_block_spec flat;
    memset(&flat, 0, sizeof flat);
    flat.q = (attention_span){1, 50, {0, 0}};
    flat.k = (attention_span){1, 70, {50, 0}};
    flat.causal = 0;
    flat.total_T = 120;
    flat.total_heads = 2;
    test_block("non-causal, Tq 50, Tk 70, H2 G1", 2, 2, 1, 64, flat, 0.0f);
    test_block("non-causal, Tq 50, Tk 70, H2 G1, dropout 0.1", 2, 2, 1, 64, flat, 0.1f);

    /* sliding windows (query at pq sees keys pq - W .. pq): CP2 pieces of 300 rows (positions
     * [0,300) [900,1200) on rank 0, [300,900) on rank 1) */
    spec.total_T = 4 * 300;
    spec.head_start = 0;
    spec.total_heads = 4;
    spec.windowed = 1;
    spec.window_left = 100;
    spec.q = cp_span(2, 1, 300);
    spec.k = cp_span(2, 1, 300);
    test_block("window 100, CP2 rank 1, own block, pieces of 300, H4 G2", 1, 4, 2, 64, spec, 0.0f);
    test_block("window 100, CP2 rank 1, own block, pieces of 300, H4 G2, dropout 0.1", 1, 4, 2, 64, spec, 0.1f);
    spec.k = cp_span(2, 0, 300);
    test_block("window 100, CP2 rank 1, block of rank 0 (the window's edge in both pieces)", 2, 4, 2, 128, spec, 0.0f);
    spec.window_left = 37;
    spec.q = cp_span(2, 0, 300);
    spec.k = cp_span(2, 1, 300);
    test_block("window 37, CP2 rank 0, block of rank 1 (only the second piece's first rows see keys)", 1, 4, 4, 64,
               spec, 0.1f);
    spec.window_left = 0;
    spec.k = cp_span(2, 0, 300);
    test_block("window 0, CP2 rank 0, own block (the diagonal alone), D40", 1, 4, 2, 40, spec, 0.0f);
    /* CP4, pieces of 24: rank 3 holds [72,96) and [96,120); rank 0's keys [0,24) and [168,192)
     * are outside every window of 16 */
    spec.total_T = 8 * 24;
    spec.window_left = 16;
    spec.q = cp_span(4, 3, 24);
    spec.k = cp_span(4, 0, 24);
    test_block("window 16, CP4 rank 3, block of rank 0 (no query sees a key)", 1, 4, 2, 64, spec, 0.1f);
    spec.k = cp_span(4, 2, 24);
    test_block("window 16, CP4 rank 3, block of rank 2, dropout 0.1", 2, 4, 2, 64, spec, 0.1f);
    spec.windowed = 0;
    spec.window_left = 0;

    test_merge(2, 37, 4, 64);
    test_merge(1, 16, 3, 40);
    return tap_done();
}
