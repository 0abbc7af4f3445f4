/* attention_block_test.c: context parallelism's ring-attention kernels (kernels.h:
 * attention_kv_pack/unpack, attention_block_forward, attention_merge, attention_block_backward)
 * on the CPU backend against the whole-sequence attention_forward/attention_backward. A
 * sequence of T = 2 CP x 3 rows is cut as Megatron's context parallelism cuts it (rank r holds
 * pieces r and 2 CP - 1 - r); each simulated rank computes its rows' attention block by block
 * in the ring's order (its own block, then rank r - 1's, ...) and merges them; its rows must
 * equal the whole-sequence output, and the summed block backwards the whole-sequence gradients
 * (queries here, keys and values summed over the ranks that read them), with dropout on (the
 * mask of the global positions), grouped-query attention (4 heads, 2 groups, odd D = 3) and
 * sliding windows (a block's keys cut at the window's start, whole blocks masked).
 * Tolerance 1e-5 relative to the largest value: fp32 sums of a few terms in another order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "tests/tap.h"

enum { B = 2, H = 4, G = 2, D = 3, PIECE = 3 };

static uint64_t state = 88172645463325252ull;
static float frand(void) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return (float)((state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* max |a - b| / max |b| over n values */
static double rel_diff(const float *a, const float *b, size_t n) {
    double worst = 0.0, scale = 1e-12;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst) worst = d;
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return worst / scale;
}

static attention_span span_of(int cp, int rank) {
    attention_span s = {2, PIECE, {rank * PIECE, (2 * cp - 1 - rank) * PIECE}};
    return s;
}

static void check_layout(const kernel_ops *K, int cp, float p, int window) {
    int T = 2 * cp * PIECE, Tl = 2 * PIECE;
    size_t C3 = (size_t)(H + 2 * G) * D, HD = (size_t)H * D, KV = (size_t)2 * G * D;
    dropout_rng rng = {p, 1234, 77, 5};
    float *qkv = malloc(sizeof(float) * B * T * C3), *dout = malloc(sizeof(float) * B * T * HD);
    for (size_t i = 0; i < (size_t)B * T * C3; i++) qkv[i] = frand();
    for (size_t i = 0; i < (size_t)B * T * HD; i++) dout[i] = frand();
    float *out = malloc(sizeof(float) * B * T * HD), *dqkv = malloc(sizeof(float) * B * T * C3);
    void *workspace = malloc(K->attention_workspace_bytes(B, T, H, D));
    K->attention_forward(out, workspace, qkv, B, T, H, G, D, 0, H, window, rng);
    K->attention_backward(dqkv, NULL, dout, qkv, out, workspace, B, T, H, G, D, 0, H, window, rng);

    /* each rank's rows, packed keys and values; the key/value gradients of every rank's block */
    size_t rows = (size_t)B * Tl;
    float *local_qkv = malloc(sizeof(float) * cp * rows * C3), *local_dout = malloc(sizeof(float) * cp * rows * HD);
    float *kv = malloc(sizeof(float) * cp * rows * KV), *dkv = calloc((size_t)cp * rows * KV, sizeof(float));
    for (int r = 0; r < cp; r++) {
        attention_span s = span_of(cp, r);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tl; t++) {
                int g = s.start[t / PIECE] + t % PIECE;
                memcpy(local_qkv + ((r * rows) + (size_t)b * Tl + t) * C3, qkv + ((size_t)b * T + g) * C3, sizeof(float) * C3);
                memcpy(local_dout + ((r * rows) + (size_t)b * Tl + t) * HD, dout + ((size_t)b * T + g) * HD, sizeof(float) * HD);
            }
        K->attention_kv_pack(kv + r * rows * KV, local_qkv + r * rows * C3, (int)rows, H, G, D);
    }
    double worst_out = 0.0, worst_dq = 0.0;
    int masked_rows = 0;
    float *local_out = malloc(sizeof(float) * cp * rows * HD), *lse = malloc(sizeof(float) * cp * rows * H);
    float *block_out = malloc(sizeof(float) * rows * HD), *block_lse = malloc(sizeof(float) * rows * H);
    float *local_dqkv = calloc((size_t)cp * rows * C3, sizeof(float));
    for (int r = 0; r < cp; r++) {
        float *o = local_out + r * rows * HD, *l = lse + r * rows * H;
        for (int step = 0; step < cp; step++) {
            int source = (r - step + cp) % cp;
            attention_block_spec spec = {span_of(cp, r), span_of(cp, source), 1, T, 0, H, window >= 0, window};
            const float *q = local_qkv + r * rows * C3, *k = kv + source * rows * KV;
            if (step == 0) {
                K->attention_block_forward(o, l, q, k, B, H, G, D, spec, rng);
                continue;
            }
            K->attention_block_forward(block_out, block_lse, q, k, B, H, G, D, spec, rng);
            for (size_t i = 0; i < rows * H; i++) masked_rows += isinf(block_lse[i]) && block_lse[i] < 0;
            K->attention_merge(o, l, block_out, block_lse, B, Tl, H, D);
        }
        for (int step = 0; step < cp; step++) {
            int source = (r - step + cp) % cp;
            attention_block_spec spec = {span_of(cp, r), span_of(cp, source), 1, T, 0, H, window >= 0, window};
            K->attention_block_backward(local_dqkv + r * rows * C3, dkv + source * rows * KV, local_dout + r * rows * HD,
                                        local_qkv + r * rows * C3, kv + source * rows * KV, o, l, B, H, G, D, spec, rng);
        }
    }
    for (int r = 0; r < cp; r++) {
        K->attention_kv_unpack(local_dqkv + r * rows * C3, dkv + r * rows * KV, (int)rows, H, G, D);
        attention_span s = span_of(cp, r);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tl; t++) {
                int g = s.start[t / PIECE] + t % PIECE;
                double d = rel_diff(local_out + (r * rows + (size_t)b * Tl + t) * HD, out + ((size_t)b * T + g) * HD, HD);
                if (d > worst_out) worst_out = d;
                d = rel_diff(local_dqkv + (r * rows + (size_t)b * Tl + t) * C3, dqkv + ((size_t)b * T + g) * C3, C3);
                if (d > worst_dq) worst_dq = d;
            }
    }
    tap_ok(worst_out < 1e-5, "CP%d p=%.1f window %d: every rank's merged ring output equals the whole sequence's (worst %.1e)",
           cp, p, window, worst_out);
    tap_ok(worst_dq < 1e-5, "CP%d p=%.1f window %d: block backwards (query gradients, and key/value ones summed over the "
           "ring) equal the whole sequence's gradient (worst %.1e)", cp, p, window, worst_dq);
    tap_ok(masked_rows > 0, "CP%d: a later rank's block hides it from the first piece (%d rows of lse -inf merged as nothing)",
           cp, masked_rows);
    free(qkv); free(dout); free(out); free(dqkv); free(workspace); free(local_qkv); free(local_dout); free(kv); free(dkv);
    free(local_out); free(lse); free(block_out); free(block_lse); free(local_dqkv);
}

