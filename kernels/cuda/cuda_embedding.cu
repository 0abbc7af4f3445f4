/* cuda_embedding.cu: (being written) */
