# app/local.mk: the programs (entry points at the top of app/) and the one link line they share.
# Libraries are listed once, top down: each may use only those after it.
APP_LIBS = app/training/libtraining.a app/optim/liboptim.a app/model/libmodel.a \
	app/checkpoint/libcheckpoint.a app/data/libdata.a app/parallel/libparallel.a \
	app/tokenizers/libtokenizers.a io/libio.a perf/metrics/libperfmetrics.a app/core/libcore.a kernels/libkernels.a \
	$(HDF5_LIBS) $(JANSSON_LIBS) $(PCRE2_LIBS) $(UTF8PROC_LIBS) $(ZLIB_LIBS) $(XXHASH_LIBS) $(BLAS_LIBS) \
	$(PAPI_LIBS) $(CUDA_LIBS) -lm

bin_PROGRAMS += app/pretrain_gpt app/preprocess_data app/convert_corpus app/convert_checkpoint
app_pretrain_gpt_SOURCES = app/pretrain_gpt.c
app_pretrain_gpt_LDADD = $(APP_LIBS)
app_preprocess_data_SOURCES = app/preprocess_data.c
app_preprocess_data_LDADD = $(APP_LIBS)
app_convert_corpus_SOURCES = app/convert_corpus.c
app_convert_corpus_LDADD = $(APP_LIBS)
app_convert_checkpoint_SOURCES = app/convert_checkpoint.c
app_convert_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
app_convert_checkpoint_LDADD = $(APP_LIBS)
