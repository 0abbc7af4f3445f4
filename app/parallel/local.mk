# app/parallel/local.mk: process groups (Megatron's parallel_state), the comm interface (MPI
# everywhere; NCCL with the CUDA backend) and the tensor-parallel region mappings over it.
noinst_LIBRARIES += app/parallel/libparallel.a
app_parallel_libparallel_a_SOURCES = \
	app/parallel/comm.h app/parallel/comm_mpi.c \
	app/parallel/gpu_placement.c app/parallel/gpu_placement.h \
	app/parallel/timeout.c app/parallel/timeout.h \
	app/parallel/tensor_parallel.c app/parallel/tensor_parallel.h \
	app/parallel/tp_overlap.c app/parallel/tp_overlap.h \
	app/parallel/topology.c app/parallel/topology.h
if HAVE_CUDA
app_parallel_libparallel_a_SOURCES += app/parallel/comm_nccl.c app/parallel/nccl_watchdog.c app/parallel/nccl_watchdog.h \
	app/parallel/comm_window_cuda.c app/parallel/comm_window_cuda.h
app_parallel_libparallel_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
endif
EXTRA_DIST += app/parallel/comm_nccl.c app/parallel/nccl_watchdog.c app/parallel/nccl_watchdog.h \
	app/parallel/comm_window_cuda.c app/parallel/comm_window_cuda.h
