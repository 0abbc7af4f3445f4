/* mock_data.c: see mock_data.h. The EOD id is vocab_size - 1; document tokens are in
 * [0, vocab_size - 1). Document lengths are uniform in [8, 64]. */
#include "app/data/mock_data.h"
#include "kernels/philox.h"

void mock_data_sample(uint64_t seed, int split, int64_t index, int vocab_size, int length,
                      int32_t *tokens) {
    uint64_t stream = philox_stream_mix(0x6d6f636bull /* "mock" */, (uint64_t)split);
    int eod = vocab_size - 1, symbols = vocab_size - 1;
    uint64_t counter = (uint64_t)index << 20; /* room for 2^20 draws per sample */
    int t = 0;
    while (t < length) {
        philox_out r = philox4x32(seed, counter++, stream);
        int doc_length = 8 + (int)(r.v[0] % 57u);
        int start = (int)(r.v[1] % (uint32_t)symbols);
        for (int k = 0; k < doc_length && t < length; k++) tokens[t++] = (start + k) % symbols;
        if (t < length) tokens[t++] = eod;
    }
}
