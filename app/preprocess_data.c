/* preprocess_data.c: Megatron-LM's tools/preprocess_data.py as an MPI program. JSONL input
 * (plain or gzip) is tokenized by all ranks at once and written as ONE parallel-HDF5 corpus
 * (io/CORPUS_FORMAT.md), named like Megatron's output: PREFIX_KEY_document.h5 (or _sentence).
 *
 * Work split: the inputs, in order, are laid end to end; plain files count their bytes, gzip
 * files count 4x their compressed bytes (they cannot be split, so each goes whole to the rank
 * whose share holds its first byte). Each rank gets one contiguous share, reads the lines that
 * start in it, tokenizes them one at a time and streams tokens and document/sentence ends into
 * unlinked temporary files beside the output (memory is bounded by the longest line). Then an
 * MPI_Exscan of the counts places every rank's range, the datasets are created collectively
 * and each rank copies its temporary files into its hyperslabs in fixed-size collective rounds.
 * Rank 0's share comes first, so the corpus is the same whatever the number of ranks.
 *
 * The output is written as OUTPUT.tmp and renamed when complete; an existing output is kept
 * unless --overwrite is given. Progress lines are rank 0's own counts; totals are job-wide. */
#include "io/io_error.h"
#include "app/core/error.h"
#include "app/core/options.h"
#include "io/hdf5_corpus.h"
#include "io/jsonl_reader.h"
#include "app/tokenizers/tokenizer.h"

#include <ctype.h>
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { max_inputs = 4096, bad_examples = 5, copy_chunk = 1 << 22, gzip_cost_factor = 4 };
enum { path_max = 4096 };

typedef struct options {
    char input[1 << 20];  /* --input: the files, separated by single spaces */
    char json_key[64], output_prefix[path_max], tokenizer_type[32];
    char vocab_file[path_max], merge_file[path_max], tokenizer_model[path_max];
    int vocab_size, append_eod, split_sentences, keep_newlines, workers, partitions, strict, overwrite;
    int64_t log_interval;
    float max_bad_fraction;  /* --max-bad-fraction */
    /* derived: --input split into file names */
    const char *inputs[max_inputs];
    int num_inputs;
} options;

typedef struct input_file { int64_t size; int is_gzip; } input_file;

/* a piece of the input handled by one rank: lines of file `file` starting in [begin, end) */
typedef struct segment { int file, rank; int64_t begin, end; } segment;

enum bad_kind { BAD_MALFORMED, BAD_MISSING_KEY, BAD_NOT_STRING, BAD_TOKENIZER, BAD_KINDS };
static const char *const bad_kind_names[BAD_KINDS] = {
    "malformed JSON", "missing key", "value not a string", "tokenizer error"};

typedef struct bad_line {
    int segment, kind;
    int64_t local_line;  /* 0-based within the segment */
    char why[200], excerpt[120];
} bad_line;

typedef struct counts {
    int64_t documents, sentences, tokens, bytes, empty_documents, blank_lines;
    int64_t bad[BAD_KINDS];
} counts;

