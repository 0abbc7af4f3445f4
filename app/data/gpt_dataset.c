/* gpt_dataset.c: corpora, --split ranges, per-split GPT indices and blends (see gpt_dataset.h). */
#include "app/data/gpt_dataset.h"
#include "app/core/hash.h"
#include "app/data/blended_dataset.h"
#include "app/data/dataset_index.h"
#include "app/data/index_cache.h"
#include "app/data/py_json.h"
#include "app/core/error.h"
#include "io/hdf5_corpus.h"
#include "io/mmap_indexed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const split_names[GPT_DATA_SPLITS] = {"train", "valid", "test"};

/* Megatron's dataset class: GPT, or one of the masked (sentence-split) datasets */
static const char *dataset_class(const gpt_data_config *cfg) {
    return cfg->bert ? "BERTMaskedWordPieceDataset"
                     : cfg->t5 ? "T5MaskedWordPieceDataset" : "GPTDataset";
}
static int is_masked(const gpt_data_config *cfg) { return cfg->bert || cfg->t5; }

typedef struct corpus {
    char name[4200];           /* as named in the flags (the key when several splits share it) */
    char path[4200];
    hdf5_corpus *h5;
    mmap_indexed *mm;
    int64_t num_documents, num_tokens;
    int64_t *lengths;          /* tokens per GPT document */
    int64_t max_length;        /* of any document (Megatron's sample-index dtype) */
    uint64_t lengths_hash;     /* identifies the content (checked with the index cache) */
    /* BERT: document d holds sentences [document_sentences[d], document_sentences[d + 1]) of
     * sentence_lengths tokens each, the first at token sentence_tokens[s] (h5) */
    int64_t *document_sentences, num_sentences;
    int32_t *sentence_lengths;
    const int64_t *sentence_tokens;
} corpus;

typedef struct split_part {   /* one corpus's document range in one split, with its indices */
    corpus *c;
    int64_t first, last;
    index_arrays arrays;      /* document index, sample index, shuffle index */
    int64_t requested;        /* Megatron's num_samples (-1: None) */
    int64_t num_samples;
} split_part;

typedef struct split_view {
    int count;                /* datasets in this split (0: none) */
    int blended;              /* a BlendedDataset over parts (else parts[0] alone) */
    split_part parts[GPT_DATA_MAX_PATHS];
    int64_t size;
    index_arrays blend;       /* dataset index, dataset sample index (when blended) */
} split_view;

enum { MAX_CORPORA = GPT_DATA_MAX_PATHS * GPT_DATA_SPLITS };

struct gpt_datasets {
    const gpt_data_config *cfg;   /* while opening */
    const char *split_string;     /* Megatron's config.split (NULL with per-split paths) */
    double split_ends[GPT_DATA_SPLITS + 1];
    int split_present[GPT_DATA_SPLITS];
    int num_corpora, seq_length;
    corpus corpora[MAX_CORPORA];
    split_view splits[GPT_DATA_SPLITS];
    int eod, vocab_size;
    index_cache_stats stats;
    const bert_dataset_config *bert;  /* NULL: GPT (or T5) */
    const t5_dataset_config *t5;      /* NULL: GPT (or BERT) */
    uint64_t bert_seed;
    bert_scratch bert_scratch;
    t5_scratch t5_scratch;
    int32_t *bert_tokens;             /* the sentences of one BERT sample */
    int64_t *bert_lengths;
    size_t bert_tokens_capacity, bert_lengths_capacity;
};

/* ---- configuration helpers ------------------------------------------------------------------ */
int gpt_blend_set_paths(gpt_blend *blend, int count, char *const *words, char *err,
                        size_t errlen) {
    memset(blend, 0, sizeof *blend);
    if (count < 1) {
        snprintf(err, errlen, "expects PREFIX ... or WEIGHT PREFIX ... pairs, got nothing");
        return -1;
    }
    /* get_blend_from_list: pairs when the count is even and every weight reads as a float */
    int pairs = count % 2 == 0;
    for (int i = 0; pairs && i < count; i += 2) {
        char *end;
        double w = strtod(words[i], &end);
        (void)w;
        if (*end || end == words[i]) pairs = 0;
    }
    int n = pairs ? count / 2 : count;
    if (n > GPT_DATA_MAX_PATHS) {
        snprintf(err, errlen, "at most %d corpora, got %d", GPT_DATA_MAX_PATHS, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (pairs) {
            double w = strtod(words[2 * i], NULL);
            if (!(w > 0) || isinf(w)) {
                snprintf(err, errlen, "the weight \"%s\" of %s must be positive and finite "
                         "(Megatron's BlendedDataset)", words[2 * i], words[2 * i + 1]);
                return -1;
            }
            blend->weights[i] = w;
        }
        blend->paths[i] = pairs ? words[2 * i + 1] : words[i];
    }
    blend->num_paths = n;
    blend->has_weights = pairs;
    return 0;
}

int64_t gpt_data_samples_needed(int split, int64_t train_iters, int64_t global_batch,
                                int64_t eval_interval, int64_t eval_iters) {
    switch (split) {
    case SPLIT_TRAIN: return train_iters * global_batch;
    case SPLIT_VALID:
        return (eval_interval > 0 ? train_iters / eval_interval + 1 : 1) * eval_iters * global_batch;
    default: return eval_iters * global_batch;
    }
}

/* parse_and_normalize_split + convert_split_vector_to_split_matrix: the book-ends */
static void split_ends(const char *split, double ends[GPT_DATA_SPLITS + 1], int present[GPT_DATA_SPLITS]) {
    /* parse_and_normalize_split: the numbers matching [.0-9]+, padded with zeros */
    double w[GPT_DATA_SPLITS] = {0, 0, 0};
    int n = 0;
    for (const char *p = split; *p;) {
        if ((*p >= '0' && *p <= '9') || *p == '.') {
            size_t len = strspn(p, "0123456789.");
            char number[64], *end;
            if (len >= sizeof number) user_error("--split %s: a number is too long", split);
            memcpy(number, p, len);
            number[len] = '\0';
            double v = strtod(number, &end);
            if (*end) user_error("--split %s: \"%s\" is not a number", split, number);
            if (n == GPT_DATA_SPLITS)
                user_error("--split %s: at most %d weights (train, valid, test)", split,
                           GPT_DATA_SPLITS);
            w[n++] = v;
            p += len;
        } else if (*p == '-') {
            user_error("--split %s: weights must not be negative", split);
        } else {
            p++;
        }
    }
    double sum = 0;
    for (int i = 0; i < GPT_DATA_SPLITS; i++) sum += w[i];
    if (!(sum > 0)) user_error("--split %s: needs at least one positive weight", split);
    /* normalize, then the cumulative book-ends [0, w0, w0+w1, w0+w1+w2] in Python's order */
    ends[0] = 0;
    for (int i = 0; i < GPT_DATA_SPLITS; i++) ends[i + 1] = ends[i] + w[i] / sum;
    for (int i = 0; i < GPT_DATA_SPLITS; i++) present[i] = ends[i + 1] > ends[i];
}

void gpt_split_bounds(const char *split, int64_t documents, int64_t bounds[GPT_DATA_SPLITS + 1],
                      int present[GPT_DATA_SPLITS]) {
    double ends[GPT_DATA_SPLITS + 1];
    split_ends(split, ends, present);
    /* int(round(x)): Python rounds half to even, as nearbyint in the default rounding mode */
    for (int i = 0; i <= GPT_DATA_SPLITS; i++)
        bounds[i] = (int64_t)nearbyint(ends[i] * (double)documents);
}

/* ---- corpora --------------------------------------------------------------------------------- */
static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* BERT and T5: the documents' sentences (Megatron's document_indices and sequence_lengths).
 * T5 also reads a corpus not split into sentences (each document then one sentence), as
 * Megatron's T5 dataset reads a _text_document corpus. */
