/* fuzz_idx_header.c: libFuzzer target for Megatron's .idx (io/mmap_indexed.c): the input is the
 * .idx, "\n----\n", the .bin; an index that opens has every sequence read. */
#include "io/mmap_indexed.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t second;
    size_t first = fuzz_split(data, size, &second);
    fuzz_file(0, "corpus.idx", data, first);
    fuzz_file(1, "corpus.bin", data + second, size - second);
    char prefix[512], err[1024];
    snprintf(prefix, sizeof prefix, "%s/corpus", fuzz_dir());
    mmap_indexed *m = mmap_indexed_open(prefix, err, sizeof err);
    if (!m) return 0;
    int32_t buffer[256];
    for (int64_t s = 0; s < m->num_sequences && s < 64; s++) {
        int64_t n = m->sequence_lengths[s] < 256 ? m->sequence_lengths[s] : 256;
        mmap_indexed_read(m, s, 0, n, buffer);
    }
    mmap_indexed_close(m);
    return 0;
}
