/* cpu_attention_padded.c: bidirectional multi-head (or grouped-query) self-attention with a
 * key-padding mask, BERT's encoder attention (Megatron's padding mask, attention_mask_type
 * padding: [b, 1, 1, s]). The math, the qkv layout and the dropout mask indices are
 * cpu_attention.c's with the causal mask replaced by the keys' validity:
 *   preatt[t1,t2] = q[t1].k[t2] / sqrt(D)            for keys with key_valid[b,t2] != 0
 *   att[t1,:]     = softmax over those keys (0 on the others; a row with none: all 0, out 0)
 *   out[t1]       = sum_t2 drop(att)[t1,t2] v[t2]
 * Backward as cpu_attention.c's over the visible keys. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

static inline uint64_t head_base_index(dropout_rng rng, int b, int h, int T, int head_start,
                                       int total_heads) {
    return rng.offset + ((uint64_t)b * total_heads + (uint64_t)(head_start + h)) * T * T;
}

void cpu_attention_padded_forward(float *out, void *workspace, const float *qkv,
                                  const int *key_valid, int B, int T, int H, int G, int D,
                                  int head_start, int total_heads, dropout_rng rng) {
    float *att = (float *)workspace;
    size_t C3 = (size_t)(H + 2 * G) * D, HD = (size_t)H * D;
    int per = H / G;
    float scale = 1.0f / sqrtf((float)D);
    int use_dropout = rng.p > 0.0f;
    float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;

    for (int b = 0; b < B; b++) {
        const int *valid = key_valid + (size_t)b * T;
        for (int h = 0; h < H; h++) {
            uint64_t head_base = head_base_index(rng, b, h, T, head_start, total_heads);
            size_t key_offset = qkv_key_offset(h / per, H, G, D);
            for (int t1 = 0; t1 < T; t1++) {
                const float *q = qkv + ((size_t)b * T + t1) * C3 + qkv_query_offset(h, H, G, D);
                float *att_row = att + (((size_t)b * H + h) * T + t1) * T;
                float maxval = -INFINITY;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!valid[t2]) continue;
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + key_offset;
                    float dot = 0.0f;
                    for (int d = 0; d < D; d++) dot += q[d] * k[d];
                    dot *= scale;
                    att_row[t2] = dot;
                    if (dot > maxval) maxval = dot;
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!valid[t2]) continue;
                    float e = expf(att_row[t2] - maxval);
                    att_row[t2] = e;
                    sum += e;
                }
                float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
                for (int t2 = 0; t2 < T; t2++) att_row[t2] = valid[t2] ? att_row[t2] * inv_sum : 0.0f;

                float *out_bth = out + ((size_t)b * T + t1) * HD + (size_t)h * D;
                for (int d = 0; d < D; d++) out_bth[d] = 0.0f;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!valid[t2]) continue;
                    float a = att_row[t2];
                    if (use_dropout)
                        a = philox_keep_attention(rng.seed, rng.stream, head_base, T, t1, t2, rng.p)
                                ? a * keep_scale : 0.0f;
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + key_offset + D;
                    for (int d = 0; d < D; d++) out_bth[d] += a * v[d];
                }
            }
        }
    }
}

void cpu_attention_padded_backward(float *dqkv, const float *dout, const float *qkv,
                                   const int *key_valid, const void *workspace, int B, int T,
                                   int H, int G, int D, int head_start, int total_heads,
                                   dropout_rng rng) {
    const float *att = (const float *)workspace;
    size_t C3 = (size_t)(H + 2 * G) * D, HD = (size_t)H * D;
    int per = H / G;
    float scale = 1.0f / sqrtf((float)D);
    int use_dropout = rng.p > 0.0f;
    float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;

    for (size_t i = 0; i < (size_t)B * T * C3; i++) dqkv[i] = 0.0f;
    float *datt = malloc((size_t)(T > 0 ? T : 1) * sizeof(float));
    if (datt == NULL)
        KERNELS_FATAL("cpu backend: out of memory allocating %zu bytes", (size_t)T * sizeof(float));

    for (int b = 0; b < B; b++) {
        const int *valid = key_valid + (size_t)b * T;
        for (int h = 0; h < H; h++) {
            uint64_t head_base = head_base_index(rng, b, h, T, head_start, total_heads);
            size_t key_offset = qkv_key_offset(h / per, H, G, D);
            for (int t1 = 0; t1 < T; t1++) {
                const float *att_row = att + (((size_t)b * H + h) * T + t1) * T;
                const float *dout_bth = dout + ((size_t)b * T + t1) * HD + (size_t)h * D;
                size_t q_offset = ((size_t)b * T + t1) * C3 + qkv_query_offset(h, H, G, D);
                const float *q = qkv + q_offset;
                float *dq = dqkv + q_offset;

                float dot_sum = 0.0f;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!valid[t2]) continue;
                    size_t kv = ((size_t)b * T + t2) * C3 + key_offset;
                    const float *v = qkv + kv + D;
                    float *dv = dqkv + kv + D;
                    float m = 1.0f;
                    if (use_dropout)
                        m = philox_keep_attention(rng.seed, rng.stream, head_base, T, t1, t2, rng.p)
                                ? keep_scale : 0.0f;
                    float a = att_row[t2] * m, dd = 0.0f;
                    for (int d = 0; d < D; d++) {
                        dv[d] += a * dout_bth[d];
                        dd += dout_bth[d] * v[d];
                    }
                    datt[t2] = dd * m;
                    dot_sum += att_row[t2] * datt[t2];
                }
                for (int t2 = 0; t2 < T; t2++) {
                    if (!valid[t2]) continue;
                    float dpre = att_row[t2] * (datt[t2] - dot_sum) * scale;
                    size_t kv = ((size_t)b * T + t2) * C3 + key_offset;
                    const float *k = qkv + kv;
                    float *dk = dqkv + kv;
                    for (int d = 0; d < D; d++) {
                        dq[d] += dpre * k[d];
                        dk[d] += dpre * q[d];
                    }
                }
            }
        }
    }
    free(datt);
}
