/* cpu_attention_block.c: ring attention's pieces for context parallelism (kernels.h, "ring
 * attention over blocks"): the attention of a rank's query rows over one block of key/value rows
 * with its log-sum-exp, the merge of two such partial results, and the block's backward from the
 * merged output (flash attention's formulation). Positions are global (attention_span), so the
 * causal mask and the dropout mask are those of one rank holding the whole sequence:
 *   s[t1,t2] = q[t1].k[t2] / sqrt(D) over visible keys (causal: pos(t2) <= pos(t1); with a
 *              sliding window also pos(t2) >= pos(t1) - window_left)
 *   lse[t1]  = log sum_t2 exp(s);  out[t1] = sum_t2 drop(exp(s - lse)) v[t2]
 * Merging blocks a and b: L = log(e^lse_a + e^lse_b), out = out_a e^(lse_a - L) + out_b e^(lse_b - L)
 * (each block's probabilities rescaled to the union's normalizer; dropout is linear in them).
 * Backward with the union's out and lse: P = exp(s - lse), dP = keep/(1-p) dout.v,
 * dS = P (dP - dout.out)  (sum_t2 P drop'(dout.v) = dout.out),
 * dq += dS k / sqrt(D), dk += dS q / sqrt(D), dv += drop(P) dout.
 * Also the column-block reshuffles of --cp-comm-type a2a (columns_to_blocks, blocks_to_columns). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

/* global position of row t of a sequence in a span */
static inline int span_position(const attention_span *s, int t) {
    return s->start[t / s->piece_length] + t % s->piece_length;
}

/* the keys j of piece p that the query at position pq sees are first_visible <= j < end_visible:
 * up to its own position when causal, from pq - window_left with a sliding window */
static inline int end_visible(const attention_block_spec *spec, int p, int pq) {
    int length = spec->k.piece_length;
    if (!spec->causal) return length;
    int count = pq - spec->k.start[p] + 1;
    return count < 0 ? 0 : count > length ? length : count;
}
static inline int first_visible(const attention_block_spec *spec, int p, int pq) {
    if (!spec->windowed || spec->window_left < 0) return 0;
    int first = pq - spec->window_left - spec->k.start[p];
    int length = spec->k.piece_length;
    return first < 0 ? 0 : first > length ? length : first;
}

void cpu_columns_to_blocks(float *out, const float *in, int rows, int blocks, int width) {
    for (size_t k = 0; k < (size_t)blocks; k++)
        for (size_t r = 0; r < (size_t)rows; r++)
            memcpy(out + (k * rows + r) * width, in + (r * blocks + k) * width, sizeof(float) * (size_t)width);
}

void cpu_blocks_to_columns(float *out, const float *in, int rows, int blocks, int width) {
    for (size_t k = 0; k < (size_t)blocks; k++)
        for (size_t r = 0; r < (size_t)rows; r++)
            memcpy(out + (r * blocks + k) * width, in + (k * rows + r) * width, sizeof(float) * (size_t)width);
}

void cpu_attention_kv_pack(float *kv, const float *qkv, int rows, int H, int G, int D) {
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D;
    for (size_t r = 0; r < (size_t)rows; r++)
        for (int g = 0; g < G; g++)
            memcpy(kv + r * KV + (size_t)g * 2 * D, qkv + r * C3 + qkv_key_offset(g, H, G, D), sizeof(float) * 2 * (size_t)D);
}

void cpu_attention_kv_unpack(float *dqkv, const float *dkv, int rows, int H, int G, int D) {
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D;
    for (size_t r = 0; r < (size_t)rows; r++)
        for (int g = 0; g < G; g++)
            memcpy(dqkv + r * C3 + qkv_key_offset(g, H, G, D), dkv + r * KV + (size_t)g * 2 * D, sizeof(float) * 2 * (size_t)D);
}

/* the keep factor of probability (b, head, pq, pk): keep/(1-p), or 1 without dropout */
static inline float dropout_factor(const dropout_rng *rng, const attention_block_spec *spec, int b, int h, int pq,
                                   int pk) {
    if (rng->p <= 0.0f) return 1.0f;
    uint64_t T = (uint64_t)spec->total_T;
    uint64_t head_base = rng->offset + ((uint64_t)b * (uint64_t)spec->total_heads + (uint64_t)(spec->head_start + h)) * T * T;
    return philox_keep_attention(rng->seed, rng->stream, head_base, spec->total_T, pq, pk, rng->p) ? 1.0f / (1.0f - rng->p)
                                                                                                    : 0.0f;
}

