/* batch_check_test.c: app/training/batch_check.c finds the first token id outside [0, V) of a
 * micro-batch's row (the ids fed to the embedding, the labels with -1 for "no loss"): the
 * boundaries V - 1 (inside) and V (outside), negative ids, -1 only where labels allow it. */
#include "app/training/batch_check.h"
#include "tests/tap.h"

int main(void) {
    const int inside[6] = {0, 5, 63, 1, 62, 0};
    tap_ok(batch_check_first_outside(inside, 6, 64, 0) == -1, "ids 0 .. V-1 (V = 64) are inside");
    const int at_v[5] = {0, 5, 63, 64, 70};
    tap_ok(batch_check_first_outside(at_v, 5, 64, 0) == 3, "id V (64) is the first outside: position 3 (got %ld)",
           batch_check_first_outside(at_v, 5, 64, 0));
    tap_ok(batch_check_first_outside(at_v, 3, 64, 0) == -1, "only the n ids given are read");
    const int extra[4] = {2, 160, 3, 9};  /* an <extra_id_i> of BertWordPieceCase in a model of 64 */
    tap_ok(batch_check_first_outside(extra, 4, 64, 1) == 1, "id 160 outside a vocabulary of 64 (labels too)");
    const int labels[5] = {-1, 7, -1, 63, -1};
    tap_ok(batch_check_first_outside(labels, 5, 64, 1) == -1, "labels: -1 (no loss) is allowed");
    tap_ok(batch_check_first_outside(labels, 5, 64, 0) == 0, "token ids: -1 is outside (got %ld)",
           batch_check_first_outside(labels, 5, 64, 0));
    const int minus_two[3] = {1, -2, 3};
    tap_ok(batch_check_first_outside(minus_two, 3, 64, 1) == 1, "labels: -2 is outside");
    tap_ok(batch_check_first_outside(minus_two, 0, 64, 0) == -1, "an empty row has nothing outside");
    return tap_done();
}
