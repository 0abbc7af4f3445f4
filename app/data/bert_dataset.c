/* bert_dataset.c: Megatron-Core's BERT sample index and masked-LM samples (see bert_dataset.h).
 * Transcribed step by step from helpers.cpp build_mapping_impl, bert_dataset.py __getitem__ and
 * masked_dataset.py _create_masked_lm_predictions with the configuration pretrain_bert.py
 * passes (whole-word masking, no permutation, N-gram probabilities proportional to 1/N). */
#include "app/data/bert_dataset.h"
#include "app/core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LONG_SENTENCE_LEN = 512 };  /* helpers.cpp: documents with a longer sentence are skipped */

/* ---- std::mt19937_64 ------------------------------------------------------------------------ */
enum { MT64_N = 312, MT64_M = 156 };
#define MT64_MATRIX_A 0xB5026F5AA96619E9ull
#define MT64_UPPER 0xFFFFFFFF80000000ull
#define MT64_LOWER 0x7FFFFFFFull

void mt19937_64_seed(mt19937_64 *g, uint64_t seed) {
    g->state[0] = seed;
    for (int i = 1; i < MT64_N; i++)
        g->state[i] = 6364136223846793005ull * (g->state[i - 1] ^ (g->state[i - 1] >> 62)) +
                      (uint64_t)i;
    g->pos = MT64_N;
}

uint64_t mt19937_64_next(mt19937_64 *g) {
    if (g->pos == MT64_N) {
        for (int i = 0; i < MT64_N; i++) {
            uint64_t y = (g->state[i] & MT64_UPPER) | (g->state[(i + 1) % MT64_N] & MT64_LOWER);
            g->state[i] = g->state[(i + MT64_M) % MT64_N] ^ (y >> 1) ^ ((y & 1) ? MT64_MATRIX_A : 0);
        }
        g->pos = 0;
    }
    uint64_t x = g->state[g->pos++];
    x ^= (x >> 29) & 0x5555555555555555ull;
    x ^= (x << 17) & 0x71D67FFFEDA60000ull;
    x ^= (x << 37) & 0xFFF7EEE000000000ull;
    x ^= x >> 43;
    return x;
}

/* ---- helpers.cpp build_mapping ---------------------------------------------------------------- */
/* get_target_sample_len: std::mt19937 is numpy's MT19937 (same seeding and tempering) */
static int32_t target_sample_length(int32_t short_seq_ratio, int32_t max_length,
                                    numpy_random_state *rand32) {
    if (short_seq_ratio == 0) return max_length;
    uint32_t random_number = numpy_random_next32(rand32);
    if (random_number % (uint32_t)short_seq_ratio == 0)
        return 2 + (int32_t)(random_number % (uint32_t)(max_length - 1));
    return max_length;
}