static void open_bert_sentences(corpus *c, int whole_documents_allowed) {
    c->document_sentences = malloc(sizeof(int64_t) * (size_t)(c->num_documents + 1));
    CHECK(c->document_sentences, "out of memory");
    if (c->mm) {
        c->num_sentences = c->mm->num_sequences;
        memcpy(c->document_sentences, c->mm->document_indices,
               sizeof(int64_t) * (size_t)(c->num_documents + 1));
        c->sentence_lengths = malloc(sizeof(int32_t) * (size_t)(c->num_sentences + 1));
        CHECK(c->sentence_lengths, "out of memory");
        memcpy(c->sentence_lengths, c->mm->sequence_lengths, sizeof(int32_t) * (size_t)c->num_sentences);
    } else {
        const hdf5_corpus *h = c->h5;
        if (!h->sentence_offsets && !whole_documents_allowed)
            user_error("%s: BERT needs a sentence-split corpus (preprocess_data --split-sentences)",
                       c->path);
        int64_t *offsets = h->sentence_offsets ? h->sentence_offsets : h->document_offsets;
        c->num_sentences = h->sentence_offsets ? h->num_sentences : h->num_documents;
        c->sentence_tokens = offsets;
        c->sentence_lengths = malloc(sizeof(int32_t) * (size_t)(c->num_sentences + 1));
        CHECK(c->sentence_lengths, "out of memory");
        for (int64_t s = 0; s < c->num_sentences; s++) {
            int64_t n = offsets[s + 1] - offsets[s];
            if (n > INT32_MAX) user_error("%s: sentence %lld is longer than 2^31 tokens", c->path, (long long)s);
            c->sentence_lengths[s] = (int32_t)n;
        }
        int64_t s = 0;
        for (int64_t d = 0; d <= c->num_documents; d++) {
            while (s < c->num_sentences && offsets[s] < h->document_offsets[d]) s++;
            if (offsets[s] != h->document_offsets[d])
                user_error("%s: document %lld starts at token %lld, inside a sentence", c->path,
                           (long long)d, (long long)h->document_offsets[d]);
            c->document_sentences[d] = s;
        }
    }
}

/* masked: 0 GPT, 1 BERT, 2 T5 */
static void open_corpus(corpus *c, const char *prefix, int masked) {
    int bert = masked != 0;
    char err[9000], h5[4200], bin[4200], idx[4200];
    size_t n = strlen(prefix);
    snprintf(h5, sizeof h5, "%s.h5", prefix);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    if (n > 3 && !strcmp(prefix + n - 3, ".h5") && file_exists(prefix)) snprintf(h5, sizeof h5, "%s", prefix);
    if (file_exists(h5)) {
        snprintf(c->path, sizeof c->path, "%s", h5);
        c->h5 = hdf5_corpus_open(h5, err, sizeof err);
        if (!c->h5) user_error("--data-path: %s", err);
        c->num_documents = c->h5->num_documents;
        c->num_tokens = c->h5->num_tokens;
        c->lengths = malloc(sizeof(int64_t) * (size_t)(c->num_documents + 1));
        CHECK(c->lengths, "out of memory");
        for (int64_t d = 0; d < c->num_documents; d++)
            c->lengths[d] = c->h5->document_offsets[d + 1] - c->h5->document_offsets[d];
    } else if (file_exists(bin) || file_exists(idx)) {
        snprintf(c->path, sizeof c->path, "%s", prefix);
        c->mm = mmap_indexed_open(prefix, err, sizeof err);
        if (!c->mm) user_error("--data-path: %s", err);
        /* GPT documents are the sequences; BERT's, the documents */
        c->num_documents = bert ? c->mm->num_documents : c->mm->num_sequences;
        c->num_tokens = c->mm->num_tokens;
        c->lengths = malloc(sizeof(int64_t) * (size_t)(c->num_documents + 1));
        CHECK(c->lengths, "out of memory");
        for (int64_t d = 0; d < c->num_documents; d++) {
            if (!bert) { c->lengths[d] = c->mm->sequence_lengths[d]; continue; }
            c->lengths[d] = 0;
            for (int64_t s = c->mm->document_indices[d]; s < c->mm->document_indices[d + 1]; s++)
                c->lengths[d] += c->mm->sequence_lengths[s];
        }
    } else {
        user_error("--data-path %s: neither %s nor %s/.idx exists", prefix, h5, bin);
    }
    if (bert) open_bert_sentences(c, masked == 2);
    for (int64_t d = 0; d < c->num_documents; d++)
        if (c->lengths[d] > c->max_length) c->max_length = c->lengths[d];
    c->lengths_hash = hash_fnv1a(HASH_FNV1A_OFFSET, c->lengths, sizeof(int64_t) * (size_t)c->num_documents);
    if (bert) {  /* the sentence boundaries too */
        c->lengths_hash = hash_fnv1a(c->lengths_hash, c->document_sentences,
                                     sizeof(int64_t) * (size_t)(c->num_documents + 1));
        c->lengths_hash = hash_fnv1a(c->lengths_hash, c->sentence_lengths,
                                     sizeof(int32_t) * (size_t)c->num_sentences);
    }
}

