/* fuzz_hf_tokenizer.c: libFuzzer target for Hugging Face tokenizer.json (app/tokenizers/
 * tokenizer_hf.c, HuggingFaceTokenizer): the input is tokenizer.json, "\n----\n",
 * tokenizer_config.json (left out when that part is empty), written into one folder as the
 * loader reads them; a tokenizer that loads encodes a fixed text (special tokens, the
 * pre-tokenizer's regex, bytes outside the vocabulary) and decodes the ids back. */
#include "app/tokenizers/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t second;
    size_t first = fuzz_split(data, size, &second);
    fuzz_file(0, "tokenizer.json", data, first);
    const char *config = fuzz_file(1, "tokenizer_config.json", data + second, size - second);
    if (second >= size) unlink(config);
    char err[1024];
    tokenizer *tok = tokenizer_create_with_model("HuggingFaceTokenizer", NULL, NULL, fuzz_dir(), 0, err, sizeof err);
    if (!tok) return 0;
    static const char text[] = "<|begin_of_text|>Hello world, it's 2026!\r\n\t  \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 12345<|end_of_text|>\xff";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &cap) == 0) free(tokenizer_decode(tok, ids, n));
    free(ids);
    tokenizer_free(tok);
    return 0;
}
