# app/local.mk: the application library (everything but main) and pretrain_gpt.
noinst_LIBRARIES += app/libapp.a
app_libapp_a_SOURCES = \
	app/error.c app/error.h \
	app/args.c app/args.h \
	app/comm.h app/comm_mpi.c \
	app/gpt_model.c app/gpt_model.h \
	app/optimizer.c app/optimizer.h \
	app/lr_schedule.c app/lr_schedule.h \
	app/mock_data.c app/mock_data.h \
	app/train_log.c app/train_log.h \
	app/training.c app/training.h \
	app/topology.c app/topology.h \
	app/data_parallel.c app/data_parallel.h \
	app/pipeline_schedule.c app/pipeline_schedule.h \
	app/param_dump.c app/param_dump.h \
	app/checkpointing.c app/checkpointing.h \
	app/exit_signal.c app/exit_signal.h

APP_LIBS = app/libapp.a app/libdata.a io/libio.a app/libapp.a app/libtokenizer.a kernels/libkernels.a \
	$(HDF5_LIBS) $(JANSSON_LIBS) $(PCRE2_LIBS) $(UTF8PROC_LIBS) $(ZLIB_LIBS) $(BLAS_LIBS) $(PAPI_LIBS) $(CUDA_LIBS) -lm

bin_PROGRAMS += app/pretrain_gpt
app_pretrain_gpt_SOURCES = app/pretrain_gpt.c
app_pretrain_gpt_LDADD = $(APP_LIBS)

# the NCCL communication backend (with the CUDA kernel backend)
if HAVE_CUDA
app_libapp_a_SOURCES += app/comm_nccl.c
app_libapp_a_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
endif
