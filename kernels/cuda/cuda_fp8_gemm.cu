/* cuda_fp8_gemm.cu: the fp8 GEMM of the CUDA backend (issue 43; kernels/kernels.h fp8_gemm) and
 * the byte transpose that gives its operands their K-major layout (fp8_transpose).
 *
 * out[rows, cols] = x_scale_inv w_scale_inv (x . w^T) with x [rows, K] and w [cols, K] fp8 codes,
 * both K-contiguous: cuBLASLt's fp8 GEMMs on Hopper take only the "TN" layout, D = A^T B in
 * column-major terms with A = w (K x cols) and B = x (K x rows), so out^T = w x^T, which is out
 * row-major. Transformer Engine's three GEMMs of a linear layer take this form with transposed
 * copies: forward x . W^T (x, W as they are), input gradient dout . W (dout, and W^T as the
 * second operand), weight gradient dout^T . x (dout^T and x^T). E4M3 x E4M3, E4M3 x E5M2 and
 * E5M2 x E4M3 run; E5M2 x E5M2 has no Hopper kernel (refused). The scales are fp32 device
 * pointers (cuBLASLt's A/B_SCALE_POINTER), used where they are when 256-byte aligned (the fp8
 * linears' state keeps them so), else first copied into a slot of its own: cuBLASLt 13.1 refuses
 * a scale pointer that is only 4-byte aligned (perf/accept/gemm_fp8.c). Output: the compute dtype
 * overwritten (accumulate 0), or fp32 added into (accumulate 1: the weight gradient's main_grad,
 * TE's accumulate). Plans (descriptor, layouts, the heuristic's first algorithm) are cached per
 * shape, formats, output and epilogue. fp8_gemm has no fast accumulation (its results equal an
 * fp32 accumulation of exact fp8 products, as the CPU emulation computes them); the linear
 * forward takes it, as TE's forward GEMM does. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/fp8_format.h"

#include <cublasLt.h>

cublasLtHandle_t cuda_cublaslt_handle(void); /* cuda_context.cu */
void *cuda_cublaslt_workspace(size_t *bytes);

/* ---- the byte transpose: out[c, r] = in[r, c], 32 x 32 tiles through shared memory ---- */

static __global__ void fp8_transpose_kernel(uint8_t *out, const uint8_t *in, int rows, int cols) {
    __shared__ uint8_t tile[32][33];
    int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
        int c = c0 + dy, r = r0 + threadIdx.x;
        if (c < cols && r < rows) out[(size_t)c * rows + r] = tile[threadIdx.x][dy];
    }
}

extern "C" void cuda_fp8_transpose(uint8_t *out, const uint8_t *in, int rows, int cols) {
    if (rows == 0 || cols == 0) return;
    dim3 grid((unsigned)ceil_div(cols, 32), (unsigned)ceil_div(rows, 32)), block(32, 8);
    fp8_transpose_kernel<<<grid, block, 0, compute_stream()>>>(out, in, rows, cols);
    CHECK_LAUNCH();
}

/* ---- the GEMM ---- */

typedef struct fp8_plan {
    bool used;
    int rows, K, cols, x_format, w_format, out_type, accumulate;
    int has_bias, has_residual; /* fp8_linear_forward: BIAS epilogue, C = the residual (beta 1) */
    int fast_accum;             /* fp8_linear_forward: Hopper's fast accumulation (TE's fprop) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
    cublasLtMatmulAlgo_t algo;
} fp8_plan;

#define FP8_PLANS 1024
static fp8_plan fp8_plans[FP8_PLANS];

static cudaDataType_t fp8_type(int format) { return format == FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

/* A is w, B is x: their scales (set per call, as the bias pointer) */
static void set_scales(fp8_plan *p, const float *x_scale, const float *w_scale) {
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof x_scale));
}