/* ---- arguments ---------------------------------------------------------------------------- */
/* Megatron's tools/preprocess_data.py flags and groups */
#define AT(field) OPTION_AT(options, field)
static const option_spec specs[] = {
    {"input", "input data", OPTION_LIST, AT(input), .flags = OPTION_REQUIRED, .metavar = "FILE [FILE ...]", .help = "JSON lines, plain or gzip-compressed (file names without spaces)"},
    {"json-keys", "input data", OPTION_LIST, AT(json_key), "text", .metavar = "KEY", .help = "the key of the text in each JSON line (one key per run)"},
    {"json-key", "input data", OPTION_STRING, AT(json_key), "text", .metavar = "KEY", .help = "same as --json-keys"},
    {"split-sentences", "input data", OPTION_FLAG, AT(split_sentences), .help = "split documents into sentences (writes PREFIX_KEY_sentence.h5)"},
    {"keep-newlines", "input data", OPTION_FLAG, AT(keep_newlines), .help = "with --split-sentences: keep a newline that ends a sentence"},
    {"tokenizer-type", "tokenizer", OPTION_CHOICE, AT(tokenizer_type), .choices = "GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer|HuggingFaceTokenizer|Llama2Tokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer", .flags = OPTION_REQUIRED, .help = "how to turn text into token ids"},
    {"vocab-file", "tokenizer", OPTION_STRING, AT(vocab_file), .help = "vocabulary (vocab.json for GPT-2, vocab.txt for WordPiece)"},
    {"merge-file", "tokenizer", OPTION_STRING, AT(merge_file), .help = "BPE merges (merges.txt for GPT-2)"},
    {"tokenizer-model", "tokenizer", OPTION_STRING, AT(tokenizer_model), .help = "HuggingFaceTokenizer: a directory with tokenizer.json (and tokenizer_config.json for the EOS) or the file; Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer: the tokenizer.model"},
    {"vocab-size", "tokenizer", OPTION_INT, AT(vocab_size), .range = "[1, inf)", .help = "NullTokenizer: text ids are 0..N-1 and N is the EOD"},
    {"append-eod", "tokenizer", OPTION_FLAG, AT(append_eod), .help = "end every document with the tokenizer's EOD token"},
    {"output-prefix", "output data", OPTION_STRING, AT(output_prefix), .flags = OPTION_REQUIRED, .metavar = "PREFIX", .help = "write PREFIX_KEY_document.h5 (or _sentence.h5)"},
    {"overwrite", "output data", OPTION_FLAG, AT(overwrite), .help = "replace an existing output"},
    {"workers", "runtime", OPTION_INT, AT(workers), .range = "[1, inf)", .help = "the MPI ranks: must equal mpiexec's -n (or be omitted)"},
    {"partitions", "runtime", OPTION_INT, AT(partitions), "1", .range = "[1, 1]", .help = "must be 1: the ranks already share the input"},
    {"log-interval", "runtime", OPTION_INT64, AT(log_interval), "100", .range = "[1, inf)", .help = "print progress every N documents (rank 0's count)"},
    {"strict", "runtime", OPTION_FLAG, AT(strict), .help = "stop at the first bad input line and write nothing"},
    {"max-bad-fraction", "runtime", OPTION_FLOAT, AT(max_bad_fraction), "1", .range = "[0, 1]", .help = "write nothing and exit 1 when more than this fraction of the non-blank input lines is bad (malformed JSON, missing key, ...); not a Megatron flag"},
};

static const option_table table = {
    .usage = "--input FILE [FILE ...] --output-prefix PREFIX --tokenizer-type TYPE [--FLAG VALUE ...]",
    .description =
        "Tokenizes JSON lines (plain or gzip) with every MPI rank at once into one parallel-HDF5\n"
        "corpus, PREFIX_KEY_document.h5 (PREFIX_KEY_sentence.h5 with --split-sentences); see\n"
        "io/CORPUS_FORMAT.md. Run it as `mpiexec -n N preprocess_data ...`. Flags may also come\n"
        "from an args file (one flag per line, '#' starts a comment); the command line overrides it.\n",
    .specs = specs,
    .count = (int)(sizeof specs / sizeof specs[0]),
};

static void parse_options(int argc, char **argv, options *o) {
    unsigned char given[sizeof specs / sizeof specs[0]];
    memset(o, 0, sizeof *o);
    options_parse_or_exit(&table, o, given, argc, argv);
    if (strchr(o->json_key, ' '))
        user_error("--json-keys: only one key per run is supported (got \"%s\")", o->json_key);
    for (char *save = NULL, *name = strtok_r(o->input, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        if (o->num_inputs == max_inputs) user_error("--input: more than %d inputs", max_inputs);
        o->inputs[o->num_inputs++] = name;
    }
    int size;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (options_given(&table, given, "workers") && o->workers != size)
        user_error("--workers %d, but running on %d MPI rank%s: the workers are the MPI ranks; run "
                   "`mpiexec -n %d preprocess_data ...` or omit --workers", o->workers, size,
                   size == 1 ? "" : "s", o->workers);
}

/* ---- sentence splitting -------------------------------------------------------------------- */
/* A sentence ends after . ! or ? (plus closing quotes/brackets) followed by whitespace, unless
 * the word before the period is a known abbreviation or a single capital; and at blank lines.
 * Leading and trailing whitespace is trimmed; with keep_newlines a trailing "\n" is kept. */
static int is_abbreviation(const char *text, size_t period) {
    static const char *const words[] = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Prof", "vs",
                                        "etc", "e.g", "i.e", "cf", "No", "Mt", "Inc", "Ltd"};
    size_t start = period;
    while (start > 0 && !isspace((unsigned char)text[start - 1])) start--;
    size_t n = period - start;
    if (n == 1 && isupper((unsigned char)text[start])) return 1;
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        if (strlen(words[k]) == n && strncmp(text + start, words[k], n) == 0) return 1;
    return 0;
}

