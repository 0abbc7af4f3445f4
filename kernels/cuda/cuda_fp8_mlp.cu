/* cuda_fp8_mlp.cu: the fp8 MLP backward's elementwise pass in one kernel (issue 43; kernels.h's
 * mlp_backward_fp8, TE's dgelu_cast_transpose_dbias with fc2's input made again). Between fc2's
 * input gradient and its weight gradient (app/model/fp8_linear.c, fp8_mlp_backward_fused) the
 * unfused backward ran three passes over [N, F]: the activation made again with its codes and
 * their transpose (gelu_forward_fp8_transpose: x bf16, x codes, x^T codes), the activation's
 * backward with fc1's output-gradient codes and their transpose (gelu_backward_fp8: dx bf16 and
 * both codes), and fc1's bias gradient (bias_backward, reading dx again). Only x^T's codes, dx's
 * codes and dx^T's codes and the bias gradient are read afterwards, so one kernel reads fc1's
 * output and fc2's input gradient once and writes just those: ~10 bytes an element fewer.
 *
 * Bit for bit the unfused passes: the same fp32 expressions (cuda_gelu.cuh, cuda_swiglu.cuh),
 * each value rounded to the compute dtype before it is quantized (cuda_fp8_out.cuh), the amax
 * of the stored values (x's too, as the remake recorded it), and the bias gradient summed in
 * bias_backward's order (cuda_common.cuh's bias_backward_chunks): a block owns a strip of 128
 * activation columns and one of bias_backward's chunks of rows; warp y (of 8) takes rows y, y + 8,
 * ... of the chunk in order, 4 columns a lane, so its running sums are bias_backward's thread-row
 * y sums; the 8 are added in order y = 0..7 into the chunk's partial row and
 * column_sum_accumulate adds the chunks, as there. Without a bias a block takes one tile.
 *
 * The tile: 128 rows x 128 activation columns; each warp row-load reads 256 contiguous bytes of
 * each input, the codes go row-major to global memory (128 contiguous bytes a warp) and into
 * shared tiles (SwiGLU three: x, da, du; GeLU two), whose columns are then written as rows of
 * the transposes as fp8_quantize_transpose's vectorized kernel does (cuda_fp8.cu: 16 rows x 4
 * columns a thread, 16-byte coalesced stores).
 * It takes rows a multiple of 16, F of 8, 16-byte aligned buffers and, with a bias, chunks of a
 * multiple of 16 rows; elsewhere the unfused passes run (the fallback; dpre is their scratch). */
#include "kernels/cuda/cuda_fp8_out.cuh"
#include "kernels/cuda/cuda_gelu.cuh"
#include "kernels/cuda/cuda_swiglu.cuh"

#define MLP_THREADS 256
#define MLP_WARPS (MLP_THREADS / 32)
#define MLP_TILE 128  /* rows and activation columns of a tile */
#define MLP_PITCH 33  /* words a shared tile row (4 codes a word): 32 + 1 against bank conflicts */
#define MLP_TILE_WORDS (MLP_TILE * MLP_PITCH)

static_assert(MLP_WARPS == BIAS_THREADS_Y, "warp y of the fused kernel sums bias_backward's thread-row y");
static_assert(MLP_TILE % BIAS_THREADS_Y == 0, "a tile's rows keep their residue mod BIAS_THREADS_Y");

/* shared memory of a block: the code tiles, then the bias sums [MLP_WARPS][128 (SwiGLU 256)] */
static size_t mlp_shared_bytes(bool swiglu) {
    return sizeof(uint32_t) * (size_t)(swiglu ? 3 : 2) * MLP_TILE_WORDS +
           sizeof(float) * (size_t)MLP_WARPS * (swiglu ? 2 : 1) * MLP_TILE;
}

/* 4 elements at p (8-byte aligned) as floats */
template <typename E>
static __device__ __forceinline__ void load4(float v[4], const E *p) {
    union {
        uint2 raw;
        E e[4];
    } u;
    u.raw = *reinterpret_cast<const uint2 *>(p);
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = to_float(u.e[j]);
}

/* the codes of 4 values as E stores them (stored_codes8's, 4 at a time: low byte first), the
 * stored values into r, their |r| folded into *local */
