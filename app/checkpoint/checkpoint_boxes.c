/* checkpoint_boxes.c: see checkpoint_boxes.h. */
#include "app/checkpoint/checkpoint_boxes.h"

tensor_part shard_range_part(const shard_block *block, size_t lo, size_t hi) {
    tensor_part part = {0};
    if (lo >= hi) return part;
    int64_t width = block->cols, row0 = block->first_row, col0 = block->first_col;
    int64_t first_row = (int64_t)lo / width, first_col = (int64_t)lo % width;
    int64_t last_row = (int64_t)(hi - 1) / width, last_col = (int64_t)(hi - 1) % width;
    if (first_row == last_row) {
        part.boxes[part.num_boxes++] = (tensor_box){row0 + first_row, col0 + first_col, 1, last_col - first_col + 1};
        return part;
    }
    int64_t full_first = first_row, full_last = last_row;
    if (first_col != 0) {
        part.boxes[part.num_boxes++] = (tensor_box){row0 + first_row, col0 + first_col, 1, width - first_col};
        full_first++;
    }
    if (last_col != width - 1) full_last--;
    if (full_last >= full_first)
        part.boxes[part.num_boxes++] = (tensor_box){row0 + full_first, col0, full_last - full_first + 1, width};
    if (last_col != width - 1)
        part.boxes[part.num_boxes++] = (tensor_box){row0 + last_row, col0, 1, last_col + 1};
    return part;
}

int tensor_part_pieces(const tensor_part *part, size_t max_elements, tensor_box *out, int capacity) {
    int count = 0;
    for (int b = 0; b < part->num_boxes; b++) {
        tensor_box box = part->boxes[b];
        int64_t rows_per_piece = (int64_t)(max_elements / (size_t)(box.cols > 0 ? box.cols : 1));
        if (rows_per_piece < 1) rows_per_piece = 1;
        for (int64_t r = 0; r < box.rows; r += rows_per_piece) {
            tensor_box cut = box;
            cut.row = box.row + r;
            cut.rows = box.rows - r < rows_per_piece ? box.rows - r : rows_per_piece;
            if (count < capacity) out[count] = cut;
            count++;
        }
    }
    return count;
}
