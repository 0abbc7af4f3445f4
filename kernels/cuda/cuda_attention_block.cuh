/* cuda_attention_block.cuh: the CUDA backend's ring-attention operations of context parallelism
 * (cuda_attention_block.cu; kernels.h, "ring attention over blocks"): fills the seven entries of a
 * kernel table (attention_kv_pack, attention_kv_unpack, attention_block_forward,
 * attention_merge, attention_block_backward, columns_to_blocks, blocks_to_columns) with their
 * instantiations for the compute dtype E (__nv_bfloat16 or __half). Device code only. */
#ifndef CUDA_ATTENTION_BLOCK_CUH
#define CUDA_ATTENTION_BLOCK_CUH

#include "kernels/kernels.h"

template <typename E>
void cuda_attention_block_fill_ops(kernel_ops *ops);

#endif /* CUDA_ATTENTION_BLOCK_CUH */