template <typename E>
static __device__ __forceinline__ uint32_t stored_codes4(float r[4], const float v[4], float s, int format,
                                                         float *local) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        r[j] = to_float(from_float<E>(v[j]));
        *local = fmaxf(fabsf(r[j]), *local);
    }
    return fp8x2_of(r[0] * s, r[1] * s, format) | fp8x2_of(r[2] * s, r[3] * s, format) << 16;
}

/* the shared tile's codes [h rows (a multiple of 16) from r0, 128 columns from c0 (of cols)]
 * written transposed into out_t [., rows] at rows base + c0 ..: a thread's 16 rows x 4 columns
 * transposed in registers (byte_perm) into 4 stores of 16 bytes, the 8 threads of a column
 * writing its 128 contiguous bytes (cuda_fp8.cu's fp8_quantize_transpose_vec_kernel) */
static __device__ __forceinline__ void store_transposed(uint8_t *out_t, const uint32_t *tile, int rows, int r0, int h,
                                                        int base, int c0, int cols) {
    int piece = threadIdx.x % 8, group = threadIdx.x / 8; /* rows 16 piece .., columns 4 group .. */
    int r = r0 + 16 * piece, c = c0 + 4 * group;
    if (16 * piece >= h || c >= cols) return;
    uint32_t w[16];
#pragma unroll
    for (int j = 0; j < 16; j++) w[j] = tile[(16 * piece + j) * MLP_PITCH + group];
    /* all 4 columns exist: c is a multiple of 4, cols of 8 */
    store_codes_transposed_16x4(out_t + (size_t)(base + c) * rows + r, (size_t)rows, w);
}

/* every thread: the block's largest |x| (a) and |dpre| (g) folded into qa's and qg's amax (each
 * skipped when NULL; an integer atomicMax on the float's bits, as fp8_block_finish), and from
 * block (0, 0) both scale_inv = 1 / scale */
static __device__ void finish_amax2(const fp8_output &qa, float sa, float a, const fp8_output &qg, float sg, float g) {
    __shared__ float warp_max[2][MLP_WARPS];
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        if (qa.scale_inv) *qa.scale_inv = 1.0f / sa;
        if (qg.scale_inv) *qg.scale_inv = 1.0f / sg;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, offset));
        g = fmaxf(g, __shfl_xor_sync(0xffffffffu, g, offset));
    }
    if (threadIdx.x % 32 == 0) {
        warp_max[0][threadIdx.x / 32] = a;
        warp_max[1][threadIdx.x / 32] = g;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float ma = 0.0f, mg = 0.0f;
        for (int w = 0; w < MLP_WARPS; w++) ma = fmaxf(ma, warp_max[0][w]), mg = fmaxf(mg, warp_max[1][w]);
        if (qa.amax) atomicMax(reinterpret_cast<unsigned int *>(qa.amax), __float_as_uint(ma)); /* >= 0, not NaN */
        if (qg.amax) atomicMax(reinterpret_cast<unsigned int *>(qg.amax), __float_as_uint(mg));
    }
}

/* pre [rows, F] (SwiGLU [rows, 2F]: gate a, then up u), dact [rows, F]: block (bx, by) takes
 * activation columns [128 bx, +128) and rows [by rows_per_block, +rows_per_block) (rows_per_block
 * a multiple of 16; with BIAS bias_backward's chunk, else one tile). Writes x^T codes act_t
 * [F, rows] (qa's scale and format), dpre's codes qg.codes [rows, G] and transposed codes grad_t
 * [G, rows] (qg's; G = F, SwiGLU 2F: da in columns f, du in F + f) and with BIAS the chunk's
 * partial row partials[by, G] of dpre's column sums. */
