/* fuzz_tracker.c: libFuzzer target for the checkpoint tracker latest_checkpointed_iteration.txt
 * (io/checkpoint_format.c checkpoint_tracker_read). */
#include "io/checkpoint_format.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file(0, CHECKPOINT_TRACKER_NAME, data, size);
    int64_t iteration = 0;
    char err[8192];
    if (checkpoint_tracker_read(fuzz_dir(), &iteration, err, sizeof err) == 0) {
        checkpoint_names names;
        checkpoint_names_for(&names, fuzz_dir(), iteration, err, sizeof err);
    }
    return 0;
}