static void read_document(const corpus *c, int64_t document, int64_t offset, int64_t n,
                          int32_t *out) {
    if (n <= 0) return;
    if (c->h5) hdf5_corpus_read_tokens(c->h5, c->h5->document_offsets[document] + offset, n, out);
    else mmap_indexed_read(c->mm, document, offset, n, out);
}

/* ---- index building ----------------------------------------------------------------------- */
typedef struct gpt_build {
    const split_part *part;
    int seq_length;
    int64_t samples;
    uint64_t seed;
} gpt_build;

static void build_gpt_arrays(void *context, index_arrays *out) {
    const gpt_build *b = context;
    gpt_index index;
    gpt_index_build(b->part->c->lengths, b->part->first, b->part->last, b->seq_length, b->samples,
                    b->seed, &index);
    out->count = 3;
    out->data[0] = index.document_index;
    out->length[0] = index.num_documents_index;
    out->data[1] = index.sample_index;
    out->length[1] = 2 * (index.num_samples + 1);
    out->columns[1] = 2;
    out->data[2] = index.shuffle_index;
    out->length[2] = index.num_samples;
    /* Megatron's dtypes: the document index int32; the sample index int32 unless a document
     * index position or a document length passes INT32_MAX (helpers.build_sample_idx); the
     * shuffle index uint32 below UINT32_MAX - 1 samples (_build_shuffle_index) */
    CHECK(b->part->last <= INT32_MAX, "%s: more than 2^31 documents", b->part->c->path);
    out->dtype[0] = NPY_INT32;
    int64_t widest = index.num_documents_index > b->part->c->max_length ? index.num_documents_index
                                                                        : b->part->c->max_length;
    out->dtype[1] = widest <= INT32_MAX ? NPY_INT32 : NPY_INT64;
    out->dtype[2] = index.num_samples < (int64_t)UINT32_MAX - 1 ? NPY_UINT32 : NPY_INT64;
}

/* loaded GPT indices are safe to read samples with: shapes and every value in range */
static int check_gpt_arrays(void *context, const index_arrays *a, char *why, size_t whylen) {
    const gpt_build *b = context;
    const split_part *p = b->part;
    if (a->count != 3 || a->columns[0] != 0 || a->columns[1] != 2 || a->columns[2] != 0)
        return error_format(why, whylen, "the arrays have the wrong shapes");
    int64_t documents = a->length[0], samples = a->length[2];
    for (int64_t i = 0; i < documents; i++)
        if (a->data[0][i] < p->first || a->data[0][i] >= p->last)
            return error_format(why, whylen, "document_index[%lld] = %lld is outside the split's documents "
                                "[%lld, %lld)", (long long)i, (long long)a->data[0][i], (long long)p->first,
                                (long long)p->last);
    if (a->length[1] != 2 * (samples + 1) || samples < (b->samples > 0 ? b->samples : 1))
        return error_format(why, whylen, "%lld samples where %lld are needed", (long long)samples,
                            (long long)b->samples);
    const int64_t *sample = a->data[1];
    for (int64_t s = 0; s <= samples; s++) {
        int64_t position = sample[2 * s], offset = sample[2 * s + 1];
        if (position < 0 || position >= documents || offset < 0 ||
            offset > p->c->lengths[a->data[0][position]] || (s > 0 && position < sample[2 * s - 2]))
            return error_format(why, whylen, "sample_index[%lld] = (%lld, %lld) is out of range",
                                (long long)s, (long long)position, (long long)offset);
    }
    for (int64_t i = 0; i < samples; i++)
        if (a->data[2][i] < 0 || a->data[2][i] >= samples)
            return error_format(why, whylen, "shuffle_index[%lld] = %lld is outside [0, %lld)", (long long)i,
                                (long long)a->data[2][i], (long long)samples);
    return 0;
}

typedef struct blend_build {
    const double *weights;
    int count;
    int64_t size;
    const split_view *view;
} blend_build;

static void build_blend_arrays(void *context, index_arrays *out) {
    const blend_build *b = context;
    out->count = 2;
    out->length[0] = out->length[1] = b->size;
    out->data[0] = malloc(sizeof(int64_t) * (size_t)(b->size + 1));
    out->data[1] = malloc(sizeof(int64_t) * (size_t)(b->size + 1));
    CHECK(out->data[0] && out->data[1], "out of memory");
    blend_index_build(b->weights, b->count, b->size, out->data[0], out->data[1]);
    out->dtype[0] = NPY_INT16;  /* Megatron's dataset_index */
    out->dtype[1] = NPY_INT64;
}

static int check_blend_arrays(void *context, const index_arrays *a, char *why, size_t whylen) {
    const blend_build *b = context;
    if (a->count != 2 || a->columns[0] || a->columns[1] || a->length[0] != b->size || a->length[1] != b->size)
        return error_format(why, whylen, "the arrays do not hold %lld samples", (long long)b->size);
    for (int64_t k = 0; k < b->size; k++) {
        int64_t d = a->data[0][k], i = a->data[1][k];
        if (d < 0 || d >= b->count || i < 0 || i >= b->view->parts[d].num_samples)
            return error_format(why, whylen, "blend sample %lld names sample %lld of dataset %lld", (long long)k,
                                (long long)i, (long long)d);
    }
    return 0;
}

/* MegatronDataset.unique_identifiers of one GPTDataset or BERTMaskedWordPieceDataset (the JSON
 * object Megatron hashes) */
