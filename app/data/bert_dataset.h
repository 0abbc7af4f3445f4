/* bert_dataset.h: the samples of Megatron-Core's BERTMaskedWordPieceDataset
 * (megatron/core/datasets/bert_dataset.py, masked_dataset.py, helpers.cpp build_mapping) over a
 * sentence-split corpus: the sample index (runs of whole sentences of one document, a target
 * length shortened with --short-seq-prob, shuffled) and, per sample index, the masked-LM fields
 * (text, types, labels, is_random, padding mask, loss mask, truncated) drawn from
 * numpy.random.RandomState((seed + index) % 2^32) in Megatron's order: the sentence-order split
 * and swap (binary head), the trimming, the whole-word N-gram masking (N <= 3, probabilities
 * 1/N normalised) with 80% [MASK], 10% a random id, 10% kept.
 *
 * Splits and blends are the GPT datasets' (gpt_dataset.h with gpt_data_config.bert set): only
 * the per-corpus dataset differs. Sample i of a split equals Megatron-Core's for the same
 * corpora, flags, vocabulary and seed (tests/tools/megatron_bert_samples.py checks it). */
#ifndef BERT_DATASET_H
#define BERT_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "app/data/numpy_random.h"

enum { BERT_MAX_NGRAM = 7 };

/* the tokenizer as the dataset sees it */
typedef struct bert_vocab {
    int cls, sep, mask, pad;        /* pad: Megatron's _pad_token_id */
    int64_t size;                   /* ids 0 .. size-1: len(token_lookup), the random draws */
    const uint8_t *word_piece;      /* [size]: 1 where the token starts with "##" */
} bert_vocab;

/* The vocabulary as Megatron's BERT tokenizers (megatron.core.tokenizers: Hugging Face's
 * BertTokenizer over vocab_file) give it to the dataset: id = line number (the line without its
 * newline), [CLS] [SEP] [MASK] [PAD] as special ids, and for BertWordPieceCase the 100
 * <extra_id_i> that build_tokenizer adds after the file's tokens ([BOS]/[EOS] are not added
 * there). vocab->size is the tokenizer's vocab_size, from which pretrain_bert and finetune_bert
 * pad the model's vocabulary (app/training/data_setup.h data_setup_vocab_size), so the random
 * draws over [0, size) are ids of the model. Fills *vocab with *word_piece (malloc'd; the caller
 * frees it). Returns 0, or -1 with "FILE: what" in err (unreadable, a special token missing or
 * twice). */
int bert_vocab_load(const char *vocab_file, const char *tokenizer_type, bert_vocab *vocab,
                    uint8_t **word_piece, char *err, size_t errlen);

typedef struct bert_dataset_config {
    double mask_prob;               /* --mask-prob (0.15) */
    double short_seq_prob;          /* --short-seq-prob (0.1) */
    int max_ngram;                  /* masking_max_ngram: 3 for BERT */
    int binary_head;                /* classification_head: !--bert-no-binary-head */
    bert_vocab vocab;
} bert_dataset_config;

/* one sample: the arrays hold seq_length values each (Megatron's int64 arrays) */
typedef struct bert_sample {
    int64_t *text, *types, *labels, *padding_mask, *loss_mask;
    int is_random, truncated;
} bert_sample;

/* helpers.cpp build_mapping over documents d = 0 .. num_documents-1 whose sentences are
 * [docs[d], docs[d + 1]) with lengths sizes[]: rows (first sentence, last + 1, target length),
 * epochs repeated until max_samples rows exist (max_samples < 0: one epoch), then shuffled with
 * std::mt19937_64(seed + 1). Returns the rows (malloc'd, 3 per sample) and their count in
 * *num_samples; NULL with *num_samples 0 when an epoch yields no sample (Megatron would loop
 * for 2^31 epochs). */
int64_t *bert_build_sample_index(const int64_t *docs, int64_t num_documents,
                                 const int32_t *sizes, int64_t max_samples, int max_seq_length,
                                 double short_seq_prob, int32_t seed, int min_sentences,
                                 int64_t *num_samples);

/* the scratch a sample needs (per thread; grows as needed) */
typedef struct bert_scratch {
    int64_t *ints;
    size_t capacity;
} bert_scratch;
void bert_scratch_free(bert_scratch *s);

/* BERTMaskedWordPieceDataset.__getitem__(index) for a sample of num_sentences sentences whose
 * tokens are tokens[] back to back (lengths in sentence_lengths[]), target length `target`,
 * sequence length seq_length, seed --seed. Returns 0, or -1 with why (a token id outside the
 * vocabulary, one sentence where the binary head needs two). */
int bert_build_sample(const bert_dataset_config *cfg, int seq_length, uint64_t seed,
                      int64_t index, const int32_t *tokens, const int64_t *sentence_lengths,
                      int num_sentences, int64_t target, bert_sample *out, bert_scratch *scratch,
                      char *why, size_t whylen);

/* std::mt19937_64 (the sample index's shuffle) */
typedef struct mt19937_64 {
    uint64_t state[312];
    int pos;
} mt19937_64;
void mt19937_64_seed(mt19937_64 *g, uint64_t seed);
uint64_t mt19937_64_next(mt19937_64 *g);

#endif
