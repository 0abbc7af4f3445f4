/* checkpoint_boxes.h: how a rank's share of a global tensor becomes boxes of the global index
 * space (io/checkpoint_file.h's tensor_part), and how boxes are cut into pieces for transfer.
 *
 * Tensor parallelism gives a rank a block of each global 2-D tensor: whole rows (row split) or
 * whole columns (column split), stored row-major. A range of that block's local elements (the
 * distributed optimizer's share of a bucket) can start and end inside rows, so it becomes up to
 * three boxes: the partial first row, the full rows, the partial last row; their elements in
 * global row-major order are exactly the range's elements in local order. */
#ifndef CHECKPOINT_BOXES_H
#define CHECKPOINT_BOXES_H

#include <stddef.h>
#include <stdint.h>

#include "io/checkpoint_file.h"

/* the block of a global tensor one rank holds: rows from first_row, columns
 * [first_col, first_col + cols); a vector is one column (first_col 0, cols 1) */
typedef struct shard_block {
    int64_t first_row, first_col;
    int64_t cols;
} shard_block;

/* local elements [lo, hi) of the block (row-major) as boxes of the global tensor; no boxes
 * when lo >= hi */
tensor_part shard_range_part(const shard_block *block, size_t lo, size_t hi);

/* The boxes of part, in order, cut into pieces of whole rows of at most max_elements elements
 * (at least one row each), so that a bounded staging buffer can carry any of them. Writes the
 * first `capacity` pieces to out (out may be NULL with capacity 0) and returns how many there
 * are; piece k's elements follow piece k-1's in memory. */
int tensor_part_pieces(const tensor_part *part, size_t max_elements, tensor_box *out, int capacity);

#endif
