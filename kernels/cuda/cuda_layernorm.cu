/* cuda_layernorm.cu: (being written) */