template <typename E, bool SWIGLU, bool BIAS>
static __global__ void __launch_bounds__(MLP_THREADS, 4) /* 64 registers: 4 blocks an SM */
    fp8_mlp_backward_kernel(const E *pre, const E *dact, int rows, int F, int rows_per_block, fp8_output qa,
                            uint8_t *act_t, fp8_output qg, uint8_t *grad_t, float *partials) {
    extern __shared__ uint32_t mlp_shared[];
    uint32_t *x_tile = mlp_shared, *g_tile = x_tile + MLP_TILE_WORDS, *u_tile = g_tile + MLP_TILE_WORDS;
    float *sums = reinterpret_cast<float *>(mlp_shared + (SWIGLU ? 3 : 2) * MLP_TILE_WORDS);
    const float sa = *qa.scale, sg = *qg.scale;
    const int G = SWIGLU ? 2 * F : F;
    const int lane = threadIdx.x % 32, y = threadIdx.x / 32;
    const int c0 = blockIdx.x * MLP_TILE, c = c0 + 4 * lane; /* this lane's 4 activation columns */
    const int row_begin = blockIdx.y * rows_per_block, row_end = min(rows, row_begin + rows_per_block);
    float amax_x = 0.0f, amax_g = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_u[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* bias_backward's row sums */
    for (int t0 = row_begin; t0 < row_end; t0 += MLP_TILE) {
        const int h = min(MLP_TILE, row_end - t0);
        if (t0 > row_begin) __syncthreads(); /* the last tile's transposed stores have read the shared tiles */
        /* two rows a pass (h / 8 is even), both rows' loads issued before either's arithmetic */
        for (int dy0 = y; dy0 < h; dy0 += 2 * MLP_WARPS) {
            float in[2][3][4]; /* per row: GeLU pre, dact; SwiGLU a, u, dact */
            if (c < F) {
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const size_t r = (size_t)(t0 + dy0 + j * MLP_WARPS);
                    if constexpr (SWIGLU) {
                        load4(in[j][0], pre + r * 2 * F + c);
                        load4(in[j][1], pre + r * 2 * F + F + c);
                        load4(in[j][2], dact + r * F + c);
                    } else {
                        load4(in[j][0], pre + r * F + c);
                        load4(in[j][1], dact + r * F + c);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int dy = dy0 + j * MLP_WARPS;
                uint32_t cx = 0u, cg = 0u, cu = 0u;
                if (c < F) {
                    const size_t r = (size_t)(t0 + dy);
                    float x[4], g[4], rx[4], rg[4];
                    if constexpr (SWIGLU) { /* swiglu_forward's x; swiglu_backward's da, du */
                        float gu[4], ru[4];
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            x[k] = swiglu_value(in[j][0][k], in[j][1][k]);
                            g[k] = swiglu_grad_gate(in[j][0][k], in[j][1][k], in[j][2][k]);
                            gu[k] = swiglu_grad_up(in[j][0][k], in[j][2][k]);
                        }
                        cx = stored_codes4<E>(rx, x, sa, qa.format, &amax_x);
                        cg = stored_codes4<E>(rg, g, sg, qg.format, &amax_g);
                        cu = stored_codes4<E>(ru, gu, sg, qg.format, &amax_g);
                        *reinterpret_cast<uint32_t *>(qg.codes + r * G + c) = cg;
                        *reinterpret_cast<uint32_t *>(qg.codes + r * G + F + c) = cu;
                        if (BIAS) {
#pragma unroll
                            for (int k = 0; k < 4; k++) acc[k] += rg[k], acc_u[k] += ru[k];
                        }
                    } else { /* gelu_forward's x; gelu_backward's dpre */
#pragma unroll
                        for (int k = 0; k < 4; k++) {
                            x[k] = gelu_value(in[j][0][k]);
                            g[k] = gelu_grad(in[j][0][k]) * in[j][1][k];
                        }
                        cx = stored_codes4<E>(rx, x, sa, qa.format, &amax_x);
                        cg = stored_codes4<E>(rg, g, sg, qg.format, &amax_g);
                        *reinterpret_cast<uint32_t *>(qg.codes + r * G + c) = cg;
                        if (BIAS) {
#pragma unroll
                            for (int k = 0; k < 4; k++) acc[k] += rg[k];
                        }
                    }
                }
                x_tile[dy * MLP_PITCH + lane] = cx;
                g_tile[dy * MLP_PITCH + lane] = cg;
                if (SWIGLU) u_tile[dy * MLP_PITCH + lane] = cu;
            }
        }
        __syncthreads();
        store_transposed(act_t, x_tile, rows, t0, h, 0, c0, F);
        store_transposed(grad_t, g_tile, rows, t0, h, 0, c0, F);
        if (SWIGLU) store_transposed(grad_t, u_tile, rows, t0, h, F, c0, F);
    }
    if (BIAS) { /* the chunk's partial row: the 8 warps' sums added in order, bias_backward's bits */
        const int width = (SWIGLU ? 2 : 1) * MLP_TILE;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            sums[y * width + 4 * lane + k] = acc[k];
            if (SWIGLU) sums[y * width + MLP_TILE + 4 * lane + k] = acc_u[k];
        }
        __syncthreads();
        for (int j = threadIdx.x; j < width; j += MLP_THREADS) {
            const int f = c0 + j % MLP_TILE;
            if (f >= F) continue;
            float total = 0.0f;
            for (int w = 0; w < MLP_WARPS; w++) total += sums[w * width + j];
            partials[(size_t)blockIdx.y * G + (j < MLP_TILE ? f : F + f)] = total;
        }
    }
    finish_amax2(qa, sa, amax_x, qg, sg, amax_g);
}

