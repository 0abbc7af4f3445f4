/* fuzz_wordpiece_vocab.c: libFuzzer target for a BERT WordPiece vocab.txt
 * (app/tokenizers/tokenizer_wordpiece.c); a tokenizer that loads encodes a fixed text. */
#include "app/tokenizers/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *vocab = fuzz_file(0, "vocab.txt", data, size);
    char err[1024];
    tokenizer *tok = tokenizer_create("BertWordPieceLowerCase", vocab, NULL, 0, err, sizeof err);
    if (!tok) return 0;
    static const char text[] = "Hello, unaffable world! ünïcödé 42";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &cap) == 0) free(tokenizer_decode(tok, ids, n));
    free(ids);
    tokenizer_free(tok);
    return 0;
}
