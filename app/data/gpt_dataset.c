/* gpt_dataset.c: corpora, --split ranges, per-split GPT indices and blends (see gpt_dataset.h). */
#include "app/data/gpt_dataset.h"
#include "app/core/hash.h"
#include "app/data/blended_dataset.h"
#include "app/data/dataset_index.h"
#include "app/core/error.h"
#include "io/hdf5_corpus.h"
#include "io/mmap_indexed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const split_names[GPT_DATA_SPLITS] = {"train", "valid", "test"};

typedef struct corpus {
    char name[4200];           /* as named in the flags (the key when several splits share it) */
    char path[4200];
    hdf5_corpus *h5;
    mmap_indexed *mm;
    int64_t num_documents, num_tokens;
    int64_t *lengths;          /* tokens per GPT document */
    uint64_t lengths_hash;     /* identifies the content in cache descriptions */
} corpus;

typedef struct split_part {   /* one corpus's document range in one split, with its indices */
    corpus *c;
    int64_t first, last;
    index_arrays arrays;      /* document index, sample index, shuffle index */
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
    int num_corpora, seq_length;
    corpus corpora[MAX_CORPORA];
    split_view splits[GPT_DATA_SPLITS];
    int eod, vocab_size;
    index_cache_stats stats;
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

void gpt_split_bounds(const char *split, int64_t documents, int64_t bounds[GPT_DATA_SPLITS + 1],
                      int present[GPT_DATA_SPLITS]) {
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
    double ends[GPT_DATA_SPLITS + 1];
    ends[0] = 0;
    for (int i = 0; i < GPT_DATA_SPLITS; i++) ends[i + 1] = ends[i] + w[i] / sum;
    for (int i = 0; i < GPT_DATA_SPLITS; i++) present[i] = ends[i + 1] > ends[i];
    /* int(round(x)): Python rounds half to even, as nearbyint in the default rounding mode */
    for (int i = 0; i <= GPT_DATA_SPLITS; i++)
        bounds[i] = (int64_t)nearbyint(ends[i] * (double)documents);
}

/* ---- corpora --------------------------------------------------------------------------------- */
static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void open_corpus(corpus *c, const char *prefix) {
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
        c->num_documents = c->mm->num_sequences;  /* GPT documents are the sequences */
        c->num_tokens = c->mm->num_tokens;
        c->lengths = malloc(sizeof(int64_t) * (size_t)(c->num_documents + 1));
        CHECK(c->lengths, "out of memory");
        for (int64_t d = 0; d < c->num_documents; d++) c->lengths[d] = c->mm->sequence_lengths[d];
    } else {
        user_error("--data-path %s: neither %s nor %s/.idx exists", prefix, h5, bin);
    }
    c->lengths_hash = hash_fnv1a(HASH_FNV1A_OFFSET, c->lengths, sizeof(int64_t) * (size_t)c->num_documents);
}

static void read_document(const corpus *c, int64_t document, int64_t offset, int64_t n,
                          int32_t *out) {
    if (n <= 0) return;
    if (c->h5) hdf5_corpus_read_tokens(c->h5, c->h5->document_offsets[document] + offset, n, out);
    else mmap_indexed_read(c->mm, document, offset, n, out);
}

/* ---- index building ----------------------------------------------------------------------- */
typedef struct gpt_build { const split_part *part; int seq_length; int64_t samples; uint64_t seed; } gpt_build;

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
    out->data[2] = index.shuffle_index;
    out->length[2] = index.num_samples;
}

typedef struct blend_build { const double *weights; int count; int64_t size; } blend_build;

static void build_blend_arrays(void *context, index_arrays *out) {
    const blend_build *b = context;
    out->count = 2;
    out->length[0] = out->length[1] = b->size;
    out->data[0] = malloc(sizeof(int64_t) * (size_t)(b->size + 1));
    out->data[1] = malloc(sizeof(int64_t) * (size_t)(b->size + 1));
    CHECK(out->data[0] && out->data[1], "out of memory");
    blend_index_build(b->weights, b->count, b->size, out->data[0], out->data[1]);
}

