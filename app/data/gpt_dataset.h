/* gpt_dataset.h: the training data of pretrain_gpt, as Megatron's GPTDataset and
 * BlendedDataset (megatron/core/datasets): corpora named by --data-path prefixes (our
 * PREFIX.h5 or Megatron's PREFIX.bin/.idx), split into train/valid/test document ranges by
 * --split, blended by weight, each split a sequence of samples of seq_length + 1 tokens.
 *
 * Sample i of a split is a pure function of (corpora, split, seq_length, seed, samples
 * requested), whatever the number of ranks: any rank can read any sample, and reads only the
 * token ranges of the samples it asks for. Index arrays are cached in --data-cache-path as
 * Megatron-Core caches them (index_cache.h: the same file names, descriptions and .npy bytes).
 * Sample i equals Megatron-Core's (BlendedMegatronDatasetBuilder, GPTDataset, BlendedDataset)
 * for the same corpora, flags and seed: numpy's RandomState is reproduced (numpy_random.h).
 *
 * For a .bin/.idx corpus, GPT documents are its sequences (as in Megatron); for our HDF5
 * corpus, they are the documents (sentence boundaries are ignored). */
#ifndef GPT_DATASET_H
#define GPT_DATASET_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "app/data/bert_dataset.h"
#include "app/data/t5_dataset.h"
#include "app/data/mock_data.h" /* SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST */

enum { GPT_DATA_MAX_PATHS = 64, GPT_DATA_SPLITS = 3, GPT_DATA_TOKENIZER_FIELDS = 16 };

/* one blend: prefixes with optional weights (Megatron's (prefixes, weights) tuple) */
typedef struct gpt_blend {
    int num_paths;
    const char *paths[GPT_DATA_MAX_PATHS];  /* prefixes (or CORPUS.h5 paths) */
    double weights[GPT_DATA_MAX_PATHS];     /* used when has_weights */
    int has_weights;                        /* 0: each corpus weighs its number of samples */
} gpt_blend;

typedef struct gpt_data_config {
    gpt_blend blend;                        /* --data-path, split by --split */
    int per_split;                          /* 1: split_blends instead (blend_per_split) */
    gpt_blend split_blends[GPT_DATA_SPLITS];/* --train/valid/test-data-path (num_paths 0: none) */
    const char *split;                      /* "949,50,1"; NULL: Megatron's "969, 30, 1" */
    int seq_length;
    uint64_t seed;
    int64_t num_samples[GPT_DATA_SPLITS];   /* samples needed per split (0: split unused) */
    const char *cache_path;                 /* --data-cache-path; NULL: see default_cache */
    int default_cache;                      /* no cache_path: 1: Megatron's default directory
                                             * <prefix>/cache/GPTDataset_indices per corpus
                                             * (blends uncached); 0: build in memory */
    /* the tokenizer's unique_identifiers, part of Megatron's cache descriptions (and so of the
     * file names): key / value pairs (a NULL value is null); none: "tokenizer": null */
    int tokenizer_fields;
    const char *tokenizer_keys[GPT_DATA_TOKENIZER_FIELDS];
    const char *tokenizer_values[GPT_DATA_TOKENIZER_FIELDS];
    int verbose;                            /* rank 0 prints what it builds or loads */
    int test_optional;                      /* a test split without documents (or with fewer
                                             * than 2 tokens) is left out instead of refused */
    /* NULL: GPTDataset. Set: BERTMaskedWordPieceDataset (bert_dataset.h): the corpora's
     * documents are their documents (not sequences), each a run of sentences; the samples are
     * read with bert_dataset_sample; the indices are built in memory (no cache) */
    const bert_dataset_config *bert;
    /* Set (bert NULL): T5MaskedWordPieceDataset (t5_dataset.h) over the same sentence-split
     * corpora, seq_length being --encoder-seq-length; samples read with t5_dataset_sample */
    const t5_dataset_config *t5;
} gpt_data_config;

/* Fills a blend from Megatron's --data-path words as get_blend_from_list reads them:
 * "W1 PREFIX1 W2 PREFIX2 ..." when the count is even and every other word is a number,
 * otherwise "PREFIX1 PREFIX2 ..." without weights. The pointers point into words.
 * Returns 0, or -1 with err. */
int gpt_blend_set_paths(gpt_blend *blend, int count, char *const *words, char *err,
                        size_t errlen);

/* Megatron's split boundaries (parse_and_normalize_split, convert_split_vector_to_split_matrix,
 * int(round(bookend * documents))): bounds[s] .. bounds[s + 1] for split s; present[s] = 0
 * when the split has no weight (Megatron builds no dataset for it). Ends the job through
 * user_error on a malformed --split. */
void gpt_split_bounds(const char *split, int64_t documents, int64_t bounds[GPT_DATA_SPLITS + 1],
                      int present[GPT_DATA_SPLITS]);

/* Megatron's sample counts: train = train_iters * global_batch; valid = (train_iters /
 * eval_interval + 1) * eval_iters * global_batch; test = eval_iters * global_batch */
int64_t gpt_data_samples_needed(int split, int64_t train_iters, int64_t global_batch,
                                int64_t eval_interval, int64_t eval_iters);

typedef struct gpt_datasets gpt_datasets;

/* Collective over comm. Bad input (missing or damaged files, a split without documents, a bad
 * --split or weight) ends the job through user_error() naming the file and the problem. */
gpt_datasets *gpt_datasets_open(const gpt_data_config *cfg, MPI_Comm comm);

/* samples available in a split (>= the number requested, except for an unweighted blend,
 * which holds one epoch of each corpus at most; 0 when none were requested or the split has no
 * dataset) */
int64_t gpt_dataset_num_samples(gpt_datasets *ds, int split);

/* tokens[0 .. seq_length] of sample `index` of `split` */
void gpt_dataset_sample(gpt_datasets *ds, int split, int64_t index, int32_t *tokens);

/* sample `index` of `split` of BERT datasets (cfg->bert set): seq_length values per array */
void bert_dataset_sample(gpt_datasets *ds, int split, int64_t index, bert_sample *out);

/* sample `index` of `split` of T5 datasets (cfg->t5 set) */
void t5_dataset_sample(gpt_datasets *ds, int split, int64_t index, t5_sample *out);

/* end-of-document id and unpadded vocabulary size recorded in the corpora; -1 / 0 when
 * unknown (a .bin/.idx corpus carries neither: take them from the tokenizer flags) */
int gpt_datasets_eod(const gpt_datasets *ds);
int gpt_datasets_vocab_size(const gpt_datasets *ds);

/* first and last+1 document of corpus `path_index` of the split's blend (tests and logs) */
void gpt_dataset_document_range(const gpt_datasets *ds, int path_index, int split,
                                int64_t *first, int64_t *last);

/* dataset (path index) of blended sample `index` of `split` (0 when not blended) */
int gpt_dataset_sample_source(const gpt_datasets *ds, int split, int64_t index);

/* what rank 0 did with the index cache: files loaded, built (no file) and rebuilt (bad file) */
void gpt_datasets_cache_counts(const gpt_datasets *ds, int *loaded, int *built, int *rebuilt);

void gpt_datasets_close(gpt_datasets *ds);

#endif