static void plan_create(fp8_plan *p, float *const *scales) {
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
    set_scales(p, scales[0], scales[1]);
    int8_t fast_accum = (int8_t)p->fast_accum;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
    if (p->has_bias) { /* the bias in the output's dtype, added in fp32 before D's rounding */
        cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bias_type = (cudaDataType_t)p->out_type;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                    sizeof bias_type));
    }
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->a_layout, fp8_type(p->w_format), (uint64_t)p->K, (uint64_t)p->cols, p->K));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->b_layout, fp8_type(p->x_format), (uint64_t)p->K, (uint64_t)p->rows, p->K));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&p->d_layout, (cudaDataType_t)p->out_type, (uint64_t)p->cols,
                                            (uint64_t)p->rows, p->cols));
    cublasLtMatmulPreference_t preference;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    size_t workspace_bytes = 0;
    (void)cuda_cublaslt_workspace(&workspace_bytes);
    uint64_t max_workspace = workspace_bytes;
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &max_workspace, sizeof max_workspace));
    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int returned = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cuda_cublaslt_handle(), p->desc, p->a_layout, p->b_layout,
                                                           p->d_layout, p->d_layout, preference, 1, &result, &returned);
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(preference));
    if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS)
        kernels_fatal(__FILE__, __LINE__, "cuBLASLt has no fp8 GEMM for %d x %d x %d (%s x %s into %s, status %d)",
                      p->rows, p->K, p->cols, p->x_format == FP8_E5M2 ? "E5M2" : "E4M3",
                      p->w_format == FP8_E5M2 ? "E5M2" : "E4M3", p->accumulate ? "fp32" : "the compute dtype",
                      (int)status);
    p->algo = result.algo;
    p->used = true;
}

static void plan_fill(fp8_plan *p, int rows, int K, int cols, int x_format, int w_format, int out_type, int accumulate,
                      int has_bias, int has_residual, int fast_accum, float *const *scales) {
    p->rows = rows, p->K = K, p->cols = cols, p->x_format = x_format, p->w_format = w_format;
    p->out_type = out_type, p->accumulate = accumulate, p->has_bias = has_bias, p->has_residual = has_residual;
    p->fast_accum = fast_accum;
    plan_create(p, scales);
}

/* the plan for a shape, made on first use; with the table full (the MoE experts' GEMMs take a
 * shape per expert row count, which changes every step) the hash's home slot is made over */
static fp8_plan *plan_for(int rows, int K, int cols, int x_format, int w_format, int out_type, int accumulate,
                          int has_bias, int has_residual, int fast_accum, float *const *scales) {
    unsigned h = (unsigned)(rows * 73856093u) ^ (unsigned)(K * 19349663u) ^ (unsigned)(cols * 83492791u) ^
                 (unsigned)(x_format * 2 + w_format * 4 + accumulate * 8 + out_type * 16 + has_bias * 4096 +
                            has_residual * 8192 + fast_accum * 16384);
    for (int probe = 0; probe < FP8_PLANS; probe++) {
        fp8_plan *p = &fp8_plans[(h + probe) % FP8_PLANS];
        if (p->used && p->rows == rows && p->K == K && p->cols == cols && p->x_format == x_format &&
            p->w_format == w_format && p->out_type == out_type && p->accumulate == accumulate &&
            p->has_bias == has_bias && p->has_residual == has_residual && p->fast_accum == fast_accum)
            return p;
        if (!p->used) {
            plan_fill(p, rows, K, cols, x_format, w_format, out_type, accumulate, has_bias, has_residual, fast_accum,
                      scales);
            return p;
        }
    }
    fp8_plan *p = &fp8_plans[h % FP8_PLANS];
    /* no wait for queued GEMMs: a launch takes what it needs from the descriptors (Transformer
     * Engine's cublas_gemm destroys its descriptors right after each cublasLtMatmul) */
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->a_layout));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->b_layout));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(p->d_layout));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(p->desc));
    plan_fill(p, rows, K, cols, x_format, w_format, out_type, accumulate, has_bias, has_residual, fast_accum, scales);
    return p;
}

/* two 256-byte-aligned device slots for the operands' scales (stream-ordered reuse) */
static float *const *scale_slots(void) {
    static float *slots[2] = {NULL, NULL};
    if (!slots[0]) {
        char *base = NULL;
        CHECK_CUDA(cudaMalloc((void **)&base, 512));
        slots[0] = (float *)base;
        slots[1] = (float *)(base + 256);
    }
    return slots;
}

/* out = x_scale_inv w_scale_inv (x . w^T) [+ bias] [+ residual] (see the header); residual may be
 * NULL (beta 0) or the C matrix (beta 1, the output's dtype and layout) */
