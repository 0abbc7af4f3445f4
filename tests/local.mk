# tests/local.mk: make check. Every test speaks TAP; tests/run.sh prints "N passed, N failed".
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/autotools/aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
AM_TESTS_ENVIRONMENT = top_srcdir='$(top_srcdir)' top_builddir='$(top_builddir)' \
	MPIEXEC='$(MPIEXEC)' OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ; export top_srcdir top_builddir MPIEXEC OPENBLAS_NUM_THREADS OMP_NUM_THREADS ;
EXTRA_DIST += tests/tap.h tests/run.sh tests/lib.sh

check_PROGRAMS += tests/kernels_grad_test
tests_kernels_grad_test_SOURCES = tests/kernels_grad_test.c tests/tap.h
tests_kernels_grad_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/kernels_grad_test
