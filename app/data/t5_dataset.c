/* t5_dataset.c: Megatron-Core's T5 span-corruption samples (see t5_dataset.h). Transcribed step
 * by step from t5_dataset.py __getitem__ and masked_dataset.py _create_masked_lm_predictions
 * with pretrain_t5.py's configuration (whole words, geometric N clipped at 10, no permutation,
 * every masked token [MASK], which the encoder input never shows: its spans become sentinels). */
#include "app/data/t5_dataset.h"
#include "app/core/error.h"
#include "app/data/bert_dataset.h"
#include "app/data/numpy_random.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SpanBERT's span-length distribution (masked_dataset.py: p = 0.2) */
#define T5_GEOMETRIC_P 0.2

int t5_vocab_load(const char *vocab_file, const char *tokenizer_type, t5_vocab *vocab,
                  uint8_t **word_piece, char *err, size_t errlen) {
    if (strcmp(tokenizer_type, "BertWordPieceCase"))
        return snprintf(err, errlen, "the T5 dataset needs sentinel tokens, which Megatron's "
                        "build_tokenizer gives --tokenizer-type BertWordPieceCase only (100 "
                        "<extra_id_i>), not %s", tokenizer_type), -1;
    bert_vocab bert;
    if (bert_vocab_load(vocab_file, tokenizer_type, &bert, word_piece, err, errlen)) return -1;
    /* Hugging Face adds only the sentinels the file lacks, keeping the file's ids for the
     * others; a file holding some is not modelled (the real BERT vocabularies hold none) */
    FILE *f = fopen(vocab_file, "rb");
    char line[4096];
    for (long number = 1; f && fgets(line, sizeof line, f); number++)
        if (!strncmp(line, "<extra_id_", 10)) {
            fclose(f);
            free(*word_piece);
            *word_piece = NULL;
            line[strcspn(line, "\r\n")] = '\0';
            return snprintf(err, errlen, "--vocab-file %s: line %ld holds %s, a sentinel token "
                            "that the T5 tokenizer adds itself (a vocabulary holding sentinels is "
                            "not supported)", vocab_file, number, line), -1;
        }
    if (f) fclose(f);
    memset(vocab, 0, sizeof *vocab);
    vocab->cls = vocab->bos = bert.cls;
    vocab->sep = vocab->eos = bert.sep;
    vocab->mask = bert.mask;
    vocab->pad = bert.pad;
    vocab->size = bert.size;
    vocab->word_piece = bert.word_piece;
    vocab->num_sentinels = T5_MAX_SENTINELS;  /* bert_vocab_load appended them last */
    for (int i = 0; i < T5_MAX_SENTINELS; i++) vocab->sentinels[i] = bert.size - T5_MAX_SENTINELS + i;
    return 0;
}

void t5_scratch_free(t5_scratch *s) {
    free(s->ints);
    s->ints = NULL;
    s->capacity = 0;
}

/* one masked span: candidate positions positions[begin .. end) (ascending) */
typedef struct span {
    int64_t begin, end;
} span;

static int compare_spans_by_start(const void *a, const void *b, const int64_t *positions) {
    int64_t x = positions[((const span *)a)->begin], y = positions[((const span *)b)->begin];
    return (x > y) - (x < y);
}

/* masked_spans = sorted(masked_spans, key=first position): spans are disjoint, so a plain
 * insertion sort on their first positions gives Python's order */
static void sort_spans(span *spans, int64_t count, const int64_t *positions) {
    for (int64_t i = 1; i < count; i++) {
        span s = spans[i];
        int64_t j = i;
        while (j > 0 && compare_spans_by_start(&spans[j - 1], &s, positions) > 0) {
            spans[j] = spans[j - 1];
            j--;
        }
        spans[j] = s;
    }
}

