/* checkpoint_boxes_test.c: a local range of a sharded tensor as checkpoint boxes
 * (shard_range_part) and boxes cut into pieces of whole rows (tensor_part_pieces), checked
 * element by element: local element e of a block of width w whose first element is global
 * (r0, c0) is global element (r0 + e / w, c0 + e % w), and the boxes, walked box after box in
 * row-major order, must visit exactly the range's elements in local order. A few named cases
 * also compare the boxes with ones worked out by hand. */
#include "app/checkpoint/checkpoint_boxes.h"
#include "tests/tap.h"

#include <stdio.h>
#include <string.h>

typedef struct cell {
    int64_t row, col;
} cell;

enum { MAX_CELLS = 4096 };

/* the global elements of boxes[0..n), box after box, row-major */
static size_t cells_of_boxes(const tensor_box *boxes, int n, cell *out) {
    size_t count = 0;
    for (int b = 0; b < n; b++)
        for (int64_t r = 0; r < boxes[b].rows; r++)
            for (int64_t c = 0; c < boxes[b].cols; c++)
                if (count < MAX_CELLS) out[count++] = (cell){boxes[b].row + r, boxes[b].col + c};
    return count;
}

/* the global elements of local elements [lo, hi) of the block, in local order */
static size_t cells_of_range(const shard_block *block, size_t lo, size_t hi, cell *out) {
    size_t count = 0;
    for (size_t e = lo; e < hi; e++)
        out[count++] = (cell){block->first_row + (int64_t)e / block->cols, block->first_col + (int64_t)e % block->cols};
    return count;
}

static int same_cells(const cell *a, size_t na, const cell *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, sizeof(cell) * na) == 0);
}

/* shard_range_part of [lo, hi) visits the range's elements, in at most TENSOR_MAX_BOXES
 * non-empty boxes; describes the first failure in why */
static int range_ok(const shard_block *block, size_t lo, size_t hi, char *why, size_t whylen) {
    static cell expected[MAX_CELLS], found[MAX_CELLS];
    tensor_part part = shard_range_part(block, lo, hi);
    size_t ne = cells_of_range(block, lo, hi, expected);
    size_t nf = cells_of_boxes(part.boxes, part.num_boxes, found);
    int ok = part.num_boxes >= (lo < hi) && part.num_boxes <= TENSOR_MAX_BOXES;
    for (int b = 0; b < part.num_boxes; b++) ok = ok && part.boxes[b].rows > 0 && part.boxes[b].cols > 0;
    ok = ok && tensor_part_elements(&part) == hi - lo && same_cells(expected, ne, found, nf);
    if (!ok)
        snprintf(why, whylen, "block (%lld, %lld) width %lld, range [%zu, %zu): %d boxes, %zu elements",
                 (long long)block->first_row, (long long)block->first_col, (long long)block->cols, lo, hi,
                 part.num_boxes, tensor_part_elements(&part));
    return ok;
}

/* every range [lo, hi) of a block of `elements` elements */
static int all_ranges_ok(const shard_block *block, size_t elements, const char *what) {
    char why[256] = "";
    int checked = 0, ok = 1;
    for (size_t lo = 0; lo <= elements && ok; lo++)
        for (size_t hi = lo; hi <= elements && ok; hi++, checked++) ok = range_ok(block, lo, hi, why, sizeof why);
    if (!ok) tap_diag("%s", why);
    return tap_ok(ok, "%s: every range of %zu elements gives boxes holding exactly its elements, in order (%d checked)",
                  what, elements, checked);
}

static int boxes_are(const shard_block *block, size_t lo, size_t hi, int n, const tensor_box *want) {
    tensor_part part = shard_range_part(block, lo, hi);
    int ok = part.num_boxes == n;
    for (int b = 0; ok && b < n; b++)
        ok = part.boxes[b].row == want[b].row && part.boxes[b].col == want[b].col &&
             part.boxes[b].rows == want[b].rows && part.boxes[b].cols == want[b].cols;
    if (!ok)
        for (int b = 0; b < part.num_boxes; b++)
            tap_diag("got box %d: row %lld col %lld, %lld x %lld", b, (long long)part.boxes[b].row,
                     (long long)part.boxes[b].col, (long long)part.boxes[b].rows, (long long)part.boxes[b].cols);
    return ok;
}

/* pieces of part tile its boxes in order with whole rows, as large as max_elements allows */
static int pieces_ok(const tensor_part *part, size_t max_elements, char *why, size_t whylen) {
    static tensor_box pieces[MAX_CELLS];
    static cell expected[MAX_CELLS], found[MAX_CELLS];
    int n = tensor_part_pieces(part, max_elements, pieces, MAX_CELLS);
    int ok = n >= 0 && n <= MAX_CELLS;
    size_t ne = cells_of_boxes(part->boxes, part->num_boxes, expected);
    size_t nf = ok ? cells_of_boxes(pieces, n, found) : 0;
    ok = ok && same_cells(expected, ne, found, nf);
    /* walk the boxes row by row alongside the pieces */
    int b = 0;
    int64_t row = 0;
    for (int k = 0; ok && k < n; k++) {
        while (b < part->num_boxes && row == part->boxes[b].rows) b++, row = 0;
        if (b == part->num_boxes) {
            ok = 0;
            break;
        }
        const tensor_box *box = &part->boxes[b];
        int64_t allowed = (int64_t)max_elements / box->cols;
        if (allowed < 1) allowed = 1;
        int last_of_box = row + pieces[k].rows == box->rows;
        ok = pieces[k].row == box->row + row && pieces[k].col == box->col &&
             pieces[k].cols == box->cols && pieces[k].rows >= 1 && pieces[k].rows <= allowed &&
             (last_of_box || pieces[k].rows == allowed);
        row += pieces[k].rows;
    }
    ok = ok && tensor_part_pieces(part, max_elements, NULL, 0) == n;
    if (!ok) snprintf(why, whylen, "%d boxes, %zu elements, pieces of at most %zu: %d pieces", part->num_boxes,
                      tensor_part_elements(part), max_elements, n);
    return ok;
}

