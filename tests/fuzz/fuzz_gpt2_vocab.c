/* fuzz_gpt2_vocab.c: libFuzzer target for the GPT-2 BPE files (app/tokenizers/tokenizer_gpt2.c):
 * the input is vocab.json, "\n----\n", merges.txt; a tokenizer that loads encodes a fixed text. */
#include "app/tokenizers/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t second;
    size_t first = fuzz_split(data, size, &second);
    const char *vocab = fuzz_file(0, "vocab.json", data, first);
    const char *merges = fuzz_file(1, "merges.txt", data + second, size - second);
    char err[1024];
    tokenizer *tok = tokenizer_create("GPT2BPETokenizer", vocab, merges, 0, err, sizeof err);
    if (!tok) return 0;
    static const char text[] = "Hello world, it's 2026!\n  ünïcödé";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &cap) == 0) free(tokenizer_decode(tok, ids, n));
    free(ids);
    tokenizer_free(tok);
    return 0;
}
