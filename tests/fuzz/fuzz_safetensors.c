/* fuzz_safetensors.c: libFuzzer target for a safetensors file (io/safetensors.c): the 8-byte
 * header length, the JSON header, the data; a file that opens has each tensor read as float32. */
#include "io/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(0, "model.safetensors", data, size);
    safetensors_file file;
    char err[1024];
    if (safetensors_open(path, &file, err, sizeof err) != 0) return 0;
    for (int i = 0; i < file.num_tensors && i < 16; i++) {
        const safetensors_tensor *t = &file.tensors[i];
        if (t->num_elements > (1 << 16)) continue;
        float *out = malloc(sizeof(float) * (size_t)(t->num_elements ? t->num_elements : 1));
        if (out) safetensors_read_float32(&file, t, out, err, sizeof err);
        free(out);
    }
    safetensors_metadata(&file, "format");
    safetensors_close(&file);
    return 0;
}
