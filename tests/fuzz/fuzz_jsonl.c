/* fuzz_jsonl.c: libFuzzer target for one JSONL line (io/jsonl_reader.h jsonl_extract_string). */
#include "io/jsonl_reader.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = NULL, why[256];
    size_t len = 0;
    if (jsonl_extract_string((const char *)data, size, "text", &text, &len, why, sizeof why) == JSONL_OK) {
        volatile char sink = len ? text[len - 1] : 0;
        (void)sink;
    }
    free(text);
    return 0;
}