static bool aligned_256(const void *p) { return ((uintptr_t)p & 255u) == 0; }

static void fp8_gemm_t(void *out, int accumulate, cudaDataType_t compute_type, const uint8_t *x, int x_format,
                       const float *x_scale_inv, const uint8_t *w, int w_format, const float *w_scale_inv, int rows,
                       int K, int cols, const void *bias, const void *residual, int fast_accum) {
    if ((x_format != FP8_E4M3 && x_format != FP8_E5M2) || (w_format != FP8_E4M3 && w_format != FP8_E5M2))
        kernels_fatal(__FILE__, __LINE__, "fp8_gemm: formats %d and %d are not FP8_E4M3 (0) or FP8_E5M2 (1)", x_format,
                      w_format);
    if (x_format == FP8_E5M2 && w_format == FP8_E5M2)
        kernels_fatal(__FILE__, __LINE__, "fp8_gemm: E5M2 x E5M2 has no Hopper GEMM (one operand must be E4M3)");
    if (rows == 0 || cols == 0) return;
    float *const *slots = scale_slots();
    const float *x_scale = x_scale_inv, *w_scale = w_scale_inv;
    if (!aligned_256(x_scale)) { /* into a slot of its own: the scale pointers must be 256-byte aligned */
        CHECK_CUDA(cudaMemcpyAsync(slots[0], x_scale_inv, sizeof(float), cudaMemcpyDeviceToDevice, compute_stream()));
        x_scale = slots[0];
    }
    if (!aligned_256(w_scale)) {
        CHECK_CUDA(cudaMemcpyAsync(slots[1], w_scale_inv, sizeof(float), cudaMemcpyDeviceToDevice, compute_stream()));
        w_scale = slots[1];
    }
    int out_type = accumulate ? (int)CUDA_R_32F : (int)compute_type;
    fp8_plan *p = plan_for(rows, K, cols, x_format, w_format, out_type, accumulate, bias != NULL, residual != NULL,
                           fast_accum, slots);
    set_scales(p, x_scale, w_scale);
    if (bias)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    float alpha = 1.0f, beta = accumulate || residual ? 1.0f : 0.0f;
    const void *c = residual ? residual : out;
    size_t workspace_bytes = 0;
    void *workspace = cuda_cublaslt_workspace(&workspace_bytes);
    CHECK_CUBLAS(cublasLtMatmul(cuda_cublaslt_handle(), p->desc, &alpha, w, p->a_layout, x, p->b_layout, &beta, c,
                                p->d_layout, out, p->d_layout, &p->algo, workspace, workspace_bytes, compute_stream()));
}

extern "C" void cuda_fp8_gemm(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                              const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols) {
    fp8_gemm_t(out, accumulate, CUDA_R_16BF, x, x_format, x_scale_inv, w, w_format, w_scale_inv, rows, K, cols, NULL,
               NULL, 0);
}
extern "C" void cuda_fp8_gemm_fp16(void *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                                   const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols) {
    fp8_gemm_t(out, accumulate, CUDA_R_16F, x, x_format, x_scale_inv, w, w_format, w_scale_inv, rows, K, cols, NULL,
               NULL, 0);
}

/* a linear layer's forward in fp8 (kernels.h fp8_linear_forward): E4M3 x E4M3, the bias fused,
 * the residual as C, with fast accumulation as Transformer Engine's forward GEMM (its
 * use_split_accumulator is off for fprop, on for dgrad and wgrad) */
extern "C" void cuda_fp8_linear_forward(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                                        const float *w_scale_inv, const void *bias, const void *residual, int N, int IC,
                                        int OC) {
    fp8_gemm_t(out, 0, CUDA_R_16BF, x, FP8_E4M3, x_scale_inv, w, FP8_E4M3, w_scale_inv, N, IC, OC, bias, residual, 1);
}
extern "C" void cuda_fp8_linear_forward_fp16(void *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                                             const float *w_scale_inv, const void *bias, const void *residual, int N,
                                             int IC, int OC) {
    fp8_gemm_t(out, 0, CUDA_R_16F, x, FP8_E4M3, x_scale_inv, w, FP8_E4M3, w_scale_inv, N, IC, OC, bias, residual, 1);
}
