/* cpu_rope.c: rotary position embeddings on the query and key heads of qkv[B,T,(H+2G)*D] in place
 * (kernels.h: rope_spec, the grouped qkv layout). Forward turns pair (a, b) of a head by
 * angle = pos * theta_i; the backward is the transpose of that rotation, i.e. the same turn by
 * -angle, applied to the gradient. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

static void rotate(float *qkv, int B, int T, int H, int G, int D, rope_spec rope, float sign) {
    size_t row = (size_t)(H + 2 * G) * (size_t)D;
    int half = rope.rotary_dim / 2, per = H / G;
    for (int t = 0; t < T; t++) {
        float pos = (float)(rope.position_start + t) * rope.position_scale;
        for (int i = 0; i < half; i++) {
            float angle = pos * rope_inv_freq(rope, i);
            float c = cosf(angle), s = sign * sinf(angle);
            int ia = rope.interleaved ? 2 * i : i, ib = rope.interleaved ? 2 * i + 1 : i + half;
            for (int b = 0; b < B; b++) {
                float *x = qkv + ((size_t)b * T + t) * row;
                /* each group's H/G query heads and its key head sit side by side */
                for (int g = 0; g < G; g++)
                    for (int j = 0; j <= per; j++) {
                        float *head = x + ((size_t)g * (per + 2) + j) * D;
                        float a = head[ia], bb = head[ib];
                        head[ia] = a * c - bb * s;
                        head[ib] = bb * c + a * s;
                    }
            }
        }
    }
}

void cpu_rope_forward(float *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rotate(qkv, B, T, H, G, D, rope, 1.0f);
}

void cpu_rope_backward(float *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rotate(dqkv, B, T, H, G, D, rope, -1.0f);
}