typedef void (*sentence_fn)(const char *start, size_t len, void *context);

static void emit_trimmed(const char *text, size_t begin, size_t end, int keep_newlines,
                         sentence_fn fn, void *context) {
    while (begin < end && isspace((unsigned char)text[begin])) begin++;
    size_t trimmed_end = end;
    while (trimmed_end > begin && isspace((unsigned char)text[trimmed_end - 1])) trimmed_end--;
    if (trimmed_end == begin) return;
    if (keep_newlines && trimmed_end < end && memchr(text + trimmed_end, '\n', end - trimmed_end))
        trimmed_end++;  /* approximates Megatron's --keep-newlines: keep one newline */
    fn(text + begin, trimmed_end - begin, context);
}

static void split_sentences(const char *text, size_t len, int keep_newlines, sentence_fn fn,
                            void *context) {
    size_t begin = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        size_t end = 0;
        if (c == '\n' && i + 1 < len && text[i + 1] == '\n') {
            end = i;
        } else if (c == '.' || c == '!' || c == '?') {
            size_t j = i + 1;
            while (j < len && strchr("\"')]", text[j])) j++;
            if (j < len && isspace((unsigned char)text[j]) && !(c == '.' && is_abbreviation(text, i)))
                end = j;
        }
        if (end) {
            emit_trimmed(text, begin, end, keep_newlines, fn, context);
            begin = end;
            i = end;
        }
    }
    emit_trimmed(text, begin, len, keep_newlines, fn, context);
}

/* ---- per-rank temporary streams ------------------------------------------------------------ */
typedef struct spill { FILE *file; int64_t count; size_t element; } spill;

static void spill_open(spill *s, const char *output, const char *what, int rank, size_t element) {
    char path[4200];
    snprintf(path, sizeof path, "%s.%s.rank%d.XXXXXX", output, what, rank);
    int fd = mkstemp(path);
    if (fd < 0) user_error_local("cannot create the temporary file %s: %s", path, strerror(errno));
    unlink(path);  /* gone when we exit, whatever happens */
    s->file = fdopen(fd, "w+b");
    CHECK(s->file, "fdopen failed");
    setvbuf(s->file, NULL, _IOFBF, 1 << 20);
    s->count = 0;
    s->element = element;
}

static void spill_write(spill *s, const void *data, int64_t n) {
    if (n && fwrite(data, s->element, (size_t)n, s->file) != (size_t)n)
        user_error_local("writing a temporary file failed (disk full?): %s", strerror(errno));
    s->count += n;
}

/* ---- tokenizing one rank's share ----------------------------------------------------------- */
typedef struct worker {
    const options *o;
    tokenizer *tok;
    spill tokens, document_ends, sentence_ends;
    int tokens_uint16;
    int32_t *ids;
    size_t n_ids, ids_cap;
    int64_t document_tokens;  /* tokens of the document being built */
    uint16_t *narrow;
    size_t narrow_cap;
    counts c;
    bad_line bad[bad_examples];
    int num_bad;
    int tokenizer_failed;
    const char *tokenizer_error;
} worker;

static void emit_tokens(worker *w, const int32_t *ids, size_t n) {
    int max_id = w->tokens_uint16 ? 65535 : INT32_MAX;
    for (size_t i = 0; i < n; i++)
        CHECK(ids[i] >= 0 && ids[i] <= max_id, "token id %d does not fit the corpus type", ids[i]);
    if (w->tokens_uint16) {
        if (n > w->narrow_cap) {
            w->narrow_cap = 2 * n;
            w->narrow = realloc(w->narrow, w->narrow_cap * sizeof *w->narrow);
            CHECK(w->narrow, "out of memory");
        }
        for (size_t i = 0; i < n; i++) w->narrow[i] = (uint16_t)ids[i];
        spill_write(&w->tokens, w->narrow, (int64_t)n);
    } else {
        spill_write(&w->tokens, ids, (int64_t)n);
    }
    w->document_tokens += (int64_t)n;
}

