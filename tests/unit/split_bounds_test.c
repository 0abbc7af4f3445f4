/* split_bounds_test.c: prints gpt_split_bounds (app/data/gpt_dataset.h) for 1..N documents in the
 * format of tests/tools/megatron_gpt_samples.py --split-bounds, for tests/unit/split_bounds_test.sh:
 *   split_bounds_test SPLIT N      lines "DOCS: BEG-END BEG-END BEG-END" (None: no dataset) */
#include "app/core/error.h"
#include "app/data/gpt_dataset.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: split_bounds_test SPLIT N\n");
        return 2;
    }
    program_name = "split_bounds_test";
    long n = atol(argv[2]);
    for (long documents = 1; documents <= n; documents++) {
        int64_t bounds[GPT_DATA_SPLITS + 1];
        int present[GPT_DATA_SPLITS];
        gpt_split_bounds(argv[1], documents, bounds, present);
        printf("%ld:", documents);
        for (int s = 0; s < GPT_DATA_SPLITS; s++) {
            if (present[s]) printf(" %lld-%lld", (long long)bounds[s], (long long)bounds[s + 1]);
            else printf(" None");
        }
        printf("\n");
    }
    return 0;
}
