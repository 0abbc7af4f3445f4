/* cuda_rope.cu: rotary position embeddings on the query and key heads of bf16 or fp16
 * (templates on the element type, cuda_kernels_t.cuh)
 * qkv[B,T,(H+2G)*D] in place, as the CPU reference (kernels/cpu/cpu_rope.c; rope_spec and the
 * grouped qkv layout in kernels/kernels.h). One thread per (token row, rotated head, pair): it
 * reads the pair, turns it by angle = pos * theta_i, pos = (position_start + t) * position_scale
 * (by -angle for the backward, the transpose) in fp32 and writes it back rounded to bf16. The
 * angle is formed in fp32 exactly as on the CPU (rope_inv_freq), with accurate sinf/cosf. */
#include "kernels/cuda/cuda_common.cuh"

template <typename E>
static __global__ void rope_kernel(E *qkv, int T, int H, int G, int D,
                                   rope_spec rope, float sign, size_t total) {
    const int half = rope.rotary_dim / 2, per = H / G, rotated = G * (per + 1);
    const size_t row = (size_t)(H + 2 * G) * D;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx % half);
        const size_t head_and_row = idx / half;
        const int j = (int)(head_and_row % rotated);
        const size_t n = head_and_row / rotated; /* token row b*T + t */
        const int t = (int)(n % T);
        const int group = j / (per + 1), within = j % (per + 1); /* within == per: the key */
        E *head = qkv + n * row + ((size_t)group * (per + 2) + within) * D;
        const float angle = ((float)(rope.position_start + t) * rope.position_scale) * rope_inv_freq(rope, i);
        float s, c;
        sincosf(angle, &s, &c);
        s *= sign;
        const int ia = rope.interleaved ? 2 * i : i, ib = rope.interleaved ? 2 * i + 1 : i + half;
        const float a = to_float(head[ia]), b = to_float(head[ib]);
        head[ia] = from_float<E>(a * c - b * s);
        head[ib] = from_float<E>(b * c + a * s);
    }
}

template <typename E>
static void rope_launch(E *qkv, int B, int T, int H, int G, int D, rope_spec rope, float sign) {
    if (B <= 0 || T <= 0 || rope.rotary_dim < 2) return;
    if (G <= 0 || H % G != 0 || rope.rotary_dim > D || rope.rotary_dim % 2)
        KERNELS_FATAL("cuda rope: %d heads in %d groups of dimension %d cannot rotate %d channels",
                      H, G, D, rope.rotary_dim);
    const size_t total = (size_t)B * T * G * (H / G + 1) * (rope.rotary_dim / 2);
    rope_kernel<<<grid_stride_blocks(total, 256), 256, 0, compute_stream()>>>(
        qkv, T, H, G, D, rope, sign, total);
    CHECK_LAUNCH();
}

template <typename E>
static void rope_forward_t(E *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_launch(qkv, B, T, H, G, D, rope, 1.0f);
}

template <typename E>
static void rope_backward_t(E *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_launch(dqkv, B, T, H, G, D, rope, -1.0f);
}

/* ---- the C entry points: bf16 (cuda_X) and fp16 (cuda_X_fp16), cuda_kernels.h ---- */

extern "C" void cuda_rope_forward(bf16 *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_forward_t(as_nv(qkv), B, T, H, G, D, rope);
}

extern "C" void cuda_rope_forward_fp16(fp16 *qkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_forward_t(as_half(qkv), B, T, H, G, D, rope);
}

extern "C" void cuda_rope_backward(bf16 *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_backward_t(as_nv(dqkv), B, T, H, G, D, rope);
}

extern "C" void cuda_rope_backward_fp16(fp16 *dqkv, int B, int T, int H, int G, int D, rope_spec rope) {
    rope_backward_t(as_half(dqkv), B, T, H, G, D, rope);
}
