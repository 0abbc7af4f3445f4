/* convert_corpus.c: converts a tokenized corpus between our HDF5 format (io/CORPUS_FORMAT.md)
 * and Megatron's indexed dataset (PREFIX.bin + PREFIX.idx), either way.
 *   convert_corpus --input X --output-prefix Y --to {hdf5,mmap} [--overwrite]
 *                  [--tokenizer-type T] [--vocab-size N] [--eod-id E]
 * X is CORPUS.h5 or a Megatron PREFIX (PREFIX.bin / PREFIX.idx also accepted). --to hdf5 writes
 * Y.h5, --to mmap writes Y.bin and Y.idx (exactly as Megatron's IndexedDatasetBuilder: one
 * sequence per sentence when the corpus has sentences, else per document). A .bin/.idx pair
 * carries no tokenizer information: the three optional flags stamp it into the HDF5 attributes
 * (otherwise "unknown", vocab 0, eod -1). Runs as one process (mpiexec -n 1 or directly). */
#include "io/io_error.h"
#include "app/core/error.h"
#include "app/core/options.h"
#include "io/hdf5_corpus.h"
#include "io/mmap_indexed.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { chunk_tokens = 1 << 22, path_max = 4096 };

typedef struct options {
    char input[path_max], output_prefix[path_max], to[8], tokenizer_type[64];
    int overwrite, vocab_size, eod_id;
} options;

#define AT(field) OPTION_AT(options, field)
static const option_spec specs[] = {
    {"input", "conversion", OPTION_STRING, AT(input), .flags = OPTION_REQUIRED, .metavar = "CORPUS.h5|PREFIX", .help = "our HDF5 corpus, or Megatron's PREFIX (PREFIX.bin / PREFIX.idx also accepted)"},
    {"output-prefix", "conversion", OPTION_STRING, AT(output_prefix), .flags = OPTION_REQUIRED, .metavar = "PREFIX", .help = "write PREFIX.h5, or PREFIX.bin and PREFIX.idx"},
    {"to", "conversion", OPTION_CHOICE, AT(to), .choices = "hdf5|mmap", .flags = OPTION_REQUIRED, .help = "the output format: our HDF5 corpus or Megatron's indexed dataset"},
    {"overwrite", "conversion", OPTION_FLAG, AT(overwrite), .help = "replace existing outputs"},
    {"tokenizer-type", "tokenizer (recorded when a .bin/.idx input becomes HDF5)", OPTION_STRING, AT(tokenizer_type), "unknown", .metavar = "TYPE", .help = "the tokenizer that made the corpus"},
    {"vocab-size", "tokenizer (recorded when a .bin/.idx input becomes HDF5)", OPTION_INT, AT(vocab_size), .range = "[1, inf)", .help = "its vocabulary size (default: unknown)"},
    {"eod-id", "tokenizer (recorded when a .bin/.idx input becomes HDF5)", OPTION_INT, AT(eod_id), .range = "[0, inf)", .help = "its end-of-document id (default: unknown)"},
};

static const option_table table = {
    .usage = "--input CORPUS.h5|PREFIX --output-prefix OUT --to {hdf5|mmap} [--FLAG VALUE ...]",
    .description =
        "Converts a tokenized corpus between our HDF5 format (io/CORPUS_FORMAT.md) and Megatron's\n"
        "indexed dataset (PREFIX.bin + PREFIX.idx), either way, as one process. Flags may also come\n"
        "from an args file (one flag per line, '#' starts a comment); the command line overrides it.\n",
    .specs = specs,
    .count = (int)(sizeof specs / sizeof specs[0]),
};

/* the flags; the tokenizer flags become the metadata of a .bin/.idx input */
static void parse_options(int argc, char **argv, options *o, corpus_meta *meta) {
    unsigned char given[sizeof specs / sizeof specs[0]];
    memset(o, 0, sizeof *o);
    options_parse_or_exit(&table, o, given, argc, argv);
    int has_vocab = options_given(&table, given, "vocab-size"), has_eod = options_given(&table, given, "eod-id");
    if (has_vocab && has_eod && o->eod_id >= o->vocab_size)
        user_error("--eod-id %d is not a token of --vocab-size %d (ids 0..%d)", o->eod_id, o->vocab_size,
                   o->vocab_size - 1);
    memset(meta, 0, sizeof *meta);
    snprintf(meta->tokenizer_type, sizeof meta->tokenizer_type, "%s", o->tokenizer_type);
    meta->vocab_size = has_vocab ? o->vocab_size : 0;
    meta->eod_id = has_eod ? o->eod_id : -1;
}

