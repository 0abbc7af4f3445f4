/* cuda_adamw.cu: (being written) */