void cpu_attention_block_forward(float *out, float *lse, const float *qkv, const float *kv, int B, int H, int G,
                                 int D, attention_block_spec spec, dropout_rng rng) {
    int Tq = spec.q.pieces * spec.q.piece_length, Tk = spec.k.pieces * spec.k.piece_length;
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    int per = H / G;
    float scale = 1.0f / sqrtf((float)D);
    float *scores = malloc(sizeof(float) * (size_t)(Tk > 0 ? Tk : 1));
    if (!scores) KERNELS_FATAL("cpu backend: out of memory for %d attention scores", Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t1 = 0; t1 < Tq; t1++) {
                const float *q = qkv + ((size_t)b * Tq + t1) * C3 + qkv_query_offset(h, H, G, D);
                const float *kv_b = kv + (size_t)b * Tk * KV + (size_t)(h / per) * 2 * D;
                int pq = span_position(&spec.q, t1);
                float maxval = -INFINITY;
                for (int p = 0; p < spec.k.pieces; p++)
                    for (int j = first_visible(&spec, p, pq), n = end_visible(&spec, p, pq); j < n; j++) {
                        int t2 = p * spec.k.piece_length + j;
                        const float *k = kv_b + (size_t)t2 * KV;
                        float dot = 0.0f;
                        for (int d = 0; d < D; d++) dot += q[d] * k[d];
                        scores[t2] = dot * scale;
                        if (scores[t2] > maxval) maxval = scores[t2];
                    }
                float *o = out + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
                for (int d = 0; d < D; d++) o[d] = 0.0f;
                float *l = lse + ((size_t)b * H + h) * Tq + t1;
                if (maxval == -INFINITY) { *l = -INFINITY; continue; }
                float sum = 0.0f;
                for (int p = 0; p < spec.k.pieces; p++)
                    for (int j = first_visible(&spec, p, pq), n = end_visible(&spec, p, pq); j < n; j++) {
                        float *e = &scores[p * spec.k.piece_length + j];
                        *e = expf(*e - maxval);
                        sum += *e;
                    }
                *l = maxval + logf(sum);
                float inv_sum = 1.0f / sum;
                for (int p = 0; p < spec.k.pieces; p++)
                    for (int j = first_visible(&spec, p, pq), n = end_visible(&spec, p, pq); j < n; j++) {
                        int t2 = p * spec.k.piece_length + j;
                        float a = scores[t2] * inv_sum * dropout_factor(&rng, &spec, b, h, pq, span_position(&spec.k, t2));
                        const float *v = kv_b + (size_t)t2 * KV + D;
                        for (int d = 0; d < D; d++) o[d] += a * v[d];
                    }
            }
    free(scores);
}

void cpu_attention_merge(float *out, float *lse, const float *block_out, const float *block_lse, int B, int T, int H,
                         int D) {
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                float *l = lse + ((size_t)b * H + h) * T + t;
                float bl = block_lse[((size_t)b * H + h) * T + t];
                if (bl == -INFINITY) continue;  /* the block adds nothing to this row */
                float m = *l > bl ? *l : bl;
                float merged = m + logf(expf(*l - m) + expf(bl - m));
                float wa = expf(*l - merged), wb = expf(bl - merged);
                float *o = out + ((size_t)b * T + t) * (size_t)H * D + (size_t)h * D;
                const float *bo = block_out + ((size_t)b * T + t) * (size_t)H * D + (size_t)h * D;
                for (int d = 0; d < D; d++) o[d] = o[d] * wa + bo[d] * wb;
                *l = merged;
            }
}

void cpu_attention_block_backward(float *dqkv, float *dkv, const float *dout, const float *qkv, const float *kv,
                                  const float *out, const float *lse, int B, int H, int G, int D,
                                  attention_block_spec spec, dropout_rng rng) {
    int Tq = spec.q.pieces * spec.q.piece_length, Tk = spec.k.pieces * spec.k.piece_length;
    size_t C3 = (size_t)(H + 2 * G) * D, KV = (size_t)2 * G * D, HD = (size_t)H * D;
    int per = H / G;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t1 = 0; t1 < Tq; t1++) {
                float row_lse = lse[((size_t)b * H + h) * Tq + t1];
                if (row_lse == -INFINITY) continue;
                size_t q_offset = ((size_t)b * Tq + t1) * C3 + qkv_query_offset(h, H, G, D);
                const float *q = qkv + q_offset;
                float *dq = dqkv + q_offset;
                const float *o = out + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
                const float *dO = dout + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
                size_t group = (size_t)b * Tk * KV + (size_t)(h / per) * 2 * D;
                float delta = 0.0f;  /* dout . out */
                for (int d = 0; d < D; d++) delta += dO[d] * o[d];
                int pq = span_position(&spec.q, t1);
                for (int p = 0; p < spec.k.pieces; p++)
                    for (int j = first_visible(&spec, p, pq), n = end_visible(&spec, p, pq); j < n; j++) {
                        int t2 = p * spec.k.piece_length + j;
                        const float *k = kv + group + (size_t)t2 * KV, *v = k + D;
                        float *dk = dkv + group + (size_t)t2 * KV, *dv = dk + D;
                        float dot = 0.0f, dp = 0.0f;
                        for (int d = 0; d < D; d++) { dot += q[d] * k[d]; dp += dO[d] * v[d]; }
                        float prob = expf(dot * scale - row_lse);
                        float m = dropout_factor(&rng, &spec, b, h, pq, span_position(&spec.k, t2));
                        float ds = prob * (m * dp - delta) * scale;
                        for (int d = 0; d < D; d++) {
                            dv[d] += prob * m * dO[d];
                            dq[d] += ds * k[d];
                            dk[d] += ds * q[d];
                        }
                    }
            }
}