/* the input, either kind, seen as documents made of sequences */
typedef struct source {
    hdf5_corpus *h5;
    mmap_indexed *mm;
    int64_t num_tokens, num_documents, num_sequences;
    int tokens_uint16;
} source;

static int64_t sequence_start(const source *s, int64_t q) {
    if (s->h5) return s->h5->sentence_offsets ? s->h5->sentence_offsets[q] : s->h5->document_offsets[q];
    return s->mm->sequence_pointers[q] / s->mm->dtype_size;
}
static int64_t sequence_length(const source *s, int64_t q) {
    if (s->h5) return sequence_start(s, q + 1) - sequence_start(s, q);
    return s->mm->sequence_lengths[q];
}
/* sequences of document d are [first, last) */
static void document_sequences(const source *s, int64_t d, int64_t *first, int64_t *last) {
    if (s->mm) { *first = s->mm->document_indices[d]; *last = s->mm->document_indices[d + 1]; return; }
    if (!s->h5->sentence_offsets) { *first = d; *last = d + 1; return; }
    /* sentence index where each document starts: binary search in the sentence offsets */
    const int64_t *so = s->h5->sentence_offsets;
    for (int k = 0; k < 2; k++) {
        int64_t target = s->h5->document_offsets[d + k], lo = 0, hi = s->num_sequences;
        while (lo < hi) {  /* first sentence starting at or after target */
            int64_t mid = (lo + hi) / 2;
            if (so[mid] < target) lo = mid + 1; else hi = mid;
        }
        if (k == 0) *first = lo; else *last = lo;
    }
}
/* tokens [first, first + n) of the whole token stream */
static void read_tokens(const source *s, int64_t first, int64_t n, int32_t *out) {
    if (s->h5) { hdf5_corpus_read_tokens(s->h5, first, n, out); return; }
    /* the .bin is one stream; read it through sequence 0's pointer arithmetic */
    const unsigned char *base = s->mm->bin_map;
    int size = s->mm->dtype_size;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *e = base + (first + i) * size;
        int64_t v = 0;
        for (int b = size - 1; b >= 0; b--) v = v << 8 | e[b];
        if (s->mm->dtype_code == MMAP_DTYPE_INT8) v = (int8_t)v;
        if (s->mm->dtype_code == MMAP_DTYPE_INT16) v = (int16_t)v;
        if (s->mm->dtype_code == MMAP_DTYPE_INT32) v = (int32_t)v;
        out[i] = (int32_t)v;
    }
}

static void to_mmap(const source *s, const char *prefix) {
    char err[8192];
    int code = s->tokens_uint16 ? MMAP_DTYPE_UINT16 : MMAP_DTYPE_INT32;
    mmap_indexed_writer *w = mmap_indexed_writer_create(prefix, code, err, sizeof err);
    if (!w) user_error("%s", err);
    int32_t *buffer = NULL;
    int64_t cap = 0;
    for (int64_t d = 0; d < s->num_documents; d++) {
        int64_t first, last;
        document_sequences(s, d, &first, &last);
        for (int64_t q = first; q < last; q++) {
            int64_t n = sequence_length(s, q);
            if (n > cap) { cap = 2 * n; buffer = realloc(buffer, sizeof(int32_t) * (size_t)cap); }
            CHECK(buffer || n == 0, "out of memory");
            read_tokens(s, sequence_start(s, q), n, buffer);
            if (mmap_indexed_writer_add_item(w, buffer, n) != 0)
                user_error("%s.bin.tmp: write failed: %s", prefix, strerror(errno));
        }
        mmap_indexed_writer_end_document(w);
    }
    free(buffer);
    if (mmap_indexed_writer_finalize(w, err, sizeof err) != 0) user_error("%s", err);
}

