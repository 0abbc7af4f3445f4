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

/* The same rotation with 128-bit accesses and no shared table: thread item (row n, block of 8
 * pairs i0..i0+7) computes those 8 angles as the kernel above does (so the same bits) and turns
 * them in every query and key head of the row: channels i..i+7 and i+half..i+half+7.
 * Non-interleaved layouts with half % 8 == 0 and D % 8 == 0, qkv 16-byte aligned, fewer than
 * 2^31 items (32-bit index arithmetic). The kernel above spends most of its time on a
 * synchronized table per row and 2-byte accesses half a head apart (67 us per call at [16384
 * rows, 16 + 8 heads of 64] on an H200, MoE profile of 2026-11-29). */
template <typename E>
static __global__ void rope_rows_vec_kernel(E *qkv, unsigned int items, int T, int H, int G, int D, rope_spec rope,
                                            float sign) {
    const int half = rope.rotary_dim / 2, per = H / G;
    const unsigned int blocks8 = (unsigned int)half / 8u;
    const size_t row = (size_t)(H + 2 * G) * D;
    for (unsigned int item = blockIdx.x * blockDim.x + threadIdx.x; item < items; item += gridDim.x * blockDim.x) {
        const unsigned int n = item / blocks8;
        const int i0 = 8 * (int)(item - n * blocks8), t = (int)(n % (unsigned int)T);
        float c[8], sn[8];
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const float angle = ((float)(rope.position_start + t) * rope.position_scale) * rope_inv_freq(rope, i0 + m);
            sincosf(angle, &sn[m], &c[m]);
            sn[m] *= sign;
        }
        for (int group = 0; group < G; group++)
            for (int within = 0; within <= per; within++) { /* within == per: the key */
                E *head = qkv + (size_t)n * row + ((size_t)group * (per + 2) + within) * D;
                float a[8], b[8];
                load_x8(a, head + i0);
                load_x8(b, head + i0 + half);
#pragma unroll
                for (int m = 0; m < 8; m++) {
                    const float x = a[m], y = b[m];
                    a[m] = x * c[m] - y * sn[m];
                    b[m] = y * c[m] + x * sn[m];
                }
                store_x8(head + i0, a);
                store_x8(head + i0 + half, b);
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
    const size_t items = (size_t)rows * (size_t)(rope.rotary_dim / 16);
    if (!rope.interleaved && (rope.rotary_dim / 2) % 8 == 0 && D % 8 == 0 && aligned16(qkv) && items < (1u << 31)) {
        rope_rows_vec_kernel<<<grid_stride_blocks(items, 128), 128, 0, compute_stream()>>>(qkv, (unsigned int)items, T, H,
                                                                                           G, D, rope, sign);
        CHECK_LAUNCH();
        return;
    }
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