int main(void) {
    /* row split: rows 4..7 of an [8, 6] tensor (tensor-parallel rank 1 of 2) */
    shard_block row_split = {.first_row = 4, .first_col = 0, .cols = 6};
    all_ranges_ok(&row_split, 24, "row-split weight [8, 6], rows 4..7");
    /* column split: columns 4..7 of a [5, 8] tensor */
    shard_block column_split = {.first_row = 0, .first_col = 4, .cols = 4};
    all_ranges_ok(&column_split, 20, "column-split weight [5, 8], columns 4..7");
    /* a vector: elements 6..11 of a row-split bias */
    shard_block vector = {.first_row = 6, .first_col = 0, .cols = 1};
    all_ranges_ok(&vector, 6, "vector, elements 6..11");
    int one_box = 1;
    for (size_t lo = 0; lo < 6; lo++)
        for (size_t hi = lo + 1; hi <= 6; hi++) one_box = one_box && shard_range_part(&vector, lo, hi).num_boxes == 1;
    tap_ok(one_box, "a range of a vector is one box");
    shard_block single_column = {.first_row = 0, .first_col = 7, .cols = 1};
    all_ranges_ok(&single_column, 5, "one column of a column-split weight");

    /* by hand: a block of 5 rows x 5 columns at global (2, 3) */
    shard_block block = {.first_row = 2, .first_col = 3, .cols = 5};
    all_ranges_ok(&block, 25, "block of 5 x 5 at (2, 3)");
    tap_ok(boxes_are(&block, 2, 23, 3, (tensor_box[]){{2, 5, 1, 3}, {3, 3, 3, 5}, {6, 3, 1, 3}}),
           "a range starting and ending inside rows: partial first row, full rows, partial last row");
    tap_ok(boxes_are(&block, 2, 15, 2, (tensor_box[]){{2, 5, 1, 3}, {3, 3, 2, 5}}),
           "a range starting inside a row and ending at a row's end: two boxes");
    tap_ok(boxes_are(&block, 5, 12, 2, (tensor_box[]){{3, 3, 1, 5}, {4, 3, 1, 2}}),
           "a range starting at a row's start and ending inside a row: two boxes");
    tap_ok(boxes_are(&block, 6, 9, 1, (tensor_box[]){{3, 4, 1, 3}}), "a range inside a single row: one box");
    tap_ok(boxes_are(&block, 3, 7, 2, (tensor_box[]){{2, 6, 1, 2}, {3, 3, 1, 2}}),
           "a range over one row boundary, no full row: two boxes");
    tap_ok(boxes_are(&block, 0, 25, 1, (tensor_box[]){{2, 3, 5, 5}}), "the whole shard: one box");
    tap_ok(shard_range_part(&block, 7, 7).num_boxes == 0, "an empty range: no boxes");

    /* pieces: every range of the 5 x 5 block, every piece size from 1 to beyond the block */
    char why[256] = "";
    int ok = 1, checked = 0;
    for (size_t lo = 0; lo < 25 && ok; lo++)
        for (size_t hi = lo + 1; hi <= 25 && ok; hi++)
            for (size_t max = 1; max <= 30 && ok; max++, checked++) {
                tensor_part part = shard_range_part(&block, lo, hi);
                ok = pieces_ok(&part, max, why, sizeof why);
            }
    if (!ok) tap_diag("%s", why);
    tap_ok(ok, "pieces tile the boxes in order, whole rows, as many rows as fit (%d cases)", checked);
    tensor_part whole = shard_range_part(&block, 0, 25);
    tensor_box cut[8];
    int n = tensor_part_pieces(&whole, 10, cut, 8);
    tap_ok(n == 3 && cut[0].row == 2 && cut[0].rows == 2 && cut[1].row == 4 && cut[1].rows == 2 &&
               cut[2].row == 6 && cut[2].rows == 1 && cut[2].cols == 5,
           "5 rows of 5 in pieces of at most 10 elements: rows 2-3, 4-5, 6");
    n = tensor_part_pieces(&whole, 3, cut, 2);
    tap_ok(n == 5 && cut[0].rows == 1 && cut[1].row == 3,
           "pieces smaller than a row are one row each; the count comes back beyond the capacity");
    tap_ok(tensor_part_pieces(&whole, (size_t)1 << 30, NULL, 0) == 1, "a large piece size leaves a box whole");
    tensor_part none = {0};
    tap_ok(tensor_part_pieces(&none, 7, NULL, 0) == 0, "an empty part has no pieces");
    return tap_done();
}
