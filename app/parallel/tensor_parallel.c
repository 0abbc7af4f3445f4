/* tensor_parallel.c: the tensor- and sequence-parallel region mappings of tensor_parallel.h.
 * A mapping's backward is the forward of its dual (copy_to <-> reduce_from, scatter_to <->
 * gather_from, gather_from_sequence_parallel <-> reduce_scatter_to_sequence_parallel), so each
 * collective is written once. */
#include "app/parallel/tensor_parallel.h"

/* ------------------------------------------------------------------ tensor-parallel region */

void *copy_to_tensor_parallel_region(const tensor_parallel_comm *tp, void *x) {
    (void)tp;
    return x;
}

void *reduce_from_tensor_parallel_region(const tensor_parallel_comm *tp, void *x, size_t rows, size_t cols,
                                         comm_dtype dtype) {
    tp->comm->allreduce(x, rows * cols, dtype, COMM_SUM, tp->group);
    return x;
}

void *copy_to_tensor_parallel_region_backward(const tensor_parallel_comm *tp, void *grad, size_t rows,
                                              size_t cols, comm_dtype dtype) {
    return reduce_from_tensor_parallel_region(tp, grad, rows, cols, dtype);
}

void *reduce_from_tensor_parallel_region_backward(const tensor_parallel_comm *tp, void *grad) {
    return copy_to_tensor_parallel_region(tp, grad);
}

/* Column blocks are strided in a row-major tensor: they move row by row (rows copies per
 * block). The GPT layers never need them (activations stay column-split from a column-parallel
 * linear into the row-parallel one after it, as in Megatron); they serve gather_output and
 * input_is_parallel = False layers. */

void *scatter_to_tensor_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out, size_t rows,
                                        size_t cols, comm_dtype dtype) {
    size_t block = cols / (size_t)tp->group->size, bytes = comm_dtype_bytes(dtype);
    const char *from = (const char *)x + (size_t)tp->group->rank * block * bytes;
    for (size_t r = 0; r < rows; r++)
        tp->ops->copy((char *)out + r * block * bytes, from + r * cols * bytes, block * bytes);
    return out;
}

/* the blocks are all-gathered into workspace [ranks][rows][block], then interleaved by row */
void *gather_from_tensor_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                         void *workspace, size_t rows, size_t cols, comm_dtype dtype) {
    size_t ranks = (size_t)tp->group->size, block = cols / ranks, bytes = comm_dtype_bytes(dtype);
    tp->comm->allgather(x, workspace, rows * block, dtype, tp->group);
    for (size_t k = 0; k < ranks; k++)
        for (size_t r = 0; r < rows; r++)
            tp->ops->copy((char *)out + (r * cols + k * block) * bytes,
                          (const char *)workspace + (k * rows + r) * block * bytes, block * bytes);
    return out;
}

void *scatter_to_tensor_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad, void *out,
                                                 void *workspace, size_t rows, size_t cols, comm_dtype dtype) {
    return gather_from_tensor_parallel_region(tp, grad, out, workspace, rows, cols, dtype);
}

void *gather_from_tensor_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad, void *out,
                                                  size_t rows, size_t cols, comm_dtype dtype) {
    return scatter_to_tensor_parallel_region(tp, grad, out, rows, cols, dtype);
}

/* ------------------------------------------------------------------ sequence-parallel region */

void *gather_from_sequence_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                           size_t rows, size_t cols, comm_dtype dtype) {
    tp->comm->allgather(x, out, rows / (size_t)tp->group->size * cols, dtype, tp->group);
    return out;
}

void *reduce_scatter_to_sequence_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                                 size_t rows, size_t cols, comm_dtype dtype) {
    tp->comm->reduce_scatter(x, out, rows / (size_t)tp->group->size * cols, dtype, tp->group);
    return out;
}

void *gather_from_sequence_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad,
                                                    void *out, size_t rows, size_t cols, comm_dtype dtype) {
    return reduce_scatter_to_sequence_parallel_region(tp, grad, out, rows, cols, dtype);
}

void *gather_from_sequence_parallel_region_backward_start(const tensor_parallel_comm *tp, const void *grad,
                                                          void *out, size_t rows, size_t cols, comm_dtype dtype,
                                                          comm_request *request) {
    tp->comm->ireduce_scatter_into(grad, out, rows / (size_t)tp->group->size * cols, dtype, tp->group, request);
    return out;
}

void *copy_to_tensor_parallel_region_backward_start(const tensor_parallel_comm *tp, void *grad, size_t rows,
                                                    size_t cols, comm_dtype dtype, comm_request *request) {
    tp->comm->iallreduce_into(grad, rows * cols, dtype, tp->group, request);
    return grad;
}

void *reduce_scatter_to_sequence_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad,
                                                          void *out, size_t rows, size_t cols, comm_dtype dtype) {
    return gather_from_sequence_parallel_region(tp, grad, out, rows, cols, dtype);
}

/* ------------------------------------------------------------------ vocab-parallel statistics */

void vocab_parallel_statistics_allreduce(const tensor_parallel_comm *tp, float *x, size_t count, comm_op op) {
    tp->comm->allreduce(x, count, COMM_FLOAT, op, tp->group);
}