static void gpt_identifiers(py_json *j, const gpt_datasets *ds, const split_part *part, int split,
                            int64_t samples) {
    const gpt_data_config *cfg = ds->cfg;
    py_json_begin_object(j);
    py_json_key(j, "class");
    py_json_string(j, dataset_class(cfg));
    py_json_key(j, "dataset_path");
    py_json_string(j, part->c->name);
    py_json_key(j, "num_samples");
    if (samples >= 0) py_json_int(j, samples);
    else py_json_null(j);
    py_json_key(j, "index_split");
    py_json_string(j, split_names[split]);
    py_json_key(j, "random_seed");
    py_json_int(j, (int64_t)cfg->seed);
    py_json_key(j, "sequence_length");
    py_json_int(j, cfg->seq_length);
    py_json_key(j, "split");
    py_json_string(j, ds->split_string);
    py_json_key(j, "split_matrix");
    if (!ds->split_string) {
        py_json_null(j);
    } else {
        /* [(0, e1), (e1, e2), (e2, e3)], None where a split has no weight; the first 0 is an int */
        py_json_begin_array(j);
        for (int s = 0; s < GPT_DATA_SPLITS; s++) {
            if (!ds->split_present[s]) { py_json_null(j); continue; }
            py_json_begin_array(j);
            if (s == 0) py_json_int(j, 0);
            else py_json_float(j, ds->split_ends[s]);
            py_json_float(j, ds->split_ends[s + 1]);
            py_json_end_array(j);
        }
        py_json_end_array(j);
    }
    py_json_key(j, "tokenizer");
    if (cfg->tokenizer_fields <= 0) {
        py_json_null(j);
    } else {
        py_json_begin_object(j);
        for (int i = 0; i < cfg->tokenizer_fields; i++) {
            py_json_key(j, cfg->tokenizer_keys[i]);
            py_json_string(j, cfg->tokenizer_values[i]);
        }
        py_json_end_object(j);
    }
    if (is_masked(cfg)) {  /* MaskedWordPieceDataset's, then BERT's or T5's attributes */
        py_json_key(j, "masking_probability");
        py_json_float(j, cfg->bert ? cfg->bert->mask_prob : cfg->t5->mask_prob);
        py_json_key(j, "short_sequence_probability");
        py_json_float(j, cfg->bert ? cfg->bert->short_seq_prob : cfg->t5->short_seq_prob);
        py_json_key(j, "masking_max_ngram");
        py_json_int(j, cfg->bert ? cfg->bert->max_ngram : cfg->t5->max_ngram);
        py_json_key(j, "masking_do_full_word");
        py_json_bool(j, 1);
        py_json_key(j, "masking_do_permutation");
        py_json_bool(j, 0);
        py_json_key(j, "masking_use_longer_ngrams");
        py_json_bool(j, 0);
        py_json_key(j, "masking_use_geometric_distribution");
        py_json_bool(j, cfg->t5 != NULL);
        if (cfg->bert) {
            py_json_key(j, "classification_head");
            py_json_bool(j, cfg->bert->binary_head);
        } else {
            py_json_key(j, "sequence_length_decoder");
            py_json_int(j, cfg->t5->decoder_seq_length);
        }
    }
    py_json_end_object(j);
}

/* the cache directory of a corpus's GPTDataset: --data-cache-path, or Megatron's default
 * os.path.join(path_prefix, "cache", "GPTDataset_indices") (BERTMaskedWordPieceDataset_indices) */
static const char *gpt_cache_dir(const gpt_data_config *cfg, const corpus *c, char *buffer, size_t size,
                                 int *is_default) {
    *is_default = 0;
    if (cfg->cache_path) return cfg->cache_path;
    if (!cfg->default_cache) return NULL;
    *is_default = 1;
    /* our CORPUS.h5 names: the prefix without ".h5" (a file cannot hold the directory) */
    size_t n = strlen(c->name);
    int h5 = n > 3 && !strcmp(c->name + n - 3, ".h5");
    snprintf(buffer, size, "%.*s/cache/%s_indices", (int)(h5 ? n - 3 : n), c->name,
             dataset_class(cfg));
    return buffer;
}

/* one GPTDataset: `samples` < 0 is Megatron's num_samples None (one epoch) */
typedef struct bert_build {
    const gpt_data_config *cfg;
    const split_part *part;
    int64_t samples;
    const char *split_string;
    int split;
} bert_build;

/* the longest target of a masked dataset's sample index: BERT's [CLS] A [SEP] B [SEP] adds 3
 * tokens, T5's <bos> and <eos> 2 */
static int max_target_length(const gpt_data_config *cfg) {
    return cfg->seq_length - (cfg->bert ? 3 : 2);
}

/* masked_dataset.py _build_sample_index: helpers.build_mapping over the split's documents,
 * kept as Megatron saves it ((samples, 3) uint32; uint64 past 2^32 sentences) */
static void build_bert_arrays(void *context, index_arrays *out) {
    const bert_build *b = context;
    const corpus *c = b->part->c;
    int64_t count = 0;
    /* the split's documents with the bound after the last: document_indices[first .. last] */
    /* BERT: [CLS] A [SEP] B [SEP] (3 added); T5: room for <bos> and <eos> (2) */
    const gpt_data_config *cfg = b->cfg;
    int binary_head = cfg->bert && cfg->bert->binary_head;
    int64_t *rows = bert_build_sample_index(c->document_sentences + b->part->first,
                                            b->part->last - b->part->first, c->sentence_lengths,
                                            b->samples, max_target_length(cfg),
                                            cfg->bert ? cfg->bert->short_seq_prob
                                                      : cfg->t5->short_seq_prob,
                                            (int32_t)cfg->seed, binary_head ? 2 : 1, &count);
    if (!rows)
        user_error("%s: the %s split (%s, documents [%lld, %lld)) yields no %s sample: each "
                   "needs a document of %s without a sentence over 512 tokens", c->path,
                   split_names[b->split], b->split_string, (long long)b->part->first,
                   (long long)b->part->last, cfg->bert ? "BERT" : "T5",
                   binary_head ? "two sentences or more (or --bert-no-binary-head)"
                               : "one sentence or more");
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->data[0] = rows;
    out->length[0] = 3 * count;
    out->columns[0] = 3;
    CHECK(c->num_sentences <= (int64_t)UINT32_MAX, "%s: more than 2^32 sentences: Megatron's "
          "sample index is uint64 there, which the index cache does not write", c->path);
    out->dtype[0] = NPY_UINT32;
}

