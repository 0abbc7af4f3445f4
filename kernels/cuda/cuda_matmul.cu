/* cuda_matmul.cu: (being written) */
