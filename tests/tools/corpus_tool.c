/* corpus_tool.c: helper for the data tests (not itself a test).
 *   corpus_tool make-jsonl TEXT OUT.jsonl CHARS   split TEXT at line ends into documents of
 *                                                 about CHARS bytes, one {"text": ...} per line
 *   corpus_tool digest CORPUS.h5|PREFIX           counts and FNV-1a hashes of tokens and offsets
 *   corpus_tool decode CORPUS.h5 TYPE VOCAB MERGE OUT
 *                                                 every document decoded (trailing EOD dropped),
 *                                                 concatenated into OUT */
#include "app/core/error.h"
#include "app/core/hash.h"
#include "io/hdf5_corpus.h"
#include "io/mmap_indexed.h"
#include "app/tokenizers/tokenizer.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int make_jsonl(const char *text_path, const char *out_path, long chars) {
    FILE *in = fopen(text_path, "rb"), *out = fopen(out_path, "wb");
    if (!in || !out) { perror("make-jsonl"); return 1; }
    long in_doc = 0;
    int c, open = 0;
    while ((c = fgetc(in)) != EOF) {
        if (!open) { fputs("{\"text\": \"", out); open = 1; }
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (c < 0x20) fprintf(out, "\\u%04x", c);
            else fputc(c, out);
        }
        in_doc++;
        if (c == '\n' && in_doc >= chars) { fputs("\"}\n", out); open = 0; in_doc = 0; }
    }
    if (open) fputs("\"}\n", out);
    fclose(in);
    return fclose(out) != 0;
}

static int digest(const char *path) {
    char err[8192];
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".h5") == 0) {
        hdf5_corpus *c = hdf5_corpus_open(path, err, sizeof err);
        if (!c) { fprintf(stderr, "%s\n", err); return 1; }
        uint64_t h = HASH_FNV1A_OFFSET;
        int32_t *buffer = malloc(sizeof(int32_t) << 20);
        for (int64_t at = 0; at < c->num_tokens; at += 1 << 20) {
            int64_t k = c->num_tokens - at < (1 << 20) ? c->num_tokens - at : (1 << 20);
            hdf5_corpus_read_tokens(c, at, k, buffer);
            h = hash_fnv1a(h, buffer, (size_t)k * 4);
        }
        free(buffer);
        printf("tokens %lld %016llx\n", (long long)c->num_tokens, (unsigned long long)h);
        printf("documents %lld %016llx\n", (long long)c->num_documents,
               (unsigned long long)hash_fnv1a(HASH_FNV1A_OFFSET, c->document_offsets,
                                       8 * (size_t)(c->num_documents + 1)));
        if (c->sentence_offsets)
            printf("sentences %lld %016llx\n", (long long)c->num_sentences,
                   (unsigned long long)hash_fnv1a(HASH_FNV1A_OFFSET, c->sentence_offsets,
                                           8 * (size_t)(c->num_sentences + 1)));
        printf("type %s vocab %lld eod %lld uint16 %d\n", c->meta.tokenizer_type,
               (long long)c->meta.vocab_size, (long long)c->meta.eod_id, c->meta.tokens_uint16);
        hdf5_corpus_close(c);
        return 0;
    }
    mmap_indexed *m = mmap_indexed_open(path, err, sizeof err);
    if (!m) { fprintf(stderr, "%s\n", err); return 1; }
    printf("sequences %lld documents %lld tokens %lld dtype %d\n", (long long)m->num_sequences,
           (long long)m->num_documents, (long long)m->num_tokens, m->dtype_code);
    mmap_indexed_close(m);
    return 0;
}

static int decode(const char *path, const char *type, const char *vocab, const char *merge,
                  const char *out_path) {
    char err[8192];
    hdf5_corpus *c = hdf5_corpus_open(path, err, sizeof err);
    tokenizer *tok = tokenizer_create(type, vocab, merge, 0, err, sizeof err);
    if (!c || !tok) { fprintf(stderr, "%s\n", err); return 1; }
    FILE *out = fopen(out_path, "wb");
    if (!out) { perror(out_path); return 1; }
    for (int64_t d = 0; d < c->num_documents; d++) {
        int64_t first = c->document_offsets[d], n = c->document_offsets[d + 1] - first;
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
        hdf5_corpus_read_tokens(c, first, n, ids);
        if (n > 0 && c->meta.append_eod && ids[n - 1] == c->meta.eod_id) n--;
        size_t len;
        char *text = tokenizer_decode_bytes(tok, ids, (size_t)n, &len);
        if (!text) { fprintf(stderr, "decode failed at document %lld\n", (long long)d); return 1; }
        fwrite(text, 1, len, out);
        free(text);
        free(ids);
    }
    fclose(out);
    tokenizer_free(tok);
    hdf5_corpus_close(c);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "corpus_tool";
    int status = 2;
    if (argc == 5 && !strcmp(argv[1], "make-jsonl")) status = make_jsonl(argv[2], argv[3], atol(argv[4]));
    else if (argc == 3 && !strcmp(argv[1], "digest")) status = digest(argv[2]);
    else if (argc == 7 && !strcmp(argv[1], "decode"))
        status = decode(argv[2], argv[3], argv[4], argv[5], argv[6]);
    else fprintf(stderr, "usage: see the comment at the top of tests/corpus_tool.c\n");
    MPI_Finalize();
    return status;
}