/* columns_to_blocks and blocks_to_columns (the a2a's reshuffles) are each other's inverse and put
 * column block k of row r at block k, row r */
static void check_column_blocks(const kernel_ops *K) {
    enum { ROWS = 5, BLOCKS = 3, WIDTH = 4 };
    float in[ROWS * BLOCKS * WIDTH], blocks[ROWS * BLOCKS * WIDTH], back[ROWS * BLOCKS * WIDTH];
    for (int i = 0; i < ROWS * BLOCKS * WIDTH; i++) in[i] = (float)i;
    K->columns_to_blocks(blocks, in, ROWS, BLOCKS, WIDTH);
    K->blocks_to_columns(back, blocks, ROWS, BLOCKS, WIDTH);
    int placed = 1;
    for (int k = 0; k < BLOCKS; k++)
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < WIDTH; c++)
                placed &= blocks[(k * ROWS + r) * WIDTH + c] == in[r * BLOCKS * WIDTH + k * WIDTH + c];
    tap_ok(placed && memcmp(in, back, sizeof in) == 0,
           "columns_to_blocks puts row r's column block k at block k, row r; blocks_to_columns undoes it");
}

int main(void) {
    const kernel_ops *K = kernels_cpu();
    check_column_blocks(K);
    check_layout(K, 2, 0.0f, -1);
    check_layout(K, 2, 0.3f, -1);
    check_layout(K, 4, 0.3f, -1);
    /* sliding windows: inside a piece (2 < PIECE), across pieces and ranks (4), of one key (0) */
    check_layout(K, 2, 0.3f, 2);
    check_layout(K, 4, 0.3f, 4);
    check_layout(K, 4, 0.0f, 0);
    return tap_done();
}