/* a loaded BERT sample index is safe to read samples with: runs of the split's sentences */
static int check_bert_arrays(void *context, const index_arrays *a, char *why, size_t whylen) {
    const bert_build *b = context;
    const corpus *c = b->part->c;
    if (a->count != 1 || a->columns[0] != 3)
        return error_format(why, whylen, "the sample index is not a (samples, 3) array");
    int64_t count = a->length[0] / 3;
    if (count < b->samples)
        return error_format(why, whylen, "%lld samples where %lld are needed", (long long)count,
                            (long long)b->samples);
    int64_t lowest = c->document_sentences[b->part->first], highest = c->document_sentences[b->part->last];
    for (int64_t s = 0; s < count; s++) {
        const int64_t *row = a->data[0] + 3 * s;
        if (row[0] < lowest || row[1] <= row[0] || row[1] > highest || row[2] < 2 ||
            row[2] > max_target_length(b->cfg))
            return error_format(why, whylen, "sample_index[%lld] = (%lld, %lld, %lld) is out of range",
                                (long long)s, (long long)row[0], (long long)row[1], (long long)row[2]);
    }
    return 0;
}

static void build_bert_part(gpt_datasets *ds, const gpt_data_config *cfg, split_part *part,
                            int split, const char *split_string, int64_t samples, MPI_Comm comm) {
    const corpus *c = part->c;
    if (samples < 0)
        user_error("%s: an unweighted blend of BERT or T5 corpora (--data-path A B ...) gives each "
                   "corpus num_samples None, which Megatron's build_mapping cannot take: give "
                   "weights (--data-path W1 A W2 B ...)", c->path);
    if (part->last <= part->first)
        user_error("%s: the %s split (%s) gets no documents [%lld, %lld) of %lld", c->path,
                   split_names[split], split_string, (long long)part->first,
                   (long long)part->last, (long long)c->num_documents);
    py_json description;
    py_json_init(&description);
    gpt_identifiers(&description, ds, part, split, samples);
    bert_build b = {cfg, part, samples, split_string, split};
    char dir[4300];
    index_cache_request request = {
        .class_name = dataset_class(cfg), .split = split_names[split],
        .split_not_in_names = 1, .description = description.text,
        .content_hash = c->lengths_hash, .count = 1, .names = {"sample_index"},
        .build = build_bert_arrays, .check = check_bert_arrays, .context = &b};
    request.dir = gpt_cache_dir(cfg, c, dir, sizeof dir, &request.dir_is_default);
    index_cache_get(&request, &part->arrays, comm, &ds->stats, cfg->verbose);
    py_json_free(&description);
    part->requested = samples;
    part->num_samples = part->arrays.length[0] / 3;
}

static void build_split_part(gpt_datasets *ds, const gpt_data_config *cfg, split_part *part,
                             int split, const char *split_string, int64_t samples, MPI_Comm comm) {
    if (is_masked(cfg)) {
        build_bert_part(ds, cfg, part, split, split_string, samples, comm);
        return;
    }
    int64_t tokens = 0;
    for (int64_t d = part->first; d < part->last; d++) tokens += part->c->lengths[d];
    if (part->last <= part->first || tokens < 2)
        user_error("%s: the %s split (%s) gets documents [%lld, %lld) of %lld, holding %lld "
                   "tokens: too few to build samples of %d tokens", part->c->path,
                   split_names[split], split_string, (long long)part->first,
                   (long long)part->last, (long long)part->c->num_documents, (long long)tokens,
                   cfg->seq_length + 1);
    py_json description;
    py_json_init(&description);
    gpt_identifiers(&description, ds, part, split, samples);
    gpt_build b = {part, cfg->seq_length, samples, cfg->seed};
    char dir[4300];
    index_cache_request request = {
        .class_name = "GPTDataset", .split = split_names[split], .description = description.text,
        .content_hash = part->c->lengths_hash, .count = 3,
        .names = {"document_index", "sample_index", "shuffle_index"},
        .build = build_gpt_arrays, .check = check_gpt_arrays, .context = &b};
    request.dir = gpt_cache_dir(cfg, part->c, dir, sizeof dir, &request.dir_is_default);
    index_cache_get(&request, &part->arrays, comm, &ds->stats, cfg->verbose);
    py_json_free(&description);
    part->requested = samples;
    CHECK(part->arrays.count == 3, "bad index arrays");
    part->num_samples = part->arrays.length[2];
    CHECK(part->num_samples >= samples, "%s: built %lld samples, %lld needed", part->c->path,
          (long long)part->num_samples, (long long)samples);
}

/* the corpus at `path`, opened once however many splits and blends name it */
static corpus *corpus_of(gpt_datasets *ds, const char *path) {
    for (int i = 0; i < ds->num_corpora; i++)
        if (!strcmp(ds->corpora[i].name, path)) return &ds->corpora[i];
    CHECK(ds->num_corpora < MAX_CORPORA, "too many corpora");
    corpus *c = &ds->corpora[ds->num_corpora++];
    open_corpus(c, path, ds->bert ? 1 : ds->t5 ? 2 : 0);
    snprintf(c->name, sizeof c->name, "%s", path);
    int eod = c->h5 ? (int)c->h5->meta.eod_id : -1;
    int vocab = c->h5 ? (int)c->h5->meta.vocab_size : 0;
    if ((eod >= 0 && ds->eod >= 0 && eod != ds->eod) ||
        (vocab > 0 && ds->vocab_size > 0 && vocab != ds->vocab_size))
        user_error("--data-path: %s has eod %d and vocabulary %d, but another corpus has %d and %d "
                   "(corpora from different tokenizers cannot be blended)", c->path, eod, vocab,
                   ds->eod, ds->vocab_size);
    if (eod >= 0) ds->eod = eod;
    if (vocab > 0) ds->vocab_size = vocab;
    return c;
}

/* the BlendedDataset of a split over its built parts: Megatron's build_blending_indices with
 * `weights` (normalized as BlendedDataset does) and `size` samples */