static void to_hdf5(const source *s, const char *path, const corpus_meta *meta_in) {
    char err[8192], tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    corpus_meta meta = *meta_in;
    meta.tokens_uint16 = s->tokens_uint16;
    /* documents and sentences as token offsets */
    int64_t *document_offsets = malloc(sizeof(int64_t) * (size_t)(s->num_documents + 1));
    int64_t *sentence_offsets = malloc(sizeof(int64_t) * (size_t)(s->num_sequences + 1));
    CHECK(document_offsets && sentence_offsets, "out of memory");
    for (int64_t q = 0; q < s->num_sequences; q++) sentence_offsets[q] = sequence_start(s, q);
    sentence_offsets[s->num_sequences] = s->num_tokens;
    int identity = s->num_sequences == s->num_documents;  /* one sequence per document? */
    for (int64_t d = 0; d < s->num_documents; d++) {
        int64_t first, last;
        document_sequences(s, d, &first, &last);
        document_offsets[d] = sentence_offsets[first];
        identity = identity && first == d && last == d + 1;
    }
    document_offsets[s->num_documents] = s->num_tokens;
    meta.has_sentences = !identity;
    hdf5_corpus_writer *w = hdf5_corpus_create(tmp, MPI_COMM_SELF, &meta, s->num_tokens,
                                               s->num_documents, s->num_sequences, err, sizeof err);
    if (!w) user_error("%s", err);
    int32_t *buffer = malloc(sizeof(int32_t) * chunk_tokens);
    uint16_t *narrow = malloc(sizeof(uint16_t) * chunk_tokens);
    CHECK(buffer && narrow, "out of memory");
    for (int64_t at = 0; at < s->num_tokens; at += chunk_tokens) {
        int64_t n = s->num_tokens - at < chunk_tokens ? s->num_tokens - at : chunk_tokens;
        read_tokens(s, at, n, buffer);
        if (s->tokens_uint16) {
            for (int64_t i = 0; i < n; i++) narrow[i] = (uint16_t)buffer[i];
            hdf5_corpus_write_tokens(w, at, narrow, n);
        } else {
            hdf5_corpus_write_tokens(w, at, buffer, n);
        }
    }
    hdf5_corpus_write_document_offsets(w, 0, document_offsets, s->num_documents + 1);
    if (meta.has_sentences)
        hdf5_corpus_write_sentence_offsets(w, 0, sentence_offsets, s->num_sequences + 1);
    hdf5_corpus_writer_close(w);
    if (rename(tmp, path) != 0) user_error("cannot rename %s to %s: %s", tmp, path, strerror(errno));
    free(buffer);
    free(narrow);
    free(document_offsets);
    free(sentence_offsets);
}

static int exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    program_name = "convert_corpus";
    hdf5_errors_setup(0); /* MTC_HDF5_DEBUG=1 prints HDF5's error stacks */
    options o;
    corpus_meta meta;
    parse_options(argc, argv, &o, &meta);
    const char *input = o.input, *prefix = o.output_prefix;
    int overwrite = o.overwrite;

    char err[8192], stem[4096];
    source s;
    memset(&s, 0, sizeof s);
    size_t n = strlen(input);
    snprintf(stem, sizeof stem, "%s", input);
    if (n > 4 && (!strcmp(input + n - 4, ".bin") || !strcmp(input + n - 4, ".idx"))) stem[n - 4] = 0;
    if (hdf5_corpus_is_hdf5(input) || (n > 3 && !strcmp(input + n - 3, ".h5"))) {
        s.h5 = hdf5_corpus_open(input, err, sizeof err);
        if (!s.h5) user_error("%s", err);
        s.num_tokens = s.h5->num_tokens;
        s.num_documents = s.h5->num_documents;
        s.num_sequences = s.h5->num_sentences;
        s.tokens_uint16 = s.h5->meta.tokens_uint16;
        meta = s.h5->meta;
    } else {
        s.mm = mmap_indexed_open(stem, err, sizeof err);
        if (!s.mm) user_error("%s", err);
        s.num_tokens = s.mm->num_tokens;
        s.num_documents = s.mm->num_documents;
        s.num_sequences = s.mm->num_sequences;
        s.tokens_uint16 = s.mm->dtype_code == MMAP_DTYPE_UINT16 || s.mm->dtype_code == MMAP_DTYPE_UINT8;
        meta.sources = stem;
    }

    char out[4200], out_idx[4200];
    int mmap_out = !strcmp(o.to, "mmap");
    snprintf(out, sizeof out, mmap_out ? "%s.bin" : "%s.h5", prefix);
    snprintf(out_idx, sizeof out_idx, "%s.idx", prefix);
    if (!overwrite && (exists(out) || (mmap_out && exists(out_idx))))
        user_error("%s already exists; pass --overwrite to replace it", mmap_out && !exists(out) ? out_idx : out);
    if (mmap_out) to_mmap(&s, prefix);
    else to_hdf5(&s, out, &meta);
    printf("> %s: %lld documents, %lld sequences, %lld tokens -> %s%s\n", program_name,
           (long long)s.num_documents, (long long)s.num_sequences, (long long)s.num_tokens, out,
           mmap_out ? " + .idx" : "");
    if (s.h5) hdf5_corpus_close(s.h5);
    if (s.mm) mmap_indexed_close(s.mm);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
