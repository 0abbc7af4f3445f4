/* gpt_inference.h: the GPT model's forward for generation: a batch of new tokens at positions
 * [past, past+Tq) of B sequences, through the same parameters (gpt_model.h's views) and
 * kernel_ops as training, with a key/value cache per layer so that earlier positions are not
 * recomputed. Dropout is off. One rank holds the whole model (tensor and pipeline size 1; any
 * checkpoint layout loads into it, the checkpoint code reshards). */
#ifndef GPT_INFERENCE_H
#define GPT_INFERENCE_H

#include "app/model/gpt_model.h"

typedef struct gpt_inference {
    gpt_model *model;
    int max_batch;       /* sequences the cache holds */
    int max_len;         /* positions per sequence (<= --max-position-embeddings) */
    int max_rows;        /* token rows (B*Tq) one forward takes */
    void **k_cache, **v_cache; /* per layer [max_batch, max_len, H, D], compute dtype */
    int *tokens;         /* backend [max_rows] */
    void *x, *x_mid, *ln, *qkv, *attention, *fc1, *gelu, *out_rows, *logits;
    float *mean, *rstd;
} gpt_inference;

/* Buffers for batches of up to max_batch sequences of up to max_len positions, at most
 * max_rows new tokens per forward. The model must be one chunk on one rank (tp = pp = 1). */
void gpt_inference_create(gpt_inference *inf, gpt_model *model, int max_batch, int max_len, int max_rows);
void gpt_inference_free(gpt_inference *inf);

/* Runs tokens[B*Tq] (host, row-major [B,Tq]) at positions [past, past+Tq) of sequences 0..B-1,
 * storing their keys and values in the cache (positions < past must hold the same sequences'
 * earlier tokens), and writes the output layer's logits [B*Tq, padded vocab] to host fp32. */
void gpt_inference_forward(gpt_inference *inf, const int *tokens, int B, int Tq, int past, float *host_logits);

#endif