static void build_blend(gpt_datasets *ds, const gpt_data_config *cfg, split_view *view, int split,
                        const double *raw_weights, int64_t size, MPI_Comm comm) {
    double weights[GPT_DATA_MAX_PATHS];
    memcpy(weights, raw_weights, sizeof(double) * (size_t)view->count);
    if (blend_normalize_weights(weights, view->count) != 0)
        user_error("the %s blend needs positive weights", split_names[split]);
    view->blended = 1;
    view->size = size;
    /* BlendedDataset.unique_identifiers: its datasets', the split, the weights, the size */
    py_json description;
    py_json_init(&description);
    py_json_begin_object(&description);
    py_json_key(&description, "class");
    py_json_string(&description, "BlendedDataset");
    py_json_key(&description, "datasets");
    py_json_begin_array(&description);
    uint64_t content = HASH_FNV1A_OFFSET;
    for (int i = 0; i < view->count; i++) {
        gpt_identifiers(&description, ds, &view->parts[i], split, view->parts[i].requested);
        content = hash_fnv1a_word(content, view->parts[i].c->lengths_hash);
    }
    py_json_end_array(&description);
    py_json_key(&description, "split");
    py_json_string(&description, split_names[split]);
    py_json_key(&description, "weights");
    py_json_begin_array(&description);
    for (int i = 0; i < view->count; i++) py_json_float(&description, weights[i]);
    py_json_end_array(&description);
    py_json_key(&description, "size");
    py_json_int(&description, size);
    py_json_end_object(&description);
    blend_build b = {weights, view->count, size, view};
    /* Megatron caches a BlendedDataset only in --data-cache-path (no default directory) */
    index_cache_request request = {
        .dir = cfg->cache_path, .class_name = "BlendedDataset", .split = split_names[split],
        .description = description.text, .content_hash = content, .count = 2,
        .names = {"dataset_index", "dataset_sample_index"},
        .build = build_blend_arrays, .check = check_blend_arrays, .context = &b};
    index_cache_get(&request, &view->blend, comm, &ds->stats, cfg->verbose);
    py_json_free(&description);
    int64_t drawn[GPT_DATA_MAX_PATHS] = {0};
    for (int64_t k = 0; k < size; k++) {
        int64_t d = view->blend.data[0][k];
        CHECK(d >= 0 && d < view->count, "blend index %lld names dataset %lld", (long long)k,
              (long long)d);
        drawn[d]++;
    }
    for (int d = 0; d < view->count; d++)
        if (drawn[d] > view->parts[d].num_samples)
            user_error("the %s blend draws %lld samples from %s, which has %lld (Megatron's "
                       "mid_level_dataset_surplus is too small for this blend)",
                       split_names[split], (long long)drawn[d], view->parts[d].c->path,
                       (long long)view->parts[d].num_samples);
}

/* one split from one blend (BlendedMegatronDatasetBuilder): `ranges[i]` are the documents
 * of blend path i for this split; `single_dataset` is Megatron's "a single prefix without
 * weights" case (a lone GPTDataset of target samples) */
static void build_split(gpt_datasets *ds, const gpt_data_config *cfg, const gpt_blend *blend,
                        int split, int64_t ranges[][2], int single_dataset, const char *origin,
                        MPI_Comm comm) {
    split_view *view = &ds->splits[split];
    int64_t target = cfg->num_samples[split];
    view->count = blend->num_paths;
    for (int i = 0; i < blend->num_paths; i++) {
        view->parts[i].c = corpus_of(ds, blend->paths[i]);
        view->parts[i].first = ranges[i][0];
        view->parts[i].last = ranges[i][1];
    }
    if (single_dataset) {
        build_split_part(ds, cfg, &view->parts[0], split, origin, target, comm);
        view->size = view->parts[0].num_samples;  /* a lone GPTDataset: all its samples */
        return;
    }
    if (blend->has_weights) {
        /* _get_size_per_split_per_dataset: plan ceil(target w) samples of each dataset, build
         * ceil(ceil(target w) (1 + 0.005)); the blend holds the sum of the planned counts */
        double weights[GPT_DATA_MAX_PATHS];
        memcpy(weights, blend->weights, sizeof(double) * (size_t)blend->num_paths);
        if (blend_normalize_weights(weights, blend->num_paths) != 0)
            user_error("%s: the weights must be positive", origin);
        int64_t size = 0;
        for (int i = 0; i < blend->num_paths; i++) {
            size += blend_component_target(weights[i], target);
            build_split_part(ds, cfg, &view->parts[i], split, origin,
                             blend_component_samples(weights[i], target), comm);
        }
        build_blend(ds, cfg, view, split, weights, size, comm);
    } else {
        /* one epoch of each; weights are their lengths; size min(target, their sum) */
        double weights[GPT_DATA_MAX_PATHS];
        int64_t total = 0;
        for (int i = 0; i < blend->num_paths; i++) {
            build_split_part(ds, cfg, &view->parts[i], split, origin, -1, comm);
            weights[i] = (double)view->parts[i].num_samples;
            total += view->parts[i].num_samples;
        }
        build_blend(ds, cfg, view, split, weights, target < total ? target : total, comm);
    }
}