/* one sentence: tokenize, keep it if it has tokens, record where it ends */
static void add_sentence(const char *text, size_t len, void *context) {
    worker *w = context;
    if (w->tokenizer_failed) return;
    w->n_ids = 0;
    if (tokenizer_encode(w->tok, text, len, &w->ids, &w->n_ids, &w->ids_cap) != 0) {
        w->tokenizer_failed = 1;
        return;
    }
    if (w->n_ids == 0) return;
    emit_tokens(w, w->ids, w->n_ids);
    int64_t end = w->tokens.count;
    if (w->o->split_sentences) spill_write(&w->sentence_ends, &end, 1);
    w->c.sentences++;
}

static void record_bad(worker *w, int segment, int64_t local_line, int kind, const char *why,
                       const char *line, size_t len) {
    w->c.bad[kind]++;
    if (w->num_bad == bad_examples) return;
    bad_line *b = &w->bad[w->num_bad++];
    memset(b, 0, sizeof *b);
    b->segment = segment;
    b->kind = kind;
    b->local_line = local_line;
    snprintf(b->why, sizeof b->why, "%s", why);
    size_t n = len < sizeof b->excerpt - 4 ? len : sizeof b->excerpt - 4;
    for (size_t i = 0; i < n; i++)  /* printable excerpt */
        b->excerpt[i] = (line[i] >= 32 && line[i] < 127) ? line[i] : '?';
    if (n < len) strcat(b->excerpt, "...");
}

