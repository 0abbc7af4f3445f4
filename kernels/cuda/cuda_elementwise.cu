/* cuda_elementwise.cu: (being written) */