gpt_datasets *gpt_datasets_open(const gpt_data_config *cfg, MPI_Comm comm) {
    if (cfg->seq_length < 1) user_error("--seq-length must be positive for the GPT dataset");
    if (cfg->seed > 0xffffffffull)
        user_error("--seed %llu: the dataset's numpy RandomState takes seeds in [0, 2^32)",
                   (unsigned long long)cfg->seed);
    if (cfg->bert && (cfg->seq_length < 5 || cfg->seed < 1 || cfg->seed > INT32_MAX))
        user_error("the BERT dataset needs --seq-length >= 5 (got %d) and --seed in [1, 2^31) "
                   "(got %llu; Megatron's build_mapping takes a positive int32)", cfg->seq_length,
                   (unsigned long long)cfg->seed);
    if (cfg->t5 && (cfg->bert || cfg->seq_length < 4 || cfg->seed < 1 || cfg->seed > INT32_MAX ||
                    cfg->t5->decoder_seq_length < 1))
        user_error("the T5 dataset needs --encoder-seq-length >= 4 (got %d), "
                   "--decoder-seq-length >= 1 (got %d) and --seed in [1, 2^31) (got %llu; "
                   "Megatron's build_mapping takes a positive int32)", cfg->seq_length,
                   cfg->t5->decoder_seq_length, (unsigned long long)cfg->seed);
    if (cfg->t5 && !(cfg->t5->mask_prob > 0 && cfg->t5->mask_prob < 1 &&
                     cfg->t5->short_seq_prob >= 0 && cfg->t5->short_seq_prob <= 1))
        user_error("the T5 dataset needs --mask-prob in (0, 1) (got %g) and --short-seq-prob in "
                   "[0, 1] (got %g), as Megatron's MaskedWordPieceDatasetConfig asserts",
                   cfg->t5->mask_prob, cfg->t5->short_seq_prob);
    gpt_datasets *ds = calloc(1, sizeof *ds);
    CHECK(ds, "out of memory");
    ds->cfg = cfg;
    ds->bert = cfg->bert;
    ds->t5 = cfg->t5;
    ds->bert_seed = cfg->seed;
    ds->seq_length = cfg->seq_length;
    ds->eod = -1;
    int64_t ranges[GPT_DATA_MAX_PATHS][2];

    if (cfg->per_split) {
        /* each split from its own blend, over all of each corpus's documents */
        static const char *const flags[GPT_DATA_SPLITS] = {"--train-data-path", "--valid-data-path",
                                                           "--test-data-path"};
        for (int split = 0; split < GPT_DATA_SPLITS; split++) {
            const gpt_blend *blend = &cfg->split_blends[split];
            if (blend->num_paths == 0 || cfg->num_samples[split] <= 0) continue;
            for (int i = 0; i < blend->num_paths; i++) {
                ranges[i][0] = 0;
                ranges[i][1] = corpus_of(ds, blend->paths[i])->num_documents;
            }
            build_split(ds, cfg, blend, split, ranges, blend->num_paths == 1, flags[split], comm);
        }
        ds->cfg = NULL;
        return ds;
    }

    const gpt_blend *blend = &cfg->blend;
    if (blend->num_paths < 1 || blend->num_paths > GPT_DATA_MAX_PATHS)
        user_error("--data-path: between 1 and %d corpora expected", GPT_DATA_MAX_PATHS);
    const char *split_string = cfg->split ? cfg->split : "969, 30, 1";
    ds->split_string = split_string;
    split_ends(split_string, ds->split_ends, ds->split_present);
    int64_t bounds[GPT_DATA_MAX_PATHS][GPT_DATA_SPLITS + 1];
    int present[GPT_DATA_SPLITS];
    for (int i = 0; i < blend->num_paths; i++)
        gpt_split_bounds(split_string, corpus_of(ds, blend->paths[i])->num_documents, bounds[i],
                         present);
    char origin[600];
    snprintf(origin, sizeof origin, "--split %s", split_string);
    for (int split = 0; split < GPT_DATA_SPLITS; split++) {
        for (int i = 0; i < blend->num_paths; i++) {
            ranges[i][0] = ds->splits[split].parts[i].first = bounds[i][split];
            ranges[i][1] = ds->splits[split].parts[i].last = bounds[i][split + 1];
        }
        if (!present[split] || cfg->num_samples[split] <= 0) continue;
        if (split == SPLIT_TEST && cfg->test_optional) {
            int usable = 1;
            for (int i = 0; i < blend->num_paths; i++) {
                const int64_t *lengths = corpus_of(ds, blend->paths[i])->lengths;
                int64_t tokens = 0;
                for (int64_t d = ranges[i][0]; d < ranges[i][1]; d++) tokens += lengths[d];
                usable &= tokens >= 2;
            }
            if (!usable) continue;
        }
        build_split(ds, cfg, blend, split, ranges, blend->num_paths == 1 && !blend->has_weights,
                    origin, comm);
    }
    ds->cfg = NULL;
    return ds;
}

int64_t gpt_dataset_num_samples(gpt_datasets *ds, int split) {
    CHECK(split >= 0 && split < GPT_DATA_SPLITS, "bad split %d", split);
    return ds->splits[split].size;
}

/* _query_document_sample_shuffle_indices: the sample's pieces of consecutive document-index
 * entries, the last token of one sample being the first of the next */
static void read_part_sample(const split_part *part, int seq_length, int64_t index,
                             int32_t *tokens) {
    CHECK(index >= 0 && index < part->num_samples, "%s: sample %lld of %lld", part->c->path,
          (long long)index, (long long)part->num_samples);
    const int64_t *document_index = part->arrays.data[0], *sample_index = part->arrays.data[1];
    int64_t s = part->arrays.data[2][index];
    int64_t begin = sample_index[2 * s], begin_offset = sample_index[2 * s + 1];
    int64_t end = sample_index[2 * s + 2], end_offset = sample_index[2 * s + 3];
    int64_t filled = 0;
    for (int64_t i = begin; i <= end; i++) {
        int64_t document = document_index[i];
        int64_t offset = i == begin ? begin_offset : 0;
        int64_t stop = i == end ? end_offset + 1 : part->c->lengths[document];
        int64_t n = stop - offset;
        CHECK(filled + n <= seq_length + 1, "sample %lld overflows", (long long)index);
        read_document(part->c, document, offset, n, tokens + filled);
        filled += n;
    }
    CHECK(filled == seq_length + 1, "%s: sample %lld has %lld tokens, expected %d", part->c->path,
          (long long)index, (long long)filled, seq_length + 1);
}

void gpt_dataset_sample(gpt_datasets *ds, int split, int64_t index, int32_t *tokens) {
    const split_view *view = &ds->splits[split];
    CHECK(index >= 0 && index < view->size, "%s sample %lld out of [0, %lld)", split_names[split],
          (long long)index, (long long)view->size);
    if (!view->blended) {
        read_part_sample(&view->parts[0], ds->seq_length, index, tokens);
        return;
    }
    int64_t d = view->blend.data[0][index];
    read_part_sample(&view->parts[d], ds->seq_length, view->blend.data[1][index], tokens);
}

/* the sentences of masked sample `index` of a part, back to back in ds->bert_tokens (their
 * lengths in ds->bert_lengths); returns the sample index row */
