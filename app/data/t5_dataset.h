/* t5_dataset.h: the samples of Megatron-Core's T5MaskedWordPieceDataset
 * (megatron/core/datasets/t5_dataset.py, masked_dataset.py) with the configuration
 * examples/t5/pretrain_t5.py passes: span corruption over whole words, N-gram lengths
 * min(geometric(0.2), 10) (SpanBERT), every masked span replaced in the encoder input by the
 * next sentinel (the tokenizer's additional special tokens <extra_id_0>, <extra_id_1>, ...),
 * the decoder input [bos] + (sentinel, span tokens)..., the labels the same shifted by one and
 * closed by eos, the loss mask over the decoder tokens and the padding masks of both sides.
 *
 * The sample index is the BERT one (bert_build_sample_index) with target lengths up to
 * --encoder-seq-length - 2 and one sentence or more per sample; the draws of sample i come from
 * numpy.random.RandomState((seed + i) % 2^32). Splits and blends are the GPT datasets'
 * (gpt_dataset.h with gpt_data_config.t5 set). Sample i equals Megatron-Core's for the same
 * corpora, flags, vocabulary and seed (tests/tools/megatron_t5_samples.py checks it). */
#ifndef T5_DATASET_H
#define T5_DATASET_H

#include <stddef.h>
#include <stdint.h>

enum { T5_MAX_NGRAM = 10, T5_MAX_SENTINELS = 100 };

/* the tokenizer as the dataset sees it: Megatron-Core's HuggingFaceTokenizer over a BERT
 * vocabulary, whose bos is [CLS] and eos [SEP] (BertTokenizer has neither; the wrapper takes
 * cls and sep), and whose additional_special_tokens_ids are the sentinels */
typedef struct t5_vocab {
    int cls, sep, mask, pad, bos, eos;
    int64_t size;                       /* ids 0 .. size-1 */
    const uint8_t *word_piece;          /* [size]: 1 where the token starts with "##" */
    int num_sentinels;
    int64_t sentinels[T5_MAX_SENTINELS];
} t5_vocab;

/* The vocabulary of --tokenizer-type BertWordPieceCase (build_tokenizer gives it the 100
 * sentinels <extra_id_0> .. <extra_id_99>, after the file's tokens, whatever --vocab-extra-ids
 * says). BertWordPieceLowerCase gets none there (its additional tokens are --special-tokens),
 * and Megatron's T5 config asserts some exist: refused, as is a file that holds <extra_id_i>
 * lines itself (Hugging Face would keep their ids). vocab->size (the file's lines + 100) is the
 * tokenizer's vocab_size, which pretrain_t5 pads into the model's vocabulary
 * (app/training/data_setup.h data_setup_vocab_size). Fills *vocab with *word_piece
 * (malloc'd; the caller frees it). Returns 0, or -1 with "what" in err. */
int t5_vocab_load(const char *vocab_file, const char *tokenizer_type, t5_vocab *vocab,
                  uint8_t **word_piece, char *err, size_t errlen);

typedef struct t5_dataset_config {
    double mask_prob;                   /* --mask-prob (0.15) */
    double short_seq_prob;              /* --short-seq-prob (0.1) */
    int max_ngram;                      /* masking_max_ngram: 10 for T5 */
    int decoder_seq_length;             /* --decoder-seq-length */
    t5_vocab vocab;
} t5_dataset_config;

/* one sample as __getitem__ returns it (Megatron's int64 arrays): encoder_seq_length values in
 * text_enc and enc_mask, decoder_seq_length in the others */
typedef struct t5_sample {
    int64_t *text_enc, *text_dec, *labels, *loss_mask, *enc_mask, *dec_mask;
    int truncated;
} t5_sample;

/* the scratch a sample needs (per thread; grows as needed) */
typedef struct t5_scratch {
    int64_t *ints;
    size_t capacity;
} t5_scratch;
void t5_scratch_free(t5_scratch *s);

/* T5MaskedWordPieceDataset.__getitem__(index) for a sample whose sentences hold tokens[0 ..
 * num_tokens) back to back, target length `target` (the sample index's third column),
 * encoder_seq_length --encoder-seq-length, seed --seed. Returns 0, or -1 with why (a token id
 * outside the vocabulary, more spans than sentinels, a decoder input longer than
 * --decoder-seq-length: where Megatron's asserts stop). */
int t5_build_sample(const t5_dataset_config *cfg, int encoder_seq_length, uint64_t seed,
                    int64_t index, const int32_t *tokens, int64_t num_tokens, int64_t target,
                    t5_sample *out, t5_scratch *scratch, char *why, size_t whylen);

/* T5MaskedWordPieceDataset._build_b1ss_attention_mask for one sample (the masks of
 * --transformer-impl local, and of Transformer Engine before 1.10 without flash or fused
 * attention): masked[q * num_keys + k] = 1 (attention not allowed) unless query_tokens[q] >= 1
 * and key_tokens[k] >= 1 (and k <= q when causal). The tokens are the sample's ids, pads 0. */
void t5_attention_mask_b1ss(const int64_t *query_tokens, int num_queries,
                            const int64_t *key_tokens, int num_keys, int causal,
                            uint8_t *masked);

#endif