/* ---- the unfused passes (the fallback): x made again into dpre with its codes (written into
 * qg's, which dpre's overwrite next: qa's may hold what the caller keeps) and transpose, then
 * dpre with its codes and transpose, then the bias gradient over dpre ---- */

static void plain_activation(__nv_bfloat16 *out, const __nv_bfloat16 *pre, int rows, int F, bool swiglu,
                             const fp8_output *q, uint8_t *codes_t) {
    if (swiglu) cuda_swiglu_forward_fp8_transpose((bf16 *)out, (const bf16 *)pre, rows, F, q, codes_t);
    else cuda_gelu_forward_fp8_transpose((bf16 *)out, (const bf16 *)pre, rows, F, q, codes_t);
}
static void plain_activation(__half *out, const __half *pre, int rows, int F, bool swiglu, const fp8_output *q,
                             uint8_t *codes_t) {
    if (swiglu) cuda_swiglu_forward_fp8_transpose_fp16((fp16 *)out, (const fp16 *)pre, rows, F, q, codes_t);
    else cuda_gelu_forward_fp8_transpose_fp16((fp16 *)out, (const fp16 *)pre, rows, F, q, codes_t);
}
static void plain_gradient(__nv_bfloat16 *dpre, const __nv_bfloat16 *pre, const __nv_bfloat16 *dact, int rows, int F,
                           bool swiglu, const fp8_output *q, uint8_t *codes_t) {
    if (swiglu) cuda_swiglu_backward_fp8((bf16 *)dpre, (const bf16 *)pre, (const bf16 *)dact, rows, F, q, codes_t);
    else cuda_gelu_backward_fp8((bf16 *)dpre, (const bf16 *)pre, (const bf16 *)dact, rows, F, q, codes_t);
}
static void plain_gradient(__half *dpre, const __half *pre, const __half *dact, int rows, int F, bool swiglu,
                           const fp8_output *q, uint8_t *codes_t) {
    if (swiglu) cuda_swiglu_backward_fp8_fp16((fp16 *)dpre, (const fp16 *)pre, (const fp16 *)dact, rows, F, q, codes_t);
    else cuda_gelu_backward_fp8_fp16((fp16 *)dpre, (const fp16 *)pre, (const fp16 *)dact, rows, F, q, codes_t);
}

template <typename E>
static void mlp_backward_plain(E *dpre, float *dbias, const E *pre, const E *dact, int rows, int F, bool swiglu,
                               const fp8_output *qa, uint8_t *act_t, const fp8_output *qg, uint8_t *grad_t) {
    fp8_output qx = *qa;
    qx.codes = qg->codes; /* x's row codes are not wanted: into qg's, overwritten next */
    plain_activation(dpre, pre, rows, F, swiglu, &qx, act_t);
    plain_gradient(dpre, pre, dact, rows, F, swiglu, qg, grad_t);
    if (dbias) bias_backward_e(dbias, dpre, rows, swiglu ? 2 * F : F);
}

