/* cpu_attention_padded.c: attention with a key-padding mask, bidirectional (no causal mask):
 * BERT's encoder self-attention and T5's encoder self-attention (Megatron's padding mask,
 * attention_mask_type padding: [b, 1, 1, s]) and T5's decoder cross-attention (queries of the
 * decoder over the encoder's keys and values, the encoder's padding mask); and self-attention
 * with an additive score bias [H,Tq,Tk] (T5's relative position bias, Transformer Engine's
 * post_scale_bias), under the padding mask or causal. One core serves all; they differ in where
 * the heads sit:
 *   self-attention:  q, k, v in one qkv[B,T,(H+2G)*D] row (qkv_query_offset, qkv_key_offset)
 *   cross-attention: q[B,Tq,H*D] (linear_q) and kv[B,Tk,H*2D] (linear_kv: per head its key then
 *                    its value, Megatron-Core's CrossAttention layout)
 * The math, per (b, head), with the dropout mask of cpu_attention.c numbered over Tq x Tk:
 *   preatt[t1,t2] = q[t1].k[t2] / sqrt(D) (+ bias[h,t1,t2])
 *                   for the visible keys: key_valid[b,t2] != 0 (no key_valid: all), and t2 <= t1
 *                   when causal
 *   att[t1,:]     = softmax over those keys (0 on the others; a row with none: all 0, out 0)
 *   out[t1]       = sum_t2 drop(att)[t1,t2] v[t2]
 * Backward (softmax's Jacobian): dv += drop(att)^T dout; datt = drop'(dout v^T);
 *   dscore = att * (datt - rowsum(att * datt))  (the bias's gradient, summed over b)
 *   dpre = dscore / sqrt(D); dq = dpre k; dk = dpre^T q. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/philox.h"

/* where the operands of head h sit: rows of q_row (queries) and kv_row (keys, values) elements,
 * the query head at q_offset[h], its key head at k_offset[h] and value head D after it */
typedef struct attention_operands {
    int B, Tq, Tk, H, D;
    size_t q_row, kv_row;
    const size_t *q_offset, *k_offset;
    int head_start, total_heads;
    int causal;           /* keys after the query masked */
    const float *bias;    /* [H,Tq,Tk] added to the scaled scores, or NULL */
} attention_operands;

/* the key t2 is visible from query t1 of a sample whose padding mask is valid (NULL: none) */
static inline int visible(const attention_operands *o, const int *valid, int t1, int t2) {
    return (!valid || valid[t2]) && (!o->causal || t2 <= t1);
}

static inline uint64_t head_base_index(dropout_rng rng, const attention_operands *o, int b, int h) {
    return rng.offset + ((uint64_t)b * o->total_heads + (uint64_t)(o->head_start + h)) * o->Tq * o->Tk;
}

static float keep_factor(dropout_rng rng, uint64_t head_base, int Tk, int t1, int t2) {
    if (rng.p <= 0.0f) return 1.0f;
    return philox_keep_attention(rng.seed, rng.stream, head_base, Tk, t1, t2, rng.p) ? 1.0f / (1.0f - rng.p) : 0.0f;
}

/* out[B,Tq,H*D]; att (the workspace) [B,H,Tq,Tk] keeps the probabilities for the backward */
static void padded_forward(const attention_operands *o, float *out, float *att, const float *q_all,
                           const float *kv_all, const int *key_valid, dropout_rng rng) {
    int Tq = o->Tq, Tk = o->Tk, H = o->H, D = o->D;
    size_t HD = (size_t)H * D;
    float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < o->B; b++) {
        const int *valid = key_valid ? key_valid + (size_t)b * Tk : NULL;
        for (int h = 0; h < H; h++) {
            uint64_t head_base = head_base_index(rng, o, b, h);
            for (int t1 = 0; t1 < Tq; t1++) {
                const float *q = q_all + ((size_t)b * Tq + t1) * o->q_row + o->q_offset[h];
                float *att_row = att + (((size_t)b * H + h) * Tq + t1) * Tk;
                const float *bias_row = o->bias ? o->bias + ((size_t)h * Tq + t1) * Tk : NULL;
                float maxval = -INFINITY;
                for (int t2 = 0; t2 < Tk; t2++) {
                    if (!visible(o, valid, t1, t2)) continue;
                    const float *k = kv_all + ((size_t)b * Tk + t2) * o->kv_row + o->k_offset[h];
                    float dot = 0.0f;
                    for (int d = 0; d < D; d++) dot += q[d] * k[d];
                    dot *= scale;
                    if (bias_row) dot += bias_row[t2];
                    att_row[t2] = dot;
                    if (dot > maxval) maxval = dot;
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 < Tk; t2++) {
                    if (!visible(o, valid, t1, t2)) continue;
                    float e = expf(att_row[t2] - maxval);
                    att_row[t2] = e;
                    sum += e;
                }
                float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
                for (int t2 = 0; t2 < Tk; t2++) att_row[t2] = visible(o, valid, t1, t2) ? att_row[t2] * inv_sum : 0.0f;

                float *out_bth = out + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
                for (int d = 0; d < D; d++) out_bth[d] = 0.0f;
                for (int t2 = 0; t2 < Tk; t2++) {
                    if (!visible(o, valid, t1, t2)) continue;
                    float a = att_row[t2] * keep_factor(rng, head_base, Tk, t1, t2);
                    const float *v = kv_all + ((size_t)b * Tk + t2) * o->kv_row + o->k_offset[h] + D;
                    for (int d = 0; d < D; d++) out_bth[d] += a * v[d];
                }
            }
        }
    }
}

