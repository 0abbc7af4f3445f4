/* zeroshot_eval.h: Megatron's zero-shot GPT evaluations (tasks/zeroshot_gpt): WikiText-103
 * perplexity over windows of seq_length tokens that overlap by all but overlapping_eval tokens
 * (only the last overlapping_eval targets of every window after the first count), and LAMBADA
 * cloze accuracy (a sample is right when the model's argmax equals every token of the last
 * word, teacher-forced). The forwards are the generation forward (app/model/gpt_inference.h)
 * started at position 0 for each window, without dropout. Losses and argmax are over the
 * tokenizer's vocab_size ids (the padded rows of the output layer are not tokens: see sampling.h).
 * With pipeline parallelism the last stage computes them and sends only the results. */
#ifndef ZEROSHOT_EVAL_H
#define ZEROSHOT_EVAL_H

#include <stdint.h>

#include "app/model/gpt_inference.h"
#include "app/tokenizers/tokenizer.h"

typedef struct wikitext_result {
    int64_t num_original_tokens;   /* words of the raw file: len(text.strip().split(" ")) */
    int64_t num_tokenized_tokens;  /* tokens of the detokenized text */
    int64_t num_windows;
    double total_loss;             /* summed over the counted targets */
    double avg_loss, ppl, adjusted_ppl, token_ratio;
} wikitext_result;

/* tokens[0..n) evaluated in windows (Megatron's _LMDataset), batch windows per forward */
void wikitext_evaluate(gpt_inference *inf, const int32_t *tokens, int64_t n, int seq_length, int overlapping_eval,
                       int batch, int eod, int vocab_size, wikitext_result *r);
/* avg_loss, ppl, adjusted_ppl, token_ratio from the totals (Megatron's formulas) */
void wikitext_finish(wikitext_result *r);

/* the number of words Megatron counts in the raw text: len(text.strip().split(" ")) */
int64_t wikitext_original_tokens(const char *text);

/* 1 when argmax of the model equals labels[0..num_labels) after context[0..num_context) */
int lambada_correct(gpt_inference *inf, const int32_t *context, int num_context, const int32_t *labels,
                    int num_labels, int vocab_size);

#endif
