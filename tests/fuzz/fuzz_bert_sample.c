/* fuzz_bert_sample.c: libFuzzer target for BERT's samples (app/data/bert_dataset.c) over
 * untrusted vocabularies and corpora: vocab.txt, a line "----", then bytes that make a corpus
 * (byte 0: --seq-length 5 + b % 60; byte 1: binary head and --short-seq-prob; then 16-bit token
 * ids, a value = 0 mod 13 closing a sentence and = 0 mod 31 a document, ids taken modulo the
 * vocabulary size + 3 so that some lie outside it). The sample index is built and every sample
 * made; a refusal (an id outside the vocabulary) is fine, a crash or a sanitizer report is not. */
#include "app/data/bert_dataset.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *cut = NULL;
    for (size_t i = 0; i + 4 <= size; i++)
        if (!memcmp(data + i, "----", 4)) { cut = data + i; break; }
    if (!cut) return 0;
    const char *vocab_path = fuzz_file(0, "vocab.txt", data, (size_t)(cut - data));
    const uint8_t *corpus = cut + 4;
    size_t corpus_bytes = size - (size_t)(corpus - data);
    if (corpus_bytes < 2) return 0;
    bert_dataset_config cfg = {.mask_prob = 0.15, .max_ngram = 3};
    uint8_t *word_piece = NULL;
    char err[600];
    if (bert_vocab_load(vocab_path, corpus[1] & 1 ? "BertWordPieceCase" : "BertWordPieceLowerCase",
                        &cfg.vocab, &word_piece, err, sizeof err) != 0)
        return 0;
    int seq_length = 5 + corpus[0] % 60;
    cfg.binary_head = corpus[1] >> 1 & 1;
    cfg.short_seq_prob = (corpus[1] >> 2) / 63.0;
    size_t n = (corpus_bytes - 2) / 2;
    int32_t *tokens = malloc(sizeof(int32_t) * (n + 1));
    int32_t *sizes = malloc(sizeof(int32_t) * (n + 1));
    int64_t *docs = malloc(sizeof(int64_t) * (n + 2)), *starts = malloc(sizeof(int64_t) * (n + 2));
    int64_t sentences = 0, documents = 0, length = 0;
    docs[0] = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned value = corpus[2 + 2 * i] | (unsigned)corpus[3 + 2 * i] << 8;
        tokens[i] = (int32_t)(value % (unsigned)(cfg.vocab.size + 3));
        length++;
        if (value % 13 == 0 || i + 1 == n) {
            starts[sentences] = (int64_t)i + 1 - length;
            sizes[sentences++] = (int32_t)length;
            length = 0;
            if (value % 31 == 0 || i + 1 == n) docs[++documents] = sentences;
        }
    }
    int64_t count = 0;
    int64_t *rows = sentences ? bert_build_sample_index(docs, documents, sizes, 20, seq_length - 3,
                                                        cfg.short_seq_prob, 1234, cfg.binary_head ? 2 : 1,
                                                        &count) : NULL;
    int64_t *fields = malloc(sizeof(int64_t) * 5 * (size_t)seq_length), lengths[64];
    bert_sample sample = {fields, fields + seq_length, fields + 2 * seq_length, fields + 3 * seq_length,
                          fields + 4 * seq_length, 0, 0};
    bert_scratch scratch = {0};
    for (int64_t s = 0; s < count && s < 20; s++) {
        int64_t first = rows[3 * s], last = rows[3 * s + 1];
        if (last - first > 64) continue;
        for (int64_t k = first; k < last; k++) lengths[k - first] = sizes[k];
        bert_build_sample(&cfg, seq_length, 1234, s, tokens + starts[first], lengths, (int)(last - first),
                          rows[3 * s + 2], &sample, &scratch, err, sizeof err);
    }
    bert_scratch_free(&scratch);
    free(rows), free(fields), free(tokens), free(sizes), free(docs), free(starts), free(word_piece);
    return 0;
}
