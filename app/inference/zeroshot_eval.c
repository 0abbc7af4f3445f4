/* zeroshot_eval.c: see zeroshot_eval.h. */
#include "app/inference/zeroshot_eval.h"
#include "app/core/error.h"
#include "app/inference/sampling.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t wikitext_original_tokens(const char *text) {
    /* Python's str.strip() removes whitespace at both ends; split(" ") counts single spaces */
    const char *start = text, *end = text + strlen(text);
    while (start < end && isspace((unsigned char)*start)) start++;
    while (end > start && isspace((unsigned char)end[-1])) end--;
    int64_t words = 1;
    for (const char *p = start; p < end; p++) if (*p == ' ') words++;
    return words;
}

void wikitext_evaluate(gpt_inference *inf, const int32_t *tokens, int64_t n, int seq_length, int overlapping_eval,
                       int batch, int eod, int vocab_size, wikitext_result *r) {
    int V = inf->model->config.padded_vocab_size;
    int stride = overlapping_eval < 1 ? 1 : overlapping_eval;
    if (stride > seq_length) stride = seq_length;
    int64_t total_targets = n - 1;
    int64_t targets = total_targets - stride > 0 ? total_targets - stride : 0;
    int64_t windows = (targets + stride - 1) / stride + 1;
    r->num_windows = windows;
    r->total_loss = 0.0;
    int *input = malloc(sizeof(int) * (size_t)batch * (size_t)seq_length);
    int *target = malloc(sizeof(int) * (size_t)batch * (size_t)seq_length);
    unsigned char *mask = malloc((size_t)batch * (size_t)seq_length);
    /* logits only where the output layer runs (the last pipeline stage) */
    int last_stage = gpt_inference_last_stage(inf);
    float *logits = last_stage ? malloc(sizeof(float) * (size_t)batch * (size_t)seq_length * (size_t)V) : NULL;
    double *logprobs = malloc(sizeof(double) * (size_t)batch * (size_t)seq_length);
    CHECK(input && target && mask && (logits || !last_stage) && logprobs, "out of host memory for %d evaluation windows", batch);
    for (int64_t first = 0; first < windows; first += batch) {
        int B = windows - first < batch ? (int)(windows - first) : batch;
        for (int b = 0; b < B; b++) {
            int64_t idx = first + b, start = idx * stride;
            for (int t = 0; t <= seq_length; t++) {
                int64_t pos = start + t;
                int present = pos < n;
                int token = present ? tokens[pos] : eod;
                if (t < seq_length) input[b * seq_length + t] = token;
                if (t > 0) {
                    target[b * seq_length + t - 1] = token;
                    /* pad_mask: real tokens; after the first window only the last `stride` */
                    int counted = present && (stride == seq_length || idx == 0 || t - 1 >= seq_length - stride);
                    mask[b * seq_length + t - 1] = (unsigned char)counted;
                }
            }
        }
        gpt_inference_forward(inf, input, B, seq_length, 0, logits);
        /* the last pipeline stage's log-probabilities of the targets travel, not its logits */
        if (last_stage)
            for (int i = 0; i < B * seq_length; i++)
                logprobs[i] = mask[i] ? token_log_prob(logits + (size_t)i * V, vocab_size, target[i]) : 0.0;
        gpt_inference_share(inf, logprobs, (size_t)B * (size_t)seq_length, MPI_DOUBLE);
        for (int i = 0; i < B * seq_length; i++)
            if (mask[i]) r->total_loss -= logprobs[i];
    }
    free(logprobs);
    free(input);
    free(target);
    free(mask);
    free(logits);
}

void wikitext_finish(wikitext_result *r) {
    r->avg_loss = r->total_loss / (double)(r->num_tokenized_tokens - 1);
    r->ppl = exp(fmin(20.0, r->avg_loss));
    r->token_ratio = (double)(r->num_tokenized_tokens - 1) / (double)(r->num_original_tokens - 1);
    r->adjusted_ppl = exp(fmin(20.0, r->avg_loss * r->token_ratio));
}

int lambada_correct(gpt_inference *inf, const int32_t *context, int num_context, const int32_t *labels,
                    int num_labels, int vocab_size) {
    int V = inf->model->config.padded_vocab_size, n = num_context + num_labels - 1;
    int *input = malloc(sizeof(int) * (size_t)n);
    int last_stage = gpt_inference_last_stage(inf);
    float *logits = last_stage ? malloc(sizeof(float) * (size_t)n * (size_t)V) : NULL;
    CHECK(input && (logits || !last_stage), "out of host memory for a LAMBADA sample");
    for (int t = 0; t < n; t++) input[t] = t < num_context ? context[t] : labels[t - num_context];
    gpt_inference_forward(inf, input, 1, n, 0, logits);
    int correct = 1;
    if (last_stage)
        for (int k = 0; k < num_labels; k++) {
            const float *row = logits + (size_t)(num_context - 1 + k) * V;
            int best = 0;
            for (int v = 1; v < vocab_size; v++) if (row[v] > row[best]) best = v;
            if (best != labels[k]) correct = 0;
        }
    /* the last pipeline stage's verdict, not its logits */
    gpt_inference_share(inf, &correct, 1, MPI_INT);
    free(input);
    free(logits);
    return correct;
}