int64_t *bert_build_sample_index(const int64_t *docs, int64_t num_documents,
                                 const int32_t *sizes, int64_t max_samples, int max_seq_length,
                                 double short_seq_prob, int32_t seed, int min_sentences,
                                 int64_t *num_samples) {
    CHECK(max_seq_length > 1 && short_seq_prob >= 0 && short_seq_prob <= 1 && seed > 0,
          "bert_build_sample_index: bad arguments");
    int32_t short_seq_ratio = short_seq_prob > 0 ? (int32_t)round(1.0 / short_seq_prob) : 0;
    int64_t epochs = max_samples >= 0 ? INT32_MAX - 1 : 1;
    numpy_random_state rand32;
    numpy_random_seed(&rand32, (uint32_t)seed);
    int64_t count = 0, capacity = 1024;
    int64_t *maps = malloc(sizeof(int64_t) * 3 * (size_t)capacity);
    CHECK(maps, "out of memory");
    for (int64_t epoch = 0; epoch < epochs; epoch++) {
        if (max_samples >= 0 && count >= max_samples) break;
        int64_t at_epoch_start = count;
        for (int64_t doc = 0; doc < num_documents; doc++) {
            int64_t first = docs[doc], last = docs[doc + 1];
            int64_t prev_start = first, remaining = last - first;
            int long_sentence = 0;
            if (remaining > 1)
                for (int64_t s = first; s < last && !long_sentence; s++)
                    long_sentence = sizes[s] > LONG_SENTENCE_LEN;
            if (remaining < min_sentences || long_sentence) continue;
            int32_t seq_len = 0, num_sent = 0;
            int32_t target = target_sample_length(short_seq_ratio, max_seq_length, &rand32);
            for (int64_t s = first; s < last; s++) {
                seq_len += sizes[s];
                num_sent++;
                remaining--;
                if ((seq_len >= target && remaining > 1 && num_sent >= min_sentences) ||
                    remaining == 0) {
                    if (count == capacity) {
                        capacity *= 2;
                        maps = realloc(maps, sizeof(int64_t) * 3 * (size_t)capacity);
                        CHECK(maps, "out of memory");
                    }
                    maps[3 * count] = prev_start;
                    maps[3 * count + 1] = s + 1;
                    maps[3 * count + 2] = target;
                    count++;
                    prev_start = s + 1;
                    target = target_sample_length(short_seq_ratio, max_seq_length, &rand32);
                    seq_len = 0;
                    num_sent = 0;
                }
            }
        }
        if (count == at_epoch_start) break;
    }
    if (count == 0) {
        free(maps);
        *num_samples = 0;
        return NULL;
    }
    mt19937_64 rand64;
    mt19937_64_seed(&rand64, (uint64_t)seed + 1);
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = (int64_t)(mt19937_64_next(&rand64) % (uint64_t)(i + 1));
        for (int k = 0; k < 3; k++) {
            int64_t t = maps[3 * i + k];
            maps[3 * i + k] = maps[3 * j + k];
            maps[3 * j + k] = t;
        }
    }
    *num_samples = count;
    return maps;
}

/* ---- the vocabulary ----------------------------------------------------------------------------- */
int bert_vocab_load(const char *vocab_file, const char *tokenizer_type, bert_vocab *vocab,
                    uint8_t **word_piece, char *err, size_t errlen) {
    int cased = !strcmp(tokenizer_type, "BertWordPieceCase");
    if (!cased && strcmp(tokenizer_type, "BertWordPieceLowerCase"))
        return snprintf(err, errlen, "the BERT dataset needs --tokenizer-type "
                        "BertWordPieceLowerCase or BertWordPieceCase, not %s", tokenizer_type), -1;
    FILE *f = fopen(vocab_file, "rb");
    if (!f) return snprintf(err, errlen, "--vocab-file %s: cannot open it", vocab_file), -1;
    int64_t capacity = 1024, count = 0;
    uint8_t *flags = malloc((size_t)capacity);
    static const char *const specials[4] = {"[CLS]", "[SEP]", "[MASK]", "[PAD]"};
    int64_t special_ids[4] = {-1, -1, -1, -1};
    char line[4096];
    CHECK(flags, "out of memory");
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            fclose(f);
            free(flags);
            return snprintf(err, errlen, "--vocab-file %s: line %lld is over %zu bytes",
                            vocab_file, (long long)count + 1, sizeof line - 2), -1;
        }
        if (n && line[n - 1] == '\n') line[--n] = '\0';
        if (n && line[n - 1] == '\r') line[--n] = '\0';  /* Python's universal newlines */
        if (count == capacity) {
            capacity *= 2;
            flags = realloc(flags, (size_t)capacity);
            CHECK(flags, "out of memory");
        }
        flags[count] = !strncmp(line, "##", 2);
        for (int s = 0; s < 4; s++) {
            if (strcmp(line, specials[s])) continue;
            if (special_ids[s] >= 0) {
                fclose(f);
                free(flags);
                return snprintf(err, errlen, "--vocab-file %s: %s appears twice (lines %lld and "
                                "%lld)", vocab_file, specials[s], (long long)special_ids[s] + 1,
                                (long long)count + 1), -1;
            }
            special_ids[s] = count;
        }
        count++;
    }
    fclose(f);
    for (int s = 0; s < 4; s++)
        if (special_ids[s] < 0) {
            free(flags);
            return snprintf(err, errlen, "--vocab-file %s: has no %s token (BERT needs [CLS], "
                            "[SEP], [MASK] and [PAD])", vocab_file, specials[s]), -1;
        }
    if (cased) {  /* <extra_id_0> .. <extra_id_99> after the file's tokens */
        flags = realloc(flags, (size_t)(count + 100));
        CHECK(flags, "out of memory");
        memset(flags + count, 0, 100);
        count += 100;
    }
    vocab->cls = (int)special_ids[0];
    vocab->sep = (int)special_ids[1];
    vocab->mask = (int)special_ids[2];
    vocab->pad = (int)special_ids[3];
    vocab->size = count;
    vocab->word_piece = flags;
    *word_piece = flags;
    return 0;
}

