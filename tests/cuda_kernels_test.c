/* cuda_kernels_test.c: (being written) */
#include "cuda_test_util.h"
#include "tap.h"
int main(void) { skip_without_gpu(); return 0; }