/* dq (rows as q) and dkv (rows as kv) += the gradients (the caller clears them first), and
 * dscore_bias [H,Tq,Tk] (NULL: none) += the scores' gradient summed over the batch */
static void padded_backward(const attention_operands *o, float *dq_all, float *dkv_all, float *dscore_bias,
                            const float *dout, const float *q_all, const float *kv_all, const int *key_valid,
                            const float *att, dropout_rng rng) {
    int Tq = o->Tq, Tk = o->Tk, H = o->H, D = o->D;
    size_t HD = (size_t)H * D;
    float scale = 1.0f / sqrtf((float)D);
    float *datt = malloc((size_t)(Tk > 0 ? Tk : 1) * sizeof(float));
    if (datt == NULL)
        KERNELS_FATAL("cpu backend: out of memory allocating %zu bytes", (size_t)Tk * sizeof(float));
    for (int b = 0; b < o->B; b++) {
        const int *valid = key_valid ? key_valid + (size_t)b * Tk : NULL;
        for (int h = 0; h < H; h++) {
            uint64_t head_base = head_base_index(rng, o, b, h);
            for (int t1 = 0; t1 < Tq; t1++) {
                float *dscore_row = dscore_bias ? dscore_bias + ((size_t)h * Tq + t1) * Tk : NULL;
                const float *att_row = att + (((size_t)b * H + h) * Tq + t1) * Tk;
                const float *dout_bth = dout + ((size_t)b * Tq + t1) * HD + (size_t)h * D;
                size_t q_at = ((size_t)b * Tq + t1) * o->q_row + o->q_offset[h];
                const float *q = q_all + q_at;
                float *dq = dq_all + q_at;
                float dot_sum = 0.0f;
                for (int t2 = 0; t2 < Tk; t2++) {
                    if (!visible(o, valid, t1, t2)) continue;
                    size_t kv = ((size_t)b * Tk + t2) * o->kv_row + o->k_offset[h];
                    const float *v = kv_all + kv + D;
                    float *dv = dkv_all + kv + D;
                    float m = keep_factor(rng, head_base, Tk, t1, t2);
                    float a = att_row[t2] * m, dd = 0.0f;
                    for (int d = 0; d < D; d++) {
                        dv[d] += a * dout_bth[d];
                        dd += dout_bth[d] * v[d];
                    }
                    datt[t2] = dd * m;
                    dot_sum += att_row[t2] * datt[t2];
                }
                for (int t2 = 0; t2 < Tk; t2++) {
                    if (!visible(o, valid, t1, t2)) continue;
                    float dscore = att_row[t2] * (datt[t2] - dot_sum);
                    if (dscore_row) dscore_row[t2] += dscore;
                    float dpre = dscore * scale;
                    size_t kv = ((size_t)b * Tk + t2) * o->kv_row + o->k_offset[h];
                    const float *k = kv_all + kv;
                    float *dk = dkv_all + kv;
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

/* the head offsets of either layout: [0, H) queries, [H, 2H) keys (malloc'd; the caller frees) */
static size_t *head_offsets(int H, int G, int D, int cross) {
    size_t *offsets = malloc(sizeof(size_t) * 2 * (size_t)(H > 0 ? H : 1));
    if (offsets == NULL) KERNELS_FATAL("cpu backend: out of memory for %d attention heads", H);
    for (int h = 0; h < H; h++) {
        offsets[h] = cross ? (size_t)h * D : qkv_query_offset(h, H, G, D);
        offsets[H + h] = cross ? (size_t)h * 2 * D : qkv_key_offset(h / (H / G), H, G, D);
    }
    return offsets;
}

static attention_operands self_operands(const size_t *offsets, int B, int T, int H, int G, int D, int head_start,
                                        int total_heads) {
    size_t row = (size_t)(H + 2 * G) * D;
    attention_operands o = {B, T, T, H, D, row, row, offsets, offsets + H, head_start, total_heads, 0, NULL};
    return o;
}

void cpu_attention_padded_forward(float *out, void *workspace, const float *qkv,
                                  const int *key_valid, int B, int T, int H, int G, int D,
                                  int head_start, int total_heads, dropout_rng rng) {
    size_t *offsets = head_offsets(H, G, D, 0);
    attention_operands o = self_operands(offsets, B, T, H, G, D, head_start, total_heads);
    padded_forward(&o, out, (float *)workspace, qkv, qkv, key_valid, rng);
    free(offsets);
}

void cpu_attention_padded_backward(float *dqkv, const float *dout, const float *qkv,
                                   const int *key_valid, const void *workspace, int B, int T,
                                   int H, int G, int D, int head_start, int total_heads,
                                   dropout_rng rng) {
    for (size_t i = 0; i < (size_t)B * T * (size_t)(H + 2 * G) * D; i++) dqkv[i] = 0.0f;
    size_t *offsets = head_offsets(H, G, D, 0);
    attention_operands o = self_operands(offsets, B, T, H, G, D, head_start, total_heads);
    padded_backward(&o, dqkv, dqkv, NULL, dout, qkv, qkv, key_valid, (const float *)workspace, rng);
    free(offsets);
}

void cpu_attention_bias_forward(float *out, void *workspace, const float *qkv, const int *key_valid,
                                const float *bias, int causal, int B, int T, int H, int G, int D,
                                int head_start, int total_heads, dropout_rng rng) {
    size_t *offsets = head_offsets(H, G, D, 0);
    attention_operands o = self_operands(offsets, B, T, H, G, D, head_start, total_heads);
    o.causal = causal;
    o.bias = bias;
    padded_forward(&o, out, (float *)workspace, qkv, qkv, key_valid, rng);
    free(offsets);
}

void cpu_attention_bias_backward(float *dqkv, float *dscore_bias, const float *dout, const float *qkv,
                                 const int *key_valid, int causal, const void *workspace, int B, int T,
                                 int H, int G, int D, int head_start, int total_heads, dropout_rng rng) {
    for (size_t i = 0; i < (size_t)B * T * (size_t)(H + 2 * G) * D; i++) dqkv[i] = 0.0f;
    size_t *offsets = head_offsets(H, G, D, 0);
    attention_operands o = self_operands(offsets, B, T, H, G, D, head_start, total_heads);
    o.causal = causal;
    padded_backward(&o, dqkv, dqkv, dscore_bias, dout, qkv, qkv, key_valid, (const float *)workspace, rng);
    free(offsets);
}

size_t cpu_cross_attention_workspace_bytes(int B, int Tq, int Tk, int H) {
    return sizeof(float) * (size_t)B * (size_t)H * (size_t)Tq * (size_t)Tk;
}

void cpu_cross_attention_forward(float *out, void *workspace, const float *q, const float *kv,
                                 const int *key_valid, int B, int Tq, int Tk, int H, int D,
                                 int head_start, int total_heads, dropout_rng rng) {
    size_t *offsets = head_offsets(H, H, D, 1);
    attention_operands o = {B, Tq, Tk, H, D, (size_t)H * D, (size_t)H * 2 * D, offsets, offsets + H,
                            head_start, total_heads, 0, NULL};
    padded_forward(&o, out, (float *)workspace, q, kv, key_valid, rng);
    free(offsets);
}

void cpu_cross_attention_backward(float *dq, float *dkv, const float *dout, const float *q,
                                  const float *kv, const int *key_valid, const void *workspace,
                                  int B, int Tq, int Tk, int H, int D, int head_start,
                                  int total_heads, dropout_rng rng) {
    for (size_t i = 0; i < (size_t)B * Tq * (size_t)H * D; i++) dq[i] = 0.0f;
    for (size_t i = 0; i < (size_t)B * Tk * (size_t)H * 2 * D; i++) dkv[i] = 0.0f;
    size_t *offsets = head_offsets(H, H, D, 1);
    attention_operands o = {B, Tq, Tk, H, D, (size_t)H * D, (size_t)H * 2 * D, offsets, offsets + H,
                            head_start, total_heads, 0, NULL};
    padded_backward(&o, dq, dkv, NULL, dout, q, kv, key_valid, (const float *)workspace, rng);
    free(offsets);
}