/* ---- bert_dataset.py __getitem__ -------------------------------------------------------------- */
void bert_scratch_free(bert_scratch *s) {
    free(s->ints);
    s->ints = NULL;
    s->capacity = 0;
}

/* _get_token_mask: 80% [MASK], else half the time a random vocabulary id, else kept (-1) */
static int64_t token_mask(const bert_vocab *v, numpy_random_state *rs) {
    if (numpy_random_double(rs) < 0.8) return v->mask;
    if (numpy_random_double(rs) >= 0.5) return numpy_random_randint(rs, 0, v->size);
    return -1;
}

/* numpy.random.choice(ngram_nvals, p=nprobs / nprobs.sum()) with nprobs = (1/N) / sum(1/N):
 * the cdf as numpy computes it (sequential sums below 8 terms, cumsum, divided by its end) */
static void ngram_cdf(int max_ngram, double *cdf) {
    double nprobs[BERT_MAX_NGRAM], sum = 0, p_sum = 0;
    for (int i = 0; i < max_ngram; i++) sum += (nprobs[i] = 1.0 / (double)(i + 1));
    for (int i = 0; i < max_ngram; i++) nprobs[i] /= sum;
    for (int i = 0; i < max_ngram; i++) p_sum += nprobs[i];
    double running = 0;
    for (int i = 0; i < max_ngram; i++) cdf[i] = running += nprobs[i] / p_sum;
    double end = cdf[max_ngram - 1];
    for (int i = 0; i < max_ngram; i++) cdf[i] /= end;
}

