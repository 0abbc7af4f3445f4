/* cuda_attention.cu: (being written) */
