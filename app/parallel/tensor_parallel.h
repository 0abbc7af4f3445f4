/* tensor_parallel.h: the communication at the edges of tensor-parallel regions, after
 * Megatron-Core's tensor_parallel/mappings.py, over comm_ops and the tensor-parallel group. Each
 * mapping comes with the backward that autograd runs for it there:
 *                                               forward                  backward
 *   copy_to_tensor_parallel_region              identity                 all-reduce
 *   reduce_from_tensor_parallel_region          all-reduce               identity
 *   scatter_to_tensor_parallel_region           own column block         all-gather column blocks
 *   gather_from_tensor_parallel_region          all-gather column blocks own column block
 *   gather_from_sequence_parallel_region        all-gather row blocks    reduce-scatter row blocks
 *   reduce_scatter_to_sequence_parallel_region  reduce-scatter row blocks all-gather row blocks
 * A column-parallel linear layer enters its region with copy_to (or, with sequence parallelism,
 * gather_from_sequence_parallel); a row-parallel one leaves it with reduce_from (or
 * reduce_scatter_to_sequence_parallel).
 *
 * Tensors are row-major [rows, cols] in backend memory, rows and cols those of the whole tensor:
 * a row block is a rank's 1/tp of the rows (its tokens, with sequence parallelism), a column
 * block its 1/tp of the columns. Element types are given per call (the compute dtype for
 * activations; reductions are fp32 only on the MPI backend). Every function returns where its
 * result is: the input itself for identities and in-place all-reduces, `out` otherwise. */
#ifndef TENSOR_PARALLEL_H
#define TENSOR_PARALLEL_H

#include <stddef.h>

#include "app/parallel/comm.h"
#include "kernels/kernels.h"

typedef struct tensor_parallel_comm {
    const comm_ops *comm;
    const comm_group *group;   /* the tensor-parallel group */
    const kernel_ops *ops;     /* copies of column blocks */
} tensor_parallel_comm;

/* x [rows, cols], the same on every rank */
void *copy_to_tensor_parallel_region(const tensor_parallel_comm *tp, void *x);
/* grad [rows, cols] summed over ranks, in place */
void *copy_to_tensor_parallel_region_backward(const tensor_parallel_comm *tp, void *grad, size_t rows,
                                              size_t cols, comm_dtype dtype);

/* x [rows, cols] partial sums, summed over ranks in place */
void *reduce_from_tensor_parallel_region(const tensor_parallel_comm *tp, void *x, size_t rows, size_t cols,
                                         comm_dtype dtype);
void *reduce_from_tensor_parallel_region_backward(const tensor_parallel_comm *tp, void *grad);

/* x [rows, cols] -> out [rows, cols/tp], this rank's column block */
void *scatter_to_tensor_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out, size_t rows,
                                        size_t cols, comm_dtype dtype);
/* grad [rows, cols/tp] -> out [rows, cols]; workspace holds [rows, cols] */
void *scatter_to_tensor_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad, void *out,
                                                 void *workspace, size_t rows, size_t cols, comm_dtype dtype);

/* x [rows, cols/tp] -> out [rows, cols], every rank's column block; workspace holds [rows, cols] */
void *gather_from_tensor_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                         void *workspace, size_t rows, size_t cols, comm_dtype dtype);
/* grad [rows, cols] -> out [rows, cols/tp], this rank's column block */
void *gather_from_tensor_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad, void *out,
                                                  size_t rows, size_t cols, comm_dtype dtype);

/* x [rows/tp, cols] -> out [rows, cols], every rank's row block */
void *gather_from_sequence_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                           size_t rows, size_t cols, comm_dtype dtype);
/* grad [rows, cols] -> out [rows/tp, cols], this rank's row block of the sum over ranks */
void *gather_from_sequence_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad,
                                                    void *out, size_t rows, size_t cols, comm_dtype dtype);

/* The two backward mappings above started without waiting (a column-parallel linear's input
 * gradient, reduced while the weight gradient is computed): the result is ready after
 * tp->comm->wait(request); until then neither buffer may be touched. */
void *gather_from_sequence_parallel_region_backward_start(const tensor_parallel_comm *tp, const void *grad,
                                                          void *out, size_t rows, size_t cols, comm_dtype dtype,
                                                          comm_request *request);
void *copy_to_tensor_parallel_region_backward_start(const tensor_parallel_comm *tp, void *grad, size_t rows,
                                                    size_t cols, comm_dtype dtype, comm_request *request);

/* x [rows, cols] partial sums -> out [rows/tp, cols], this rank's row block of the sum */
void *reduce_scatter_to_sequence_parallel_region(const tensor_parallel_comm *tp, const void *x, void *out,
                                                 size_t rows, size_t cols, comm_dtype dtype);
/* grad [rows/tp, cols] -> out [rows, cols], every rank's row block */
void *reduce_scatter_to_sequence_parallel_region_backward(const tensor_parallel_comm *tp, const void *grad,
                                                          void *out, size_t rows, size_t cols, comm_dtype dtype);

/* The vocab-parallel cross-entropy's statistics over the vocabulary shards, in place: the
 * element-wise max (row maxima) or sum (sums of exponentials, target logits) of fp32 x[count]
 * over ranks. No gradient flows through them (Megatron's _VocabParallelCrossEntropy). */
void vocab_parallel_statistics_allreduce(const tensor_parallel_comm *tp, float *x, size_t count, comm_op op);

#endif