static const int64_t *read_masked_sentences(gpt_datasets *ds, const split_part *part,
                                            int64_t index, int64_t *num_tokens) {
    CHECK(index >= 0 && index < part->num_samples, "%s: sample %lld of %lld", part->c->path,
          (long long)index, (long long)part->num_samples);
    const corpus *c = part->c;
    const int64_t *row = part->arrays.data[0] + 3 * index;
    int64_t first = row[0], last = row[1], tokens = 0;
    for (int64_t s = first; s < last; s++) tokens += c->sentence_lengths[s];
    if ((size_t)tokens > ds->bert_tokens_capacity) {
        free(ds->bert_tokens);
        ds->bert_tokens_capacity = (size_t)tokens;
        ds->bert_tokens = malloc(sizeof(int32_t) * ds->bert_tokens_capacity);
        CHECK(ds->bert_tokens, "out of memory");
    }
    if ((size_t)(last - first) > ds->bert_lengths_capacity) {
        free(ds->bert_lengths);
        ds->bert_lengths_capacity = (size_t)(last - first);
        ds->bert_lengths = malloc(sizeof(int64_t) * ds->bert_lengths_capacity);
        CHECK(ds->bert_lengths, "out of memory");
    }
    int64_t filled = 0;
    for (int64_t s = first; s < last; s++) {
        int64_t n = c->sentence_lengths[s];
        ds->bert_lengths[s - first] = n;
        if (c->mm) mmap_indexed_read(c->mm, s, 0, n, ds->bert_tokens + filled);
        filled += n;
    }
    /* an HDF5 corpus: one read per run of sentences that lie back to back in the file (a
     * document's do), not one per sentence: each read is an HDF5 (MPI-IO) call of tens of
     * microseconds, and a 512-token sample holds dozens of sentences */
    for (int64_t s = first, at = 0; !c->mm && s < last;) {
        int64_t run_end = s + 1, n = c->sentence_lengths[s];
        while (run_end < last && c->sentence_tokens[run_end] == c->sentence_tokens[s] + n)
            n += c->sentence_lengths[run_end++];
        if (n > 0) hdf5_corpus_read_tokens(c->h5, c->sentence_tokens[s], n, ds->bert_tokens + at);
        at += n;
        s = run_end;
    }
    *num_tokens = filled;
    return row;
}

/* BERTMaskedWordPieceDataset.__getitem__: the sample's sentences, then bert_build_sample */
static void read_bert_part_sample(gpt_datasets *ds, const split_part *part, int64_t index,
                                  bert_sample *out) {
    const corpus *c = part->c;
    int64_t num_tokens = 0;
    const int64_t *row = read_masked_sentences(ds, part, index, &num_tokens);
    int64_t first = row[0], last = row[1];
    char why[300];
    if (bert_build_sample(ds->bert, ds->seq_length, (uint64_t)ds->bert_seed, index, ds->bert_tokens,
                          ds->bert_lengths, (int)(last - first), row[2], out, &ds->bert_scratch,
                          why, sizeof why) != 0)
        user_error("%s: BERT sample %lld (sentences [%lld, %lld)): %s", c->path, (long long)index,
                   (long long)first, (long long)last, why);
}

void bert_dataset_sample(gpt_datasets *ds, int split, int64_t index, bert_sample *out) {
    CHECK(ds->bert, "bert_dataset_sample on GPT datasets");
    const split_view *view = &ds->splits[split];
    CHECK(index >= 0 && index < view->size, "%s sample %lld out of [0, %lld)", split_names[split],
          (long long)index, (long long)view->size);
    if (!view->blended) {
        read_bert_part_sample(ds, &view->parts[0], index, out);
        return;
    }
    int64_t d = view->blend.data[0][index];
    read_bert_part_sample(ds, &view->parts[d], view->blend.data[1][index], out);
}

/* T5MaskedWordPieceDataset.__getitem__: the sample's sentences, then t5_build_sample */
static void read_t5_part_sample(gpt_datasets *ds, const split_part *part, int64_t index,
                                t5_sample *out) {
    int64_t num_tokens = 0;
    const int64_t *row = read_masked_sentences(ds, part, index, &num_tokens);
    char why[400];
    if (t5_build_sample(ds->t5, ds->seq_length, (uint64_t)ds->bert_seed, index, ds->bert_tokens,
                        num_tokens, row[2], out, &ds->t5_scratch, why, sizeof why) != 0)
        user_error("%s: T5 sample %lld (sentences [%lld, %lld)): %s", part->c->path,
                   (long long)index, (long long)row[0], (long long)row[1], why);
}

void t5_dataset_sample(gpt_datasets *ds, int split, int64_t index, t5_sample *out) {
    CHECK(ds->t5, "t5_dataset_sample on datasets that are not T5's");
    const split_view *view = &ds->splits[split];
    CHECK(index >= 0 && index < view->size, "%s sample %lld out of [0, %lld)", split_names[split],
          (long long)index, (long long)view->size);
    if (!view->blended) {
        read_t5_part_sample(ds, &view->parts[0], index, out);
        return;
    }
    int64_t d = view->blend.data[0][index];
    read_t5_part_sample(ds, &view->parts[d], view->blend.data[1][index], out);
}

int gpt_dataset_sample_source(const gpt_datasets *ds, int split, int64_t index) {
    const split_view *view = &ds->splits[split];
    return view->blended ? (int)view->blend.data[0][index] : 0;
}

void gpt_dataset_document_range(const gpt_datasets *ds, int path_index, int split,
                                int64_t *first, int64_t *last) {
    const split_part *p = &ds->splits[split].parts[path_index];
    *first = p->first;
    *last = p->last;
}

int gpt_datasets_eod(const gpt_datasets *ds) { return ds->eod; }
int gpt_datasets_vocab_size(const gpt_datasets *ds) { return ds->vocab_size; }

void gpt_datasets_cache_counts(const gpt_datasets *ds, int *loaded, int *built, int *rebuilt) {
    *loaded = ds->stats.loaded;
    *built = ds->stats.built;
    *rebuilt = ds->stats.rebuilt;
}

void gpt_datasets_close(gpt_datasets *ds) {
    if (!ds) return;
    for (int s = 0; s < GPT_DATA_SPLITS; s++) {
        for (int i = 0; i < ds->splits[s].count; i++) index_arrays_free(&ds->splits[s].parts[i].arrays);
        index_arrays_free(&ds->splits[s].blend);
    }
    for (int i = 0; i < ds->num_corpora; i++) {
        hdf5_corpus_close(ds->corpora[i].h5);
        if (ds->corpora[i].mm) mmap_indexed_close(ds->corpora[i].mm);
        free(ds->corpora[i].lengths);
        free(ds->corpora[i].document_sentences);
        free(ds->corpora[i].sentence_lengths);
    }
    bert_scratch_free(&ds->bert_scratch);
    t5_scratch_free(&ds->t5_scratch);
    free(ds->bert_tokens);
    free(ds->bert_lengths);
    free(ds);
}
