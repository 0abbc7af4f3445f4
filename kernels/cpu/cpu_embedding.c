/* cpu_embedding.c: token embedding lookup (vocab-parallel: this rank holds table rows for global
 * ids [vocab_start, vocab_start + vocab_rows); other tokens embed to 0 here and the model sums
 * over tensor-parallel ranks) and the learned position embedding added onto it. Backward
 * scatters dout into the looked-up rows; each row's sum runs in token order (deterministic). */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_embedding_forward(float *out, const int *tokens, const float *table, int N, int C,
                           int vocab_start, int vocab_rows) {
    for (int n = 0; n < N; n++) {
        float *out_n = out + (size_t)n * C;
        int row = tokens[n] - vocab_start;
        if (row >= 0 && row < vocab_rows) {
            memcpy(out_n, table + (size_t)row * C, (size_t)C * sizeof(float));
        } else {
            for (int c = 0; c < C; c++) out_n[c] = 0.0f;
        }
    }
}

void cpu_embedding_backward(float *dtable, const float *dout, const int *tokens, int N, int C,
                            int vocab_start, int vocab_rows) {
    for (int n = 0; n < N; n++) {
        int row = tokens[n] - vocab_start;
        if (row < 0 || row >= vocab_rows) continue; /* another rank owns this token's row */
        float *drow = dtable + (size_t)row * C;
        const float *dout_n = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) drow[c] += dout_n[c];
    }
}

void cpu_position_embedding_forward(float *out, const float *wpe, int B, int T, int C,
                                    int position_start) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *out_bt = out + ((size_t)b * T + t) * C;
            const float *wpe_t = wpe + ((size_t)position_start + t) * C;
            for (int c = 0; c < C; c++) out_bt[c] += wpe_t[c];
        }
    }
}

void cpu_position_embedding_backward(float *dwpe, const float *dout, int B, int T, int C,
                                     int position_start) {
    for (int t = 0; t < T; t++) {
        float *dwpe_t = dwpe + ((size_t)position_start + t) * C;
        for (int b = 0; b < B; b++) {
            const float *dout_bt = dout + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dwpe_t[c] += dout_bt[c];
        }
    }
}
