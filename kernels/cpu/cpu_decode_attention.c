/* cpu_decode_attention.c: causal attention of new tokens over a key/value cache (generation).
 * qkv[B,Tq,(H+2G)*D] (kernels.h's grouped layout: per group its H/G query heads, its key head,
 * its value head) holds the new tokens at positions [past, past+Tq) of every sequence. Their
 * keys and values are first stored in k_cache, v_cache [B,max_len,G,D]; then, for new token t at
 * position p = past + t and query head h of group g = h/(H/G),
 *   out[b,t,h] = sum_{j <= p} softmax_j(q . k_cache[b,j,g] / sqrt(D)) v_cache[b,j,g]
 * which is what cpu_attention.c computes for row p of the whole sequence (no dropout: inference);
 * with a sliding window (window_left >= 0) j runs over p - window_left .. p only, as there. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_decode_attention(float *out, float *k_cache, float *v_cache, const float *qkv, int B,
                          int Tq, int H, int G, int D, int past, int max_len, int window_left) {
    size_t row = (size_t)(H + 2 * G) * D, HD = (size_t)H * D;
    int per = H / G;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tq; t++)
            for (int g = 0; g < G; g++) {
                const float *src = qkv + ((size_t)b * Tq + t) * row + qkv_key_offset(g, H, G, D);
                size_t dst = (((size_t)b * max_len + (size_t)(past + t)) * G + g) * D;
                memcpy(k_cache + dst, src, sizeof(float) * (size_t)D);
                memcpy(v_cache + dst, src + D, sizeof(float) * (size_t)D);
            }
    float scale = 1.0f / sqrtf((float)D);
    float stack_scores[4096];
    float *scores = stack_scores;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tq; t++)
            for (int h = 0; h < H; h++) {
                const float *q = qkv + ((size_t)b * Tq + t) * row + qkv_query_offset(h, H, G, D);
                float *o = out + ((size_t)b * Tq + t) * HD + (size_t)h * D;
                int g = h / per, keys = past + t + 1;
                int first = window_left >= 0 && past + t > window_left ? past + t - window_left : 0;
                float maxval = -INFINITY, sum = 0.0f;
                for (int d = 0; d < D; d++) o[d] = 0.0f;
                /* in blocks of the stack buffer: an online softmax keeps any cache length */
                for (int j0 = first; j0 < keys; j0 += 4096) {
                    int j1 = j0 + 4096 < keys ? j0 + 4096 : keys;
                    float block_max = -INFINITY;
                    for (int j = j0; j < j1; j++) {
                        const float *k = k_cache + (((size_t)b * max_len + j) * G + g) * D;
                        float dot = 0.0f;
                        for (int d = 0; d < D; d++) dot += q[d] * k[d];
                        scores[j - j0] = dot * scale;
                        if (scores[j - j0] > block_max) block_max = scores[j - j0];
                    }
                    float new_max = block_max > maxval ? block_max : maxval;
                    float rescale = expf(maxval - new_max); /* 0 on the first block */
                    sum *= rescale;
                    for (int d = 0; d < D; d++) o[d] *= rescale;
                    maxval = new_max;
                    for (int j = j0; j < j1; j++) {
                        float e = expf(scores[j - j0] - maxval);
                        sum += e;
                        const float *v = v_cache + (((size_t)b * max_len + j) * G + g) * D;
                        for (int d = 0; d < D; d++) o[d] += e * v[d];
                    }
                }
                float inv = 1.0f / sum;
                for (int d = 0; d < D; d++) o[d] *= inv;
            }
}