/* returns 0 normally, 1 when --strict met a bad line and this rank stopped */
static int process_document(worker *w, int segment, int64_t local_line, const char *line,
                            size_t len) {
    char why[256];
    char *text;
    size_t text_len;
    enum jsonl_status status = jsonl_extract_string(line, len, w->o->json_key, &text, &text_len,
                                                    why, sizeof why);
    if (status != JSONL_OK) {
        int kind = status == JSONL_MALFORMED ? BAD_MALFORMED
                 : status == JSONL_MISSING_KEY ? BAD_MISSING_KEY : BAD_NOT_STRING;
        record_bad(w, segment, local_line, kind, why, line, len);
        return w->o->strict;
    }
    int64_t tokens_before = w->tokens.count, sentences_before = w->c.sentences;
    w->document_tokens = 0;
    w->tokenizer_failed = 0;
    if (w->o->split_sentences) split_sentences(text, text_len, w->o->keep_newlines, add_sentence, w);
    else add_sentence(text, text_len, w);
    free(text);
    if (w->tokenizer_failed) {
        snprintf(why, sizeof why, "%s", tokenizer_last_error(w->tok));
        /* drop what this document wrote */
        CHECK(fflush(w->tokens.file) == 0 &&
              ftruncate(fileno(w->tokens.file), (off_t)tokens_before * (off_t)w->tokens.element) == 0 &&
              fseeko(w->tokens.file, 0, SEEK_END) == 0, "cannot roll back a temporary file");
        w->tokens.count = tokens_before;
        if (w->o->split_sentences) {
            FILE *f = w->sentence_ends.file;
            int64_t keep = w->sentence_ends.count - (w->c.sentences - sentences_before);
            CHECK(fflush(f) == 0 && ftruncate(fileno(f), (off_t)keep * 8) == 0 &&
                  fseeko(f, 0, SEEK_END) == 0, "cannot roll back a temporary file");
            w->sentence_ends.count = keep;
        }
        w->c.sentences = sentences_before;
        record_bad(w, segment, local_line, BAD_TOKENIZER, why, line, len);
        return w->o->strict;
    }
    if (w->document_tokens == 0) {
        w->c.empty_documents++;
        return 0;
    }
    if (w->o->append_eod) {
        int32_t eod = tokenizer_eod(w->tok);
        emit_tokens(w, &eod, 1);
        if (w->o->split_sentences) {  /* the EOD belongs to the last sentence */
            int64_t end = w->tokens.count;
            CHECK(fseeko(w->sentence_ends.file, -8, SEEK_END) == 0, "seek failed");
            spill_write(&w->sentence_ends, &end, 1);
            w->sentence_ends.count--;
        }
    }
    int64_t end = w->tokens.count;
    spill_write(&w->document_ends, &end, 1);
    w->c.documents++;
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */
/* rank 0's message, if any, stops every rank with user_error (message printed once) */
static void agree_on_error(const char *message_on_rank0) {
    char message[10000] = "";
    int rank;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 0 && message_on_rank0) snprintf(message, sizeof message, "%s", message_on_rank0);
    CHECK_MPI(MPI_Bcast(message, sizeof message, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (message[0]) user_error("%s", message);
}

static double now(void) { return MPI_Wtime(); }

/* lays the inputs end to end and cuts them into equal shares, one per rank (see the top) */
static segment *plan_segments(const options *o, const input_file *files, int ranks, int *count) {
    int64_t total = 0;
    for (int f = 0; f < o->num_inputs; f++)
        total += files[f].is_gzip ? gzip_cost_factor * files[f].size : files[f].size;
    segment *list = calloc((size_t)(o->num_inputs + 1) * (size_t)ranks, sizeof *list);
    CHECK(list, "out of memory");
    int n = 0;
    for (int r = 0; r < ranks; r++) {
        int64_t lo = total * r / ranks, hi = total * (r + 1) / ranks, start = 0;
        for (int f = 0; f < o->num_inputs; f++) {
            int64_t cost = files[f].is_gzip ? gzip_cost_factor * files[f].size : files[f].size;
            if (files[f].is_gzip) {
                if (cost > 0 && start >= lo && start < hi)
                    list[n++] = (segment){f, r, 0, -1};
            } else {
                int64_t b = start > lo ? start : lo, e = start + cost < hi ? start + cost : hi;
                if (b < e) list[n++] = (segment){f, r, b - start, e - start};
            }
            start += cost;
        }
    }
    *count = n;
    return list;
}

/* copies a temporary stream into dataset range [first, first + count) in collective rounds;
 * `add` is added to every element (offsets become global) */
typedef void (*write_fn)(hdf5_corpus_writer *, int64_t, const void *, int64_t);
static void copy_spill(hdf5_corpus_writer *writer, write_fn write, spill *s, int64_t first,
                       int64_t add) {
    int64_t chunk = copy_chunk / (int64_t)s->element, rounds = (s->count + chunk - 1) / chunk;
    int64_t max_rounds;
    CHECK_MPI(MPI_Allreduce(&rounds, &max_rounds, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    CHECK(fflush(s->file) == 0 && fseeko(s->file, 0, SEEK_SET) == 0, "cannot rewind a temp file");
    char *buffer = malloc((size_t)chunk * s->element);
    CHECK(buffer, "out of memory");
    int64_t done = 0;
    for (int64_t round = 0; round < max_rounds; round++) {
        int64_t n = s->count - done < chunk ? s->count - done : chunk;
        if (n > 0 && fread(buffer, s->element, (size_t)n, s->file) != (size_t)n)
            user_error_local("reading back a temporary file failed: %s", strerror(errno));
        if (add)
            for (int64_t i = 0; i < n; i++) ((int64_t *)buffer)[i] += add;
        write(writer, first + done, buffer, n);
        done += n;
    }
    free(buffer);
}

static void write_tokens_fn(hdf5_corpus_writer *w, int64_t first, const void *b, int64_t n) {
    hdf5_corpus_write_tokens(w, first, b, n);
}
static void write_documents_fn(hdf5_corpus_writer *w, int64_t first, const void *b, int64_t n) {
    hdf5_corpus_write_document_offsets(w, first, b, n);
}
static void write_sentences_fn(hdf5_corpus_writer *w, int64_t first, const void *b, int64_t n) {
    hdf5_corpus_write_sentence_offsets(w, first, b, n);
}

/* Gathers the bad-line examples and counts to rank 0 and prints them with global line numbers
 * (a segment's first line number = lines owned by earlier segments of the same file). */
static void report_bad_lines(const options *o, const worker *w, const segment *segments,
                             int num_segments, const int64_t *segment_lines, int rank, int ranks,
                             const counts *total) {
    int64_t bad_total = 0;
    for (int k = 0; k < BAD_KINDS; k++) bad_total += total->bad[k];
    if (bad_total == 0) return;
    bad_line *all = rank == 0 ? malloc(sizeof(bad_line) * bad_examples * (size_t)ranks) : NULL;
    int *numbers = rank == 0 ? malloc(sizeof(int) * (size_t)ranks) : NULL;
    CHECK(rank != 0 || (all && numbers), "out of memory");
    CHECK_MPI(MPI_Gather(&w->num_bad, 1, MPI_INT, numbers, 1, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Gather(w->bad, (int)sizeof w->bad, MPI_BYTE, all, (int)sizeof w->bad, MPI_BYTE,
                         0, MPI_COMM_WORLD));
    if (rank == 0) {
        int shown = 0;
        for (int r = 0; r < ranks && shown < bad_examples; r++)
            for (int i = 0; i < numbers[r] && shown < bad_examples; i++, shown++) {
                const bad_line *b = &all[r * bad_examples + i];
                int64_t line = b->local_line + 1;
                for (int s = 0; s < b->segment; s++)
                    if (segments[s].file == segments[b->segment].file) line += segment_lines[s];
                fprintf(stderr, "%s: %s:%lld: %s: %s\n", program_name,
                        o->inputs[segments[b->segment].file], (long long)line, b->why, b->excerpt);
            }
        fprintf(stderr, "%s: bad input lines:", program_name);
        for (int k = 0; k < BAD_KINDS; k++)
            fprintf(stderr, " %s %lld%s", bad_kind_names[k], (long long)total->bad[k],
                    k + 1 < BAD_KINDS ? "," : "");
        fprintf(stderr, " (first %d shown above)\n", shown);
    }
    (void)num_segments;
    free(all);
    free(numbers);
}

/* ---- main --------------------------------------------------------------------------------- */
int main(int argc, char **argv) {
    CHECK_MPI(MPI_Init(&argc, &argv));
    program_name = "preprocess_data";
    hdf5_errors_setup(0); /* MTC_HDF5_DEBUG=1 prints HDF5's error stacks */
    int rank, ranks;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    static options o;  /* --input's buffer is large */
    parse_options(argc, argv, &o);
    double start_time = now();

    char err[4096 + 512] = "";
    tokenizer *tok = tokenizer_create_with_model(o.tokenizer_type, o.vocab_file[0] ? o.vocab_file : NULL,
                                                 o.merge_file[0] ? o.merge_file : NULL,
                                                 o.tokenizer_model[0] ? o.tokenizer_model : NULL,
                                                 o.vocab_size, err, sizeof err);
    if (!tok) user_error("%s", err);
    if (o.append_eod && tokenizer_eod(tok) < 0)
        user_error("--append-eod: tokenizer %s names no end-of-document token (HuggingFaceTokenizer: "
                   "tokenizer_config.json's eos_token beside tokenizer.json)", tokenizer_type(tok));

    /* output name as Megatron: PREFIX_KEY_{document,sentence} */
    char output[4200], output_tmp[4300];
    snprintf(output, sizeof output, "%s_%s_%s.h5", o.output_prefix, o.json_key,
             o.split_sentences ? "sentence" : "document");
    snprintf(output_tmp, sizeof output_tmp, "%s.tmp", output);

    /* rank 0 looks at the inputs and the output; everyone agrees on the verdict */
    input_file files[max_inputs];
    char message[10000] = "";
    if (rank == 0) {
        struct stat st;
        for (int f = 0; f < o.num_inputs && !message[0]; f++) {
            if (stat(o.inputs[f], &st) != 0 || !S_ISREG(st.st_mode) || access(o.inputs[f], R_OK))
                snprintf(message, sizeof message, "--input %s: not a readable file", o.inputs[f]);
            files[f].size = (int64_t)st.st_size;
            files[f].is_gzip = jsonl_file_is_gzip(o.inputs[f]);
        }
        if (!message[0] && !o.overwrite && stat(output, &st) == 0)
            snprintf(message, sizeof message, "%s already exists; pass --overwrite to replace it",
                     output);
    }
    agree_on_error(message);
    CHECK_MPI(MPI_Bcast(files, (int)sizeof(input_file) * o.num_inputs, MPI_BYTE, 0, MPI_COMM_WORLD));

    int num_segments;
    segment *segments = plan_segments(&o, files, ranks, &num_segments);
    int64_t *segment_lines = calloc((size_t)num_segments + 1, sizeof *segment_lines);
    CHECK(segment_lines, "out of memory");

    worker w;
    memset(&w, 0, sizeof w);
    w.o = &o;
    w.tok = tok;
    w.tokens_uint16 = corpus_tokens_are_uint16(tokenizer_vocab_size(tok));
    spill_open(&w.tokens, output, "tokens", rank, w.tokens_uint16 ? 2 : 4);
    spill_open(&w.document_ends, output, "documents", rank, 8);
    if (o.split_sentences) spill_open(&w.sentence_ends, output, "sentences", rank, 8);
    if (rank == 0)
        printf("> %s: %d input file%s, %d rank%s, tokenizer %s (vocab %d), writing %s\n",
               program_name, o.num_inputs, o.num_inputs == 1 ? "" : "s", ranks,
               ranks == 1 ? "" : "s", tokenizer_type(tok), tokenizer_vocab_size(tok), output);

    /* phase 1: tokenize this rank's share into the temporary streams */
    int stopped = 0;
    int64_t next_log = o.log_interval;
    for (int s = 0; s < num_segments && !stopped; s++) {
        if (segments[s].rank != rank) continue;
        const segment *seg = &segments[s];
        line_reader *reader = line_reader_open(o.inputs[seg->file], files[seg->file].is_gzip,
                                               seg->begin, seg->end, err, sizeof err);
        if (!reader) user_error_local("%s", err);
        const char *line;
        size_t len;
        int got;
        int64_t bytes_before = w.c.bytes;
        while (!stopped && (got = line_reader_next(reader, &line, &len)) == 1) {
            int64_t local_line = segment_lines[s]++;
            int blank = 1;
            for (size_t i = 0; i < len && blank; i++) blank = isspace((unsigned char)line[i]);
            if (blank) { w.c.blank_lines++; continue; }
            stopped = process_document(&w, s, local_line, line, len);
            w.c.bytes = bytes_before + line_reader_bytes(reader);
            if (rank == 0 && w.c.documents >= next_log) {
                next_log += o.log_interval;
                double elapsed = now() - start_time;
                printf("Processed %lld documents (%.1f docs/s, %.2f MB/s) [rank 0 of %d]\n",
                       (long long)w.c.documents, w.c.documents / elapsed,
                       w.c.bytes / elapsed / 1e6, ranks);
                fflush(stdout);
            }
        }
        if (!stopped && got < 0) user_error_local("%s", line_reader_error(reader));
        w.c.bytes = bytes_before + line_reader_bytes(reader);
        line_reader_close(reader);
    }
    double tokenize_time = now() - start_time;

    /* phase 2: agree on the totals and where each rank's ranges go */
    w.c.tokens = w.tokens.count;
    counts total;
    CHECK_MPI(MPI_Allreduce(&w.c, &total, sizeof total / sizeof(int64_t), MPI_INT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, segment_lines, num_segments, MPI_INT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    /* every rank counted only its own segments' lines, so the sum is exact */
    report_bad_lines(&o, &w, segments, num_segments, segment_lines, rank, ranks, &total);
    int64_t bad_total = 0;
    for (int k = 0; k < BAD_KINDS; k++) bad_total += total.bad[k];
    if (o.strict && bad_total > 0)
        user_error("--strict: %lld bad input line%s (listed above); no output written",
                   (long long)bad_total, bad_total == 1 ? "" : "s");
    int64_t considered = total.documents + total.empty_documents + bad_total;
    if (total.documents == 0)
        user_error("no document to write: of %lld non-blank input line%s, %lld %s bad and %lld empty (is the input "
                   "JSON lines with the key \"%s\"?); no output written", (long long)considered,
                   considered == 1 ? "" : "s", (long long)bad_total, bad_total == 1 ? "is" : "are",
                   (long long)total.empty_documents, o.json_key);
    if (bad_total > o.max_bad_fraction * (double)considered)
        user_error("%lld of %lld non-blank input lines are bad (%.2f%%), more than --max-bad-fraction %g; no output "
                   "written", (long long)bad_total, (long long)considered, 100.0 * (double)bad_total / (double)considered,
                   o.max_bad_fraction);

    int64_t local[3] = {w.tokens.count, w.document_ends.count, w.sentence_ends.count}, base[3];
    CHECK_MPI(MPI_Exscan(local, base, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 0) base[0] = base[1] = base[2] = 0;

    corpus_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.tokenizer_type, sizeof meta.tokenizer_type, "%s", tokenizer_type(tok));
    meta.vocab_size = tokenizer_vocab_size(tok);
    meta.eod_id = tokenizer_eod(tok);
    meta.tokens_uint16 = w.tokens_uint16;
    meta.has_sentences = o.split_sentences;
    meta.append_eod = o.append_eod;
    snprintf(meta.json_key, sizeof meta.json_key, "%s", o.json_key);
    size_t sources_len = 1;
    for (int f = 0; f < o.num_inputs; f++) sources_len += strlen(o.inputs[f]) + 1;
    meta.sources = calloc(sources_len, 1);
    CHECK(meta.sources, "out of memory");
    for (int f = 0; f < o.num_inputs; f++) {
        strcat(meta.sources, o.inputs[f]);
        if (f + 1 < o.num_inputs) strcat(meta.sources, "\n");
    }

    hdf5_corpus_writer *writer = hdf5_corpus_create(output_tmp, MPI_COMM_WORLD, &meta,
                                                    total.tokens, total.documents,
                                                    o.split_sentences ? total.sentences : 0,
                                                    err, sizeof err);
    if (!writer) user_error("%s", err);
    static const int64_t zero = 0;
    copy_spill(writer, write_tokens_fn, &w.tokens, base[0], 0);
    hdf5_corpus_write_document_offsets(writer, 0, &zero, rank == 0 ? 1 : 0);
    copy_spill(writer, write_documents_fn, &w.document_ends, base[1] + 1, base[0]);
    if (o.split_sentences) {
        hdf5_corpus_write_sentence_offsets(writer, 0, &zero, rank == 0 ? 1 : 0);
        copy_spill(writer, write_sentences_fn, &w.sentence_ends, base[2] + 1, base[0]);
    }
    hdf5_corpus_writer_close(writer);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    message[0] = 0;
    if (rank == 0 && rename(output_tmp, output) != 0)
        snprintf(message, sizeof message, "cannot rename %s to %s: %s", output_tmp, output,
                 strerror(errno));
    agree_on_error(message);

    double elapsed = now() - start_time;
    if (rank == 0) {
        int64_t lines = 0;
        for (int s = 0; s < num_segments; s++) lines += segment_lines[s];
        printf("> done: %lld documents, %lld sentences, %lld tokens from %.2f MB of JSONL "
               "(%lld lines) in %.2f s (tokenize %.2f s, write %.2f s)\n",
               (long long)total.documents, (long long)total.sentences, (long long)total.tokens,
               total.bytes / 1e6, (long long)lines, elapsed, tokenize_time,
               elapsed - tokenize_time);
        printf("> skipped: %lld empty documents, %lld blank lines, %lld bad lines\n",
               (long long)total.empty_documents, (long long)total.blank_lines,
               (long long)bad_total);
        printf("> throughput: %.2f MB/s of JSONL in total, %.2f MB/s per rank\n",
               total.bytes / elapsed / 1e6, total.bytes / elapsed / 1e6 / ranks);
        printf("> wrote %s\n", output);
    }
    fclose(w.tokens.file);
    fclose(w.document_ends.file);
    if (o.split_sentences) fclose(w.sentence_ends.file);
    free(meta.sources);
    free(w.ids);
    free(w.narrow);
    free(segments);
    free(segment_lines);
    tokenizer_free(tok);
    CHECK_MPI(MPI_Finalize());
    return 0;
}
