/* cpu_attention.c: causal multi-head (or grouped-query) self-attention with dropout on the
 * probabilities, optionally within a sliding window. qkv[B,T,(H+2G)*D] holds H query heads in G groups (kernels.h: per group its
 * query heads, then its key and value head); query head h reads its group's k, v in place;
 * out[B,T,H,D]. With G == H it is ordinary multi-head attention.
 *   preatt[t1,t2] = q[t1].k[t2] / sqrt(D)                       (t2 <= t1; later keys masked)
 * With a sliding window (window_left >= 0: Megatron's --window-size (window_left, 0), as Transformer
 * Engine's causal window) the keys before t1 - window_left are masked too: t2 runs over
 * first_key(t1) .. t1 and att is 0 outside. The dropout numbering is the same either way.
 *   att[t1,:]     = softmax(preatt[t1,:])                        (kept in the workspace)
 *   out[t1]       = sum_t2 drop(att)[t1,t2] v[t2],  drop(a) = a * keep / (1 - p)
 * The keep bit of probability (b, head, t1, t2) is philox_keep_attention of element number
 * rng.offset + ((b*total_heads + head_start + h)*T + t1)*T + t2 (2 x 4 blocks of (t1, t2) share a
 * Philox4x32-7 call, 16 bits each, kernels/philox.h), i.e. indexed by the GLOBAL head, so the
 * mask does not depend on how heads are split over tensor-parallel ranks.
 * Backward (softmax Jacobian: d att_i / d preatt_j = att_i (delta_ij - att_j)):
 *   dv[t2] += drop(att)[t1,t2] dout[t1];  datt[t1,t2] = keep/(1-p) * dout[t1].v[t2]
 *   dpreatt = att * (datt - sum_t2 att*datt);  dq[t1] += dpreatt k[t2]/sqrt(D), dk[t2] += dpreatt q[t1]/sqrt(D)
 * (a group's dk, dv accumulate over its query heads) */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

size_t cpu_attention_workspace_bytes(int B, int T, int H, int D) {
    (void)D;
    return (size_t)B * H * T * T * sizeof(float);
}

/* the first key the query at t1 sees: t1 - window_left inside a sliding window, else 0 */
static inline int first_key(int t1, int window_left) {
    return window_left >= 0 && t1 > window_left ? t1 - window_left : 0;
}

/* counter of probability (b, h, t1, t2) relative to rng.offset */
static inline uint64_t att_index(int b, int h, int t1, int t2, int T, int head_start,
                                 int total_heads) {
    return (((uint64_t)b * total_heads + (uint64_t)(head_start + h)) * T + (uint64_t)t1) * T +
           (uint64_t)t2;
}

void cpu_attention_forward(float *out, void *workspace, const float *qkv, int B, int T, int H,
                           int G, int D, int head_start, int total_heads, int window_left, dropout_rng rng) {
    float *att = (float *)workspace;
    size_t C3 = (size_t)(H + 2 * G) * D; /* qkv row length */
    int per = H / G;
    size_t HD = (size_t)H * D;     /* out row length */
    float scale = 1.0f / sqrtf((float)D);
    int use_dropout = rng.p > 0.0f;
    float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;

    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int t1 = 0; t1 < T; t1++) {
                const float *q = qkv + ((size_t)b * T + t1) * C3 + qkv_query_offset(h, H, G, D);
                size_t key_offset = qkv_key_offset(h / per, H, G, D);
                float *att_row = att + (((size_t)b * H + h) * T + t1) * T;
                int first = first_key(t1, window_left);

                /* scores and their max (for a stable softmax) */
                float maxval = -INFINITY;
                for (int t2 = first; t2 <= t1; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * C3 + key_offset;
                    float dot = 0.0f;
                    for (int d = 0; d < D; d++) dot += q[d] * k[d];
                    dot *= scale;
                    att_row[t2] = dot;
                    if (dot > maxval) maxval = dot;
                }
                float sum = 0.0f;
                for (int t2 = first; t2 <= t1; t2++) {
                    float e = expf(att_row[t2] - maxval);
                    att_row[t2] = e;
                    sum += e;
                }
                float inv_sum = 1.0f / sum;
                for (int t2 = 0; t2 < T; t2++) att_row[t2] = t2 >= first && t2 <= t1 ? att_row[t2] * inv_sum : 0.0f;

                /* weighted sum of values with the dropped-out probabilities */
                float *out_bth = out + ((size_t)b * T + t1) * HD + (size_t)h * D;
                for (int d = 0; d < D; d++) out_bth[d] = 0.0f;
                for (int t2 = first; t2 <= t1; t2++) {
                    float a = att_row[t2];
                    if (use_dropout) {
                        uint64_t head_base = rng.offset + att_index(b, h, 0, 0, T, head_start, total_heads);
                        a = philox_keep_attention(rng.seed, rng.stream, head_base, T, t1, t2, rng.p)
                                ? a * keep_scale : 0.0f;
                    }
                    const float *v = qkv + ((size_t)b * T + t2) * C3 + key_offset + D;
                    for (int d = 0; d < D; d++) out_bth[d] += a * v[d];
                }
            }
        }
    }
}

