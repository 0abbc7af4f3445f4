/* cuda_cross_entropy.cu: (being written) */