int t5_build_sample(const t5_dataset_config *cfg, int encoder_seq_length, uint64_t seed,
                    int64_t index, const int32_t *tokens, int64_t num_tokens, int64_t target,
                    t5_sample *out, t5_scratch *scratch, char *why, size_t whylen) {
    const t5_vocab *v = &cfg->vocab;
    CHECK(cfg->max_ngram >= 1 && cfg->max_ngram <= T5_MAX_NGRAM, "masking_max_ngram %d",
          cfg->max_ngram);
    if (target < 0 || target > encoder_seq_length)
        return snprintf(why, whylen, "target length %lld outside [0, --encoder-seq-length %d]",
                        (long long)target, encoder_seq_length), -1;
    numpy_random_state rs;
    numpy_random_seed(&rs, (uint32_t)((seed + (uint64_t)index) % 4294967296ull));

    /* the sentences flattened, truncated to the target length */
    int truncated = num_tokens > target;
    int64_t length = truncated ? target : num_tokens;

    size_t need = 4 * (size_t)(length + 1) + 2 * (size_t)(length + 1);
    if (scratch->capacity < need) {
        free(scratch->ints);
        scratch->ints = malloc(sizeof(int64_t) * need);
        CHECK(scratch->ints, "out of memory");
        scratch->capacity = need;
    }
    int64_t *positions = scratch->ints, *candidate_start = positions + (length + 1),
            *order = candidate_start + (length + 1), *masked = order + (length + 1);
    span *spans = (span *)(masked + (length + 1));  /* at most length spans of 2 values */

    /* masking candidates: whole words, a "##" piece joining the word before it; [CLS] and
     * [SEP] ids are never candidates */
    int64_t candidates = 0, flat = 0;
    for (int64_t i = 0; i < length; i++) {
        masked[i] = 0;
        if (tokens[i] < 0 || tokens[i] >= v->size)
            return snprintf(why, whylen, "token id %d is outside the vocabulary [0, %lld)",
                            tokens[i], (long long)v->size), -1;
        if (tokens[i] == v->cls || tokens[i] == v->sep) continue;
        if (!v->word_piece[tokens[i]] || candidates == 0) candidate_start[candidates++] = flat;
        positions[flat++] = i;
    }
    candidate_start[candidates] = flat;

    /* n_maskings = min(p * target, max(1, int(round(len(tokens) * p)))) */
    double n_maskings = cfg->mask_prob * (double)target;
    double by_length = (double)(int64_t)nearbyint((double)length * cfg->mask_prob);
    if (by_length < 1) by_length = 1;
    if (by_length < n_maskings) n_maskings = by_length;
    for (int64_t c = 0; c < candidates; c++) order[c] = c;
    numpy_random_shuffle(&rs, order, candidates);

    int64_t masked_count = 0, num_spans = 0;
    for (int64_t c = 0; c < candidates; c++) {
        if ((double)masked_count >= n_maskings) break;
        int64_t ngram = numpy_random_geometric(&rs, T5_GEOMETRIC_P);
        if (ngram > cfg->max_ngram) ngram = cfg->max_ngram;
        int64_t first = order[c], begin = 0, end = 0;
        int skip = 0;
        for (;;) {  /* the longest N-gram from this candidate that stays within n_maskings */
            int64_t last = first + ngram < candidates ? first + ngram : candidates;
            begin = candidate_start[first], end = candidate_start[last];
            ngram--;
            if (n_maskings >= (double)(masked_count + end - begin)) break;
            if (ngram == 0) { skip = 1; break; }
        }
        if (skip) continue;
        int taken = 0;
        for (int64_t k = begin; k < end; k++) taken |= (int)masked[positions[k]];
        if (taken) continue;
        for (int64_t k = begin; k < end; k++) masked[positions[k]] = 1;
        masked_count += end - begin;
        spans[num_spans].begin = begin;
        spans[num_spans].end = end;
        num_spans++;
    }
    /* the second shuffle of candidate_ngrams that follows draws nothing anyone reads */
    sort_spans(spans, num_spans, positions);
    if (num_spans > v->num_sentinels)
        return snprintf(why, whylen, "%lld masked spans, more than the tokenizer's %d sentinel "
                        "tokens (Megatron stops: pop from an empty deque)", (long long)num_spans,
                        v->num_sentinels), -1;

    /* encoder input: the tokens with each span replaced by its sentinel; decoder input [bos]
     * then (sentinel, span tokens) per span; labels the same without bos, closed by eos */
    int64_t decoder_length = 1;
    for (int64_t s = 0; s < num_spans; s++) decoder_length += 1 + spans[s].end - spans[s].begin;
    if (decoder_length > cfg->decoder_seq_length)
        return snprintf(why, whylen, "the decoder input holds %lld tokens ([bos], %lld spans "
                        "with their sentinels), over --decoder-seq-length %d (Megatron's "
                        "assert length_pads_decoder >= 0 stops there)", (long long)decoder_length,
                        (long long)num_spans, cfg->decoder_seq_length), -1;
    int64_t e = 0, d = 0, from = 0;
    out->text_dec[d] = v->bos;
    d++;
    for (int64_t s = 0; s < num_spans; s++) {
        int64_t sentinel = v->sentinels[s];
        int64_t span_first = positions[spans[s].begin], span_last = positions[spans[s].end - 1];
        for (int64_t i = from; i < span_first; i++) out->text_enc[e++] = tokens[i];
        out->text_enc[e++] = sentinel;
        out->labels[d - 1] = sentinel;
        out->text_dec[d++] = sentinel;
        for (int64_t k = spans[s].begin; k < spans[s].end; k++) {
            out->labels[d - 1] = tokens[positions[k]];
            out->text_dec[d++] = tokens[positions[k]];
        }
        from = span_last + 1;
    }
    for (int64_t i = from; i < length; i++) out->text_enc[e++] = tokens[i];
    out->labels[d - 1] = v->eos;
    CHECK(e <= encoder_seq_length, "encoder input of %lld tokens", (long long)e);

    /* padding; the masks compare with the pad id before the pads become 0 */
    for (int64_t i = e; i < encoder_seq_length; i++) out->text_enc[i] = v->pad;
    for (int64_t i = d; i < cfg->decoder_seq_length; i++) {
        out->text_dec[i] = v->pad;
        out->labels[i] = -1;
    }
    for (int64_t i = 0; i < encoder_seq_length; i++) {
        out->enc_mask[i] = out->text_enc[i] != v->pad;
        if (out->text_enc[i] == v->pad) out->text_enc[i] = 0;
    }
    for (int64_t i = 0; i < cfg->decoder_seq_length; i++) {
        out->dec_mask[i] = out->text_dec[i] != v->pad;
        out->loss_mask[i] = i < d;
        if (out->text_dec[i] == v->pad) out->text_dec[i] = 0;
        if (out->labels[i] == v->pad) out->labels[i] = 0;
    }
    out->truncated = truncated;
    return 0;
}

void t5_attention_mask_b1ss(const int64_t *query_tokens, int num_queries,
                            const int64_t *key_tokens, int num_keys, int causal,
                            uint8_t *masked) {
    for (int q = 0; q < num_queries; q++)
        for (int k = 0; k < num_keys; k++) {
            int allowed = key_tokens[k] >= 1 && query_tokens[q] >= 1 && (!causal || k <= q);
            masked[(size_t)q * (size_t)num_keys + (size_t)k] = (uint8_t)!allowed;
        }
}