template <typename E, bool SWIGLU, bool BIAS>
static void launch_fused(const E *pre, const E *dact, int rows, int F, int rows_per_block, int row_blocks,
                         const fp8_output *qa, uint8_t *act_t, const fp8_output *qg, uint8_t *grad_t,
                         float *partials) {
    size_t shared = mlp_shared_bytes(SWIGLU);
    if (shared > 48 * 1024) /* SwiGLU's three tiles: above the default limit (per device, so each call) */
        CHECK_CUDA(cudaFuncSetAttribute(fp8_mlp_backward_kernel<E, SWIGLU, BIAS>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared));
    dim3 grid(ceil_div((size_t)F, MLP_TILE), (unsigned)row_blocks);
    fp8_mlp_backward_kernel<E, SWIGLU, BIAS><<<grid, MLP_THREADS, shared, compute_stream()>>>(
        pre, dact, rows, F, rows_per_block, *qa, act_t, *qg, grad_t, partials);
    CHECK_LAUNCH();
}

template <typename E>
static void mlp_backward_fp8_t(E *dpre, float *dbias, const E *pre, const E *dact, int rows, int F, int swiglu,
                               const fp8_output *qa, uint8_t *act_t, const fp8_output *qg, uint8_t *grad_t) {
    if ((qa->format != FP8_E4M3 && qa->format != FP8_E5M2) || (qg->format != FP8_E4M3 && qg->format != FP8_E5M2))
        kernels_fatal(__FILE__, __LINE__, "mlp_backward_fp8: formats %d and %d: each FP8_E4M3 (0) or FP8_E5M2 (1)",
                      qa->format, qg->format);
    const int G = swiglu ? 2 * F : F;
    int rows_per_block = MLP_TILE, blocks = rows > 0 ? (int)ceil_div((size_t)rows, MLP_TILE) : 0;
    if (dbias && rows > 0) blocks = bias_backward_chunks(rows, G, &rows_per_block);
    bool fused = rows > 0 && F > 0 && rows % 16 == 0 && F % 8 == 0 && rows_per_block % 16 == 0 && aligned16(pre) &&
                 aligned16(dact) && aligned16(qg->codes) && aligned16(act_t) && aligned16(grad_t);
    if (!fused) {
        mlp_backward_plain(dpre, dbias, pre, dact, rows, F, swiglu != 0, qa, act_t, qg, grad_t);
        return;
    }
    if (dbias) {
        float *partials = (float *)stream_scratch((size_t)blocks * (size_t)G * sizeof(float));
        if (swiglu) launch_fused<E, true, true>(pre, dact, rows, F, rows_per_block, blocks, qa, act_t, qg, grad_t, partials);
        else launch_fused<E, false, true>(pre, dact, rows, F, rows_per_block, blocks, qa, act_t, qg, grad_t, partials);
        column_sum_accumulate(dbias, partials, blocks, G);
        return;
    }
    if (swiglu) launch_fused<E, true, false>(pre, dact, rows, F, rows_per_block, blocks, qa, act_t, qg, grad_t, NULL);
    else launch_fused<E, false, false>(pre, dact, rows, F, rows_per_block, blocks, qa, act_t, qg, grad_t, NULL);
}

/* ---- the C entry points: bf16 and fp16 (cuda_kernels.h) ---- */

extern "C" void cuda_mlp_backward_fp8(bf16 *dpre, float *dbias, const bf16 *pre, const bf16 *dact, int rows, int F,
                                      int swiglu, const fp8_output *qa, uint8_t *act_t, const fp8_output *qg,
                                      uint8_t *grad_t) {
    mlp_backward_fp8_t(as_nv(dpre), dbias, as_nv(pre), as_nv(dact), rows, F, swiglu, qa, act_t, qg, grad_t);
}
extern "C" void cuda_mlp_backward_fp8_fp16(fp16 *dpre, float *dbias, const fp16 *pre, const fp16 *dact, int rows,
                                           int F, int swiglu, const fp8_output *qa, uint8_t *act_t,
                                           const fp8_output *qg, uint8_t *grad_t) {
    mlp_backward_fp8_t(as_half(dpre), dbias, as_half(pre), as_half(dact), rows, F, swiglu, qa, act_t, qg, grad_t);
}
