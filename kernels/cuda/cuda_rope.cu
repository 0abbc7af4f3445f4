/* cuda_rope.cu: rotary position embeddings on the query and key heads of bf16 or fp16
 * (templates on the element type, cuda_kernels_t.cuh)
 * qkv[B,T,(H+2G)*D] in place, as the CPU reference (kernels/cpu/cpu_rope.c; rope_spec and the
 * grouped qkv layout in kernels/kernels.h). A block per token row: its threads first compute the
 * row's rotary_dim/2 angles' sine and cosine into shared memory (angle = pos * theta_i, pos =
 * (position_start + t) * position_scale, formed in fp32 exactly as on the CPU, rope_inv_freq, with
 * accurate sinf/cosf; -angle for the backward, the transpose), then turn every (rotated head, pair)
 * of the row with them in fp32, writing back rounded to bf16. Every head of a row shares the
 * angles, so each is computed once per row rather than once per head (with a 64-bit divide per
 * element, the thread-per-pair kernel took 290 us per call at 16384 x 24 heads on an H200). */
#include "kernels/cuda/cuda_common.cuh"

template <typename E>
static __global__ void rope_rows_kernel(E *qkv, int N, int T, int H, int G, int D, rope_spec rope, float sign) {
    extern __shared__ float angles[]; /* [half] cosines, then [half] sines (times sign) */
    const int half = rope.rotary_dim / 2, per = H / G, pairs = G * (per + 1) * half;
    const size_t row = (size_t)(H + 2 * G) * D;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const int t = n % T;
        __syncthreads(); /* the previous row's readers are done with angles */
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            const float angle = ((float)(rope.position_start + t) * rope.position_scale) * rope_inv_freq(rope, i);
            float s, c;
            sincosf(angle, &s, &c);
            angles[i] = c;
            angles[half + i] = s * sign;
        }
        __syncthreads();
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int i = p % half, j = p / half;
            const int group = j / (per + 1), within = j % (per + 1); /* within == per: the key */
            E *head = qkv + (size_t)n * row + ((size_t)group * (per + 2) + within) * D;
            const float c = angles[i], s = angles[half + i];
            const int ia = rope.interleaved ? 2 * i : i, ib = rope.interleaved ? 2 * i + 1 : i + half;
            const float a = to_float(head[ia]), b = to_float(head[ib]);
            head[ia] = from_float<E>(a * c - b * s);
            head[ib] = from_float<E>(b * c + a * s);
        }
    }
}

template <typename E>
static void rope_launch(E *qkv, int B, int T, int H, int G, int D, rope_spec rope, float sign) {
    if (B <= 0 || T <= 0 || rope.rotary_dim < 2) return;
    if (G <= 0 || H % G != 0 || rope.rotary_dim > D || rope.rotary_dim % 2)
        KERNELS_FATAL("cuda rope: %d heads in %d groups of dimension %d cannot rotate %d channels",
                      H, G, D, rope.rotary_dim);
    const long rows = (long)B * T;
    const unsigned int blocks = (unsigned int)(rows < (1L << 30) ? rows : (1L << 30));
    rope_rows_kernel<<<blocks, 256, sizeof(float) * (size_t)rope.rotary_dim, compute_stream()>>>(
        qkv, (int)rows, T, H, G, D, rope, sign);
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
