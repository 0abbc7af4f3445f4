# perf/accept/local.mk: the cluster acceptance suite (perf/accept/accept, a Python 3 driver) and
# the benchmarks it runs under MPI: GEMM rate through the kernel interface, collective bus
# bandwidth (nccl-tests' table), parallel-HDF5 bandwidth and STREAM triad. Built with `make`
# (noinst: run from the build tree). Its test is tests/mpi/accept_test.sh.
noinst_PROGRAMS += perf/accept/gemm_bench perf/accept/comm_bench perf/accept/hdf5_bench \
	perf/accept/membw_bench
perf_accept_gemm_bench_SOURCES = perf/accept/gemm_bench.c perf/accept/gemm_fp8.c perf/accept/gemm_fp8.h \
	perf/accept/bench_common.h
perf_accept_gemm_bench_LDADD = $(APP_LIBS)
perf_accept_comm_bench_SOURCES = perf/accept/comm_bench.c perf/accept/bench_common.h
perf_accept_comm_bench_LDADD = $(APP_LIBS)
if HAVE_CUDA
perf_accept_comm_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
perf_accept_gemm_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
endif
perf_accept_hdf5_bench_SOURCES = perf/accept/hdf5_bench.c perf/accept/bench_common.h
perf_accept_hdf5_bench_LDADD = $(APP_LIBS)
perf_accept_membw_bench_SOURCES = perf/accept/membw_bench.c perf/accept/bench_common.h
perf_accept_membw_bench_LDADD = $(APP_LIBS)
dist_noinst_SCRIPTS += perf/accept/accept
EXTRA_DIST += perf/accept/thresholds.conf