/* one GPTDataset: `samples` < 0 is Megatron's num_samples None (one epoch) */
static void build_split_part(gpt_datasets *ds, const gpt_data_config *cfg, split_part *part,
                             int split, const char *split_string, int64_t samples, MPI_Comm comm) {
    int64_t tokens = 0;
    for (int64_t d = part->first; d < part->last; d++) tokens += part->c->lengths[d];
    if (part->last <= part->first || tokens < 2)
        user_error("%s: the %s split (%s) gets documents [%lld, %lld) of %lld, holding %lld "
                   "tokens: too few to build samples of %d tokens", part->c->path,
                   split_names[split], split_string, (long long)part->first,
                   (long long)part->last, (long long)part->c->num_documents, (long long)tokens,
                   cfg->seq_length + 1);
    char description[9000];
    /* v2: numpy RandomState (MT19937) shuffles; v1 files (Philox order) never match */
    snprintf(description, sizeof description,
             "GPTDataset indices v2 (numpy RandomState)\ncorpus=%s\ndocuments=%lld\ntokens=%lld\n"
             "lengths_hash=%016llx\nindex_split=%s\nrange=[%lld,%lld)\nsequence_length=%d\n"
             "random_seed=%llu\nnum_samples=%lld\nadd_extra_token_to_sequence=1\n"
             "drop_last_partial_sequence=1\n",
             part->c->path, (long long)part->c->num_documents, (long long)part->c->num_tokens,
             (unsigned long long)part->c->lengths_hash, split_names[split], (long long)part->first,
             (long long)part->last, cfg->seq_length, (unsigned long long)cfg->seed,
             (long long)samples);
    gpt_build b = {part, cfg->seq_length, samples, cfg->seed};
    index_cache_get(cfg->cache_path, "gpt_indices", description, build_gpt_arrays, &b,
                    &part->arrays, comm, &ds->stats, cfg->verbose);
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
    open_corpus(c, path);
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
    char description[4096 + 160 * GPT_DATA_MAX_PATHS];
    int at = snprintf(description, sizeof description,
                      "BlendedDataset v2\nsplit=%s\nsize=%lld\nseq_length=%d\nseed=%llu\n",
                      split_names[split], (long long)size, cfg->seq_length,
                      (unsigned long long)cfg->seed);
    for (int i = 0; i < view->count && at < (int)sizeof description - 160; i++)
        at += snprintf(description + at, sizeof description - (size_t)at,
                       "weight=%.17g corpus=%016llx range=[%lld,%lld) samples=%lld\n", weights[i],
                       (unsigned long long)view->parts[i].c->lengths_hash,
                       (long long)view->parts[i].first, (long long)view->parts[i].last,
                       (long long)view->parts[i].num_samples);
    blend_build b = {weights, view->count, size};
    index_cache_get(cfg->cache_path, "blend_indices", description, build_blend_arrays, &b,
                    &view->blend, comm, &ds->stats, cfg->verbose);
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
    gpt_datasets *ds = calloc(1, sizeof *ds);
    CHECK(ds, "out of memory");
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
        return ds;
    }

    const gpt_blend *blend = &cfg->blend;
    if (blend->num_paths < 1 || blend->num_paths > GPT_DATA_MAX_PATHS)
        user_error("--data-path: between 1 and %d corpora expected", GPT_DATA_MAX_PATHS);
    const char *split_string = cfg->split ? cfg->split : "969, 30, 1";
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
        build_split(ds, cfg, blend, split, ranges, blend->num_paths == 1 && !blend->has_weights,
                    origin, comm);
    }
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

static void free_arrays(index_arrays *a) {
    for (int i = 0; i < a->count; i++) free(a->data[i]);
    memset(a, 0, sizeof *a);
}

void gpt_datasets_close(gpt_datasets *ds) {
    if (!ds) return;
    for (int s = 0; s < GPT_DATA_SPLITS; s++) {
        for (int i = 0; i < ds->splits[s].count; i++) free_arrays(&ds->splits[s].parts[i].arrays);
        free_arrays(&ds->splits[s].blend);
    }
    for (int i = 0; i < ds->num_corpora; i++) {
        hdf5_corpus_close(ds->corpora[i].h5);
        if (ds->corpora[i].mm) mmap_indexed_close(ds->corpora[i].mm);
        free(ds->corpora[i].lengths);
    }
    free(ds);
}
