# tests/local.mk: make check. Every test speaks TAP; tests/run.sh prints "N passed, N failed".
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/autotools/aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/exit77.sh
AM_TESTS_ENVIRONMENT = top_srcdir='$(top_srcdir)' top_builddir='$(top_builddir)' \
	MPIEXEC='$(MPIEXEC)' OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 ; export top_srcdir top_builddir MPIEXEC OPENBLAS_NUM_THREADS OMP_NUM_THREADS ;
EXTRA_DIST += tests/tap.h tests/run.sh tests/lib.sh tests/exit77.sh

check_PROGRAMS += tests/kernels_grad_test
tests_kernels_grad_test_SOURCES = tests/kernels_grad_test.c tests/tap.h
tests_kernels_grad_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/kernels_grad_test

TESTS += tests/args_test.sh tests/train_test.sh
EXTRA_DIST += tests/args_test.sh tests/train_test.sh

check_PROGRAMS += tests/gpt_model_test
tests_gpt_model_test_SOURCES = tests/gpt_model_test.c tests/tap.h
tests_gpt_model_test_LDADD = $(APP_LIBS)
TESTS += tests/gpt_model_test

check_PROGRAMS += tests/lr_schedule_test
tests_lr_schedule_test_SOURCES = tests/lr_schedule_test.c tests/tap.h
tests_lr_schedule_test_LDADD = $(APP_LIBS)
TESTS += tests/lr_schedule_test

check_PROGRAMS += tests/compare_params
tests_compare_params_SOURCES = tests/compare_params.c
tests_compare_params_LDADD = -lm
TESTS += tests/parallel_test.sh
EXTRA_DIST += tests/parallel_test.sh
TESTS += tests/train_data_test.sh
EXTRA_DIST += tests/train_data_test.sh

# GPU kernel tests against the CPU reference (exit 77, skipped, where there is no GPU)
if HAVE_CUDA
check_PROGRAMS += tests/cuda_kernels_test tests/cuda_attention_test
tests_cuda_kernels_test_SOURCES = tests/cuda_kernels_test.c tests/cuda_test_util.h tests/tap.h
tests_cuda_kernels_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_cuda_kernels_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
tests_cuda_attention_test_SOURCES = tests/cuda_attention_test.c tests/cuda_test_util.h tests/tap.h
tests_cuda_attention_test_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_cuda_attention_test_LDADD = kernels/libkernels.a $(BLAS_LIBS) $(CUDA_LIBS) -lm
TESTS += tests/cuda_kernels_test tests/cuda_attention_test
endif
# GPT training on GPUs against the CPU backend, determinism, parallel layouts (skips without a GPU)
TESTS += tests/gpu_train_test.sh
EXTRA_DIST += tests/gpu_train_test.sh
# checkpoints from GPU training: bitwise resume, GPU <-> CPU, resharding over GPUs (skips without a GPU)
TESTS += tests/gpu_checkpoint_test.sh
EXTRA_DIST += tests/gpu_checkpoint_test.sh

# distributed checkpoints: save/load, resharding, bitwise resume, crash safety
check_PROGRAMS += tests/checkpoint_vs_dump tests/h5_set_attribute
tests_h5_set_attribute_SOURCES = tests/h5_set_attribute.c
tests_h5_set_attribute_LDADD = $(HDF5_LIBS)
tests_checkpoint_vs_dump_SOURCES = tests/checkpoint_vs_dump.c
tests_checkpoint_vs_dump_LDADD = $(HDF5_LIBS)
TESTS += tests/checkpoint_test.sh
EXTRA_DIST += tests/checkpoint_test.sh

# forward-pass logits for comparisons with other implementations (perf/hf_logits_check.py)
check_PROGRAMS += tests/model_logits
tests_model_logits_SOURCES = tests/model_logits.c
tests_model_logits_LDADD = $(APP_LIBS)
EXTRA_DIST += perf/checkpoint_bench.sh perf/hf_logits_check.py \
	perf/results/checkpoint-bandwidth-2026-11-22.md perf/results/cuda-kernels-2026-11-22.md \
	perf/results/logs/cuda_kernels_test-2026-11-22.txt perf/results/logs/cuda_attention_test-2026-11-22.txt \
	perf/results/attention-2026-11-22.md perf/results/logs/attention_bench-2026-11-22.txt \
	perf/results/logs/attention_bench_variants-2026-11-22.txt \
	perf/results/logs/cuda_attention_test-flash2-2026-11-22.txt