int bert_build_sample(const bert_dataset_config *cfg, int seq_length, uint64_t seed,
                      int64_t index, const int32_t *tokens, const int64_t *sentence_lengths,
                      int num_sentences, int64_t target, bert_sample *out, bert_scratch *scratch,
                      char *why, size_t whylen) {
    const bert_vocab *v = &cfg->vocab;
    CHECK(cfg->max_ngram >= 1 && cfg->max_ngram <= BERT_MAX_NGRAM, "masking_max_ngram %d",
          cfg->max_ngram);
    numpy_random_state rs;
    numpy_random_seed(&rs, (uint32_t)((seed + (uint64_t)index) % 4294967296ull));
    /* [CLS] A [SEP] B [SEP] must fit: Megatron's index holds targets of at most seq_length - 3 */
    if (target < 0 || target > seq_length - 3)
        return snprintf(why, whylen, "target length %lld outside [0, --seq-length %d - 3]",
                        (long long)target, seq_length), -1;

    /* split the sentences into A = [0, pivot) and B = [pivot, n), swapped when is_next_random */
    int pivot = num_sentences, is_next_random = 0;
    if (cfg->binary_head) {
        if (num_sentences < 2)
            return snprintf(why, whylen, "the sample holds one sentence; the binary head needs two"),
                   -1;
        pivot = 1;
        if (num_sentences >= 3) pivot = (int)numpy_random_randint(&rs, 1, num_sentences);
        is_next_random = numpy_random_double(&rs) < 0.5;
    }
    int64_t split_at = 0, total = 0;
    for (int s = 0; s < num_sentences; s++) {
        if (s == pivot) split_at = total;
        total += sentence_lengths[s];
    }
    if (pivot == num_sentences) split_at = total;
    int64_t a_begin = 0, a_end = split_at, b_begin = split_at, b_end = total;
    if (is_next_random) {
        a_begin = split_at, a_end = total;
        b_begin = 0, b_end = split_at;
    }

    /* trim from either end of the longer segment (B on ties) to the target length */
    int truncated = 0;
    while ((a_end - a_begin) + (b_end - b_begin) > target) {
        truncated = 1;
        int64_t *begin = &b_begin, *end = &b_end;
        if (a_end - a_begin > b_end - b_begin) begin = &a_begin, end = &a_end;
        if (numpy_random_double(&rs) < 0.5) (*begin)++;
        else (*end)--;
    }

    /* [CLS] A [SEP] (B [SEP]) and the token types */
    int64_t length_a = a_end - a_begin, length_b = b_end - b_begin;
    int64_t length = 2 + length_a + (length_b > 0 ? length_b + 1 : 0);
    CHECK(length <= seq_length, "sample of %lld tokens", (long long)length);
    size_t need = 5 * (size_t)(length + 1);
    if (scratch->capacity < need) {
        free(scratch->ints);
        scratch->ints = malloc(sizeof(int64_t) * need);
        CHECK(scratch->ints, "out of memory");
        scratch->capacity = need;
    }
    int64_t *ids = scratch->ints, *positions = ids + (length + 1),
            *candidate_start = positions + (length + 1), *order = candidate_start + (length + 1),
            *masked = order + (length + 1);
    int64_t n = 0;
    ids[n] = v->cls, out->types[n++] = 0;
    for (int64_t i = a_begin; i < a_end; i++) ids[n] = tokens[i], out->types[n++] = 0;
    ids[n] = v->sep, out->types[n++] = 0;
    if (length_b > 0) {
        for (int64_t i = b_begin; i < b_end; i++) ids[n] = tokens[i], out->types[n++] = 1;
        ids[n] = v->sep, out->types[n++] = 1;
    }

    /* masking candidates: whole words, a "##" piece joining the word before it */
    int64_t candidates = 0, flat = 0;
    for (int64_t i = 0; i < length; i++) {
        masked[i] = 0;
        if (ids[i] == v->cls || ids[i] == v->sep) continue;
        if (ids[i] < 0 || ids[i] >= v->size)
            return snprintf(why, whylen, "token id %lld is outside the vocabulary [0, %lld)",
                            (long long)ids[i], (long long)v->size), -1;
        if (!v->word_piece[ids[i]] || candidates == 0) candidate_start[candidates++] = flat;
        positions[flat++] = i;
    }
    candidate_start[candidates] = flat;

    double n_maskings = cfg->mask_prob * (double)target;
    double by_length = (double)(int64_t)nearbyint((double)length * cfg->mask_prob);
    if (by_length < 1) by_length = 1;
    if (by_length < n_maskings) n_maskings = by_length;
    double cdf[BERT_MAX_NGRAM];
    ngram_cdf(cfg->max_ngram, cdf);
    for (int64_t c = 0; c < candidates; c++) order[c] = c;
    numpy_random_shuffle(&rs, order, candidates);

    for (int64_t i = 0; i < length; i++) {
        out->text[i] = ids[i];
        out->labels[i] = -1;
        out->loss_mask[i] = 0;
    }
    int64_t masked_count = 0;
    for (int64_t c = 0; c < candidates; c++) {
        if ((double)masked_count >= n_maskings) break;
        double u = numpy_random_double(&rs);
        int ngram = 0;
        while (ngram < cfg->max_ngram - 1 && cdf[ngram] <= u) ngram++;
        ngram++;  /* searchsorted(cdf, u, side="right") + 1 */
        int64_t first = order[c], begin = 0, end = 0, skip = 0;
        for (;;) {
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
        for (int64_t k = begin; k < end; k++) {
            int64_t at = positions[k];
            masked[at] = 1;
            int64_t replacement = token_mask(v, &rs);
            out->text[at] = replacement >= 0 ? replacement : ids[at];
            out->labels[at] = ids[at];
            out->loss_mask[at] = 1;
            masked_count++;
        }
    }

    /* padding, the padding mask, pad ids mapped to 0 */
    for (int64_t i = length; i < seq_length; i++) {
        out->text[i] = v->pad;
        out->types[i] = v->pad;
        out->labels[i] = -1;
        out->loss_mask[i] = 0;
    }
    for (int64_t i = 0; i < seq_length; i++) {
        out->padding_mask[i] = out->text[i] == v->pad ? v->pad : 1;
        if (out->text[i] == v->pad) out->text[i] = 0;
        if (out->labels[i] == v->pad) out->labels[i] = 0;
    }
    out->is_random = is_next_random;
    out->truncated = truncated;
    return 0;
}