void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                            const void *workspace, int B, int T, int H, int G, int D,
                            int head_start, int total_heads, int window_left, dropout_rng rng) {
    const float *att = (const float *)workspace;
    size_t C3 = (size_t)(H + 2 * G) * D;
    int per = H / G;
    size_t HD = (size_t)H * D;
    float scale = 1.0f / sqrtf((float)D);
    int use_dropout = rng.p > 0.0f;
    float keep_scale = use_dropout ? 1.0f / (1.0f - rng.p) : 1.0f;

    /* overwrite semantics: start from zero, then accumulate over (t1, t2) pairs */
    for (size_t i = 0; i < (size_t)B * T * C3; i++) dqkv[i] = 0.0f;

    float *datt = malloc((size_t)(T > 0 ? T : 1) * sizeof(float)); /* d loss / d att, one row */
    if (datt == NULL)
        KERNELS_FATAL("cpu backend: out of memory allocating %zu bytes", (size_t)T * sizeof(float));

    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int t1 = 0; t1 < T; t1++) {
                const float *att_row = att + (((size_t)b * H + h) * T + t1) * T;
                const float *dout_bth = dout + ((size_t)b * T + t1) * HD + (size_t)h * D;
                size_t q_offset = ((size_t)b * T + t1) * C3 + qkv_query_offset(h, H, G, D);
                size_t key_offset = qkv_key_offset(h / per, H, G, D);
                const float *q = qkv + q_offset;
                float *dq = dqkv + q_offset;
                int first = first_key(t1, window_left);

                /* backward through out = drop(att) v, then through the dropout */
                float dot_sum = 0.0f; /* sum_t2 att * datt */
                for (int t2 = first; t2 <= t1; t2++) {
                    size_t kv = ((size_t)b * T + t2) * C3 + key_offset;
                    const float *v = qkv + kv + D;
                    float *dv = dqkv + kv + D;
                    float m = 1.0f; /* d drop(a) / d a */
                    if (use_dropout) {
                        uint64_t head_base = rng.offset + att_index(b, h, 0, 0, T, head_start, total_heads);
                        m = philox_keep_attention(rng.seed, rng.stream, head_base, T, t1, t2, rng.p)
                                ? keep_scale : 0.0f;
                    }
                    float a = att_row[t2] * m;
                    float dd = 0.0f;
                    for (int d = 0; d < D; d++) {
                        dv[d] += a * dout_bth[d];
                        dd += dout_bth[d] * v[d];
                    }
                    datt[t2] = dd * m;
                    dot_sum += att_row[t2] * datt[t2];
                }

                /* backward through the softmax and the scaled dot products */
                for (int t2 = first; t2 <= t1; t2++) {
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
