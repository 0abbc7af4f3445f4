/* cpu_matmul.c: the linear layer y = x W^T + b with W [OC, IC] (PyTorch layout), through CBLAS:
 *   forward   out[N,OC]    = x[N,IC] W^T          (sgemm NoTrans x Trans)
 *   backward  dx[N,IC]     = dout[N,OC] W         (sgemm NoTrans x NoTrans, overwrite)
 *             dweight[OC,IC] += dout^T x          (sgemm Trans x NoTrans, beta = 1)
 *             dbias[OC]   += column sums of dout  (plain loop, double accumulator)
 * bias_add / bias_backward are the bias halves alone, for row-parallel layers whose bias is
 * added after the tensor-parallel reduction. */
#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_matmul_forward(float *out, const float *x, const float *weight, const float *bias,
                        int N, int IC, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (IC > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, x, IC, weight, IC,
                    0.0f, out, OC);
    } else {
        for (size_t i = 0; i < (size_t)N * OC; i++) out[i] = 0.0f;
    }
    if (bias != NULL) cpu_bias_add(out, bias, N, OC);
}

void cpu_matmul_backward(float *dx, float *dweight, float *dbias, const float *dout,
                         const float *x, const float *weight, int N, int IC, int OC) {
    if (N <= 0) return;
    if (dx != NULL && IC > 0) {
        if (OC > 0) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC,
                        weight, IC, 0.0f, dx, IC);
        } else {
            for (size_t i = 0; i < (size_t)N * IC; i++) dx[i] = 0.0f;
        }
    }
    if (dweight != NULL && OC > 0 && IC > 0) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, x, IC,
                    1.0f, dweight, IC);
    }
    if (dbias != NULL) cpu_bias_backward(dbias, dout, N, OC);
}

void cpu_bias_add(float *out, const float *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        float *out_n = out + (size_t)n * C;
        for (int c = 0; c < C; c++) out_n[c] += bias[c];
    }
}

void cpu_bias_backward(float *dbias, const float *dout, int N, int C) {
    for (int c = 0; c < C; c++) {
        double sum = 0.0;
        for (int n = 0; n < N; n++) sum += dout[(size_t)n * C + c];
        dbias[c] += (float)sum;
    }
}
