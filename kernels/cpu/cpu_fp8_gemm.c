/* cpu_fp8_gemm.c: the CPU reference of the fp8 GEMMs (issue 43; kernels.h fp8_gemm,
 * fp8_linear_forward, fp8_transpose, fp8_quantize_transpose): the codes decoded exactly to fp32
 * (kernels/fp8_format.h: every fp8 value is an fp32 value, and so is the product of two), the
 * products summed in fp32 by sgemm, the sum times the two scale_inv factors (cuBLASLt's alpha x
 * A_SCALE x B_SCALE), then the bias and the residual added in fp32 (the compute dtype here, so
 * that is the output's rounding too). What the CUDA backend's cuBLASLt GEMMs compute, up to the
 * order of the fp32 sums; the emulation (fp8_dequantize then the fp32 GEMM) rounds each scaled
 * operand first instead. */
#include <cblas.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/fp8_format.h"

static void check_formats(const char *op, int x_format, int w_format) {
    if ((x_format != FP8_E4M3 && x_format != FP8_E5M2) || (w_format != FP8_E4M3 && w_format != FP8_E5M2))
        KERNELS_FATAL("%s: formats %d and %d are not FP8_E4M3 (0) or FP8_E5M2 (1)", op, x_format, w_format);
    if (x_format == FP8_E5M2 && w_format == FP8_E5M2)
        KERNELS_FATAL("%s: E5M2 x E5M2 (one operand must be E4M3, as on Hopper)", op);
}

/* the codes of q [n] as fp32 values, unscaled, into a fresh buffer the caller frees */
static float *decode(const uint8_t *q, size_t n, int format) {
    float table[256];
    for (int c = 0; c < 256; c++) table[c] = fp8_to_float((uint8_t)c, format);
    float *out = malloc(sizeof(float) * (n ? n : 1));
    if (!out) KERNELS_FATAL("fp8 GEMM: out of memory decoding %zu codes", n);
    for (size_t i = 0; i < n; i++) out[i] = table[q[i]];
    return out;
}

/* out[rows, cols] = alpha (x . w^T) + beta out over the decoded codes x [rows, K], w [cols, K] */
static void decoded_gemm(float *out, float beta, const uint8_t *x, int x_format, const uint8_t *w, int w_format,
                         float alpha, int rows, int K, int cols) {
    if (K <= 0) {
        for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++) out[i] = beta == 0.0f ? 0.0f : beta * out[i];
        return;
    }
    float *xf = decode(x, (size_t)rows * (size_t)K, x_format), *wf = decode(w, (size_t)cols * (size_t)K, w_format);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, K, alpha, xf, K, wf, K, beta, out, cols);
    free(xf);
    free(wf);
}

void cpu_fp8_gemm(float *out, int accumulate, const uint8_t *x, int x_format, const float *x_scale_inv,
                  const uint8_t *w, int w_format, const float *w_scale_inv, int rows, int K, int cols) {
    check_formats("fp8_gemm", x_format, w_format);
    if (rows <= 0 || cols <= 0) return;
    decoded_gemm(out, accumulate ? 1.0f : 0.0f, x, x_format, w, w_format, *x_scale_inv * *w_scale_inv, rows, K, cols);
}

void cpu_fp8_linear_forward(float *out, const uint8_t *x, const float *x_scale_inv, const uint8_t *w,
                            const float *w_scale_inv, const float *bias, const float *residual, int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    decoded_gemm(out, 0.0f, x, FP8_E4M3, w, FP8_E4M3, *x_scale_inv * *w_scale_inv, N, IC, OC);
    if (bias) cpu_bias_add(out, bias, N, OC);
    if (residual) cpu_add(out, residual, out, (size_t)N * (size_t)OC);
}

void cpu_fp8_transpose(uint8_t *out, const uint8_t *in, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[(size_t)c * (size_t)rows + (size_t)r] = in[(size_t)r * (size_t)cols + (size_t)c];
}

void cpu_fp8_quantize_transpose(uint8_t *out, uint8_t *out_t, float *amax, float *scale_inv, const float *x, int rows,
                                int cols, const float *scale, int format) {
    cpu_fp8_quantize(out, amax, scale_inv, x, (size_t)rows * (size_t)cols, scale, format);
    cpu_fp8_transpose(out_t, out, rows, cols);
}
