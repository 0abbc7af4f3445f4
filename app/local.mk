# app/local.mk: the programs (entry points at the top of app/) and the one link line they share.
# Libraries are listed once, top down: each may use only those after it.
APP_LIBS = app/tasks/libtasks.a app/training/libtraining.a app/inference/libinference.a app/optim/liboptim.a app/model/libmodel.a \
	app/checkpoint/libcheckpoint.a app/data/libdata.a app/parallel/libparallel.a \
	app/tokenizers/libtokenizers.a io/libio.a perf/metrics/libperfmetrics.a app/core/libcore.a kernels/libkernels.a \
	$(HDF5_LIBS) $(JANSSON_LIBS) $(PCRE2_LIBS) $(UTF8PROC_LIBS) $(SENTENCEPIECE_LIBS) $(ZLIB_LIBS) $(XXHASH_LIBS) $(CRYPTO_LIBS) $(BLAS_LIBS) \
	$(PAPI_LIBS) $(CUDA_LIBS) -lm

bin_PROGRAMS += app/pretrain_gpt app/pretrain_bert app/pretrain_t5 app/finetune_bert app/preprocess_data app/convert_corpus app/convert_checkpoint
app_pretrain_gpt_SOURCES = app/pretrain_gpt.c
app_pretrain_gpt_LDADD = $(APP_LIBS)
app_pretrain_bert_SOURCES = app/pretrain_bert.c
app_pretrain_bert_LDADD = $(APP_LIBS)
app_pretrain_t5_SOURCES = app/pretrain_t5.c
app_pretrain_t5_LDADD = $(APP_LIBS)
app_finetune_bert_SOURCES = app/finetune_bert.c
app_finetune_bert_LDADD = $(APP_LIBS)
app_preprocess_data_SOURCES = app/preprocess_data.c
app_preprocess_data_LDADD = $(APP_LIBS)
app_convert_corpus_SOURCES = app/convert_corpus.c
app_convert_corpus_LDADD = $(APP_LIBS)
app_convert_checkpoint_SOURCES = app/convert_checkpoint.c app/convert_hf_source.c app/convert_hf_source.h \
	app/convert_args.c app/convert_args.h app/convert_llama.c app/convert_llama.h app/convert_bert.c app/convert_bert.h \
	app/convert_t5.c app/convert_t5.h
app_convert_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
app_convert_checkpoint_LDADD = $(APP_LIBS)

# text generation (app/inference): the REST server, its command-line client, zero-shot evaluation
bin_PROGRAMS += app/run_text_generation_server app/text_generation_cli app/evaluate
app_run_text_generation_server_SOURCES = app/run_text_generation_server.c
app_run_text_generation_server_CPPFLAGS = $(AM_CPPFLAGS) $(MHD_CFLAGS)
app_run_text_generation_server_LDADD = $(APP_LIBS) $(MHD_LIBS) -lpthread
app_text_generation_cli_SOURCES = app/text_generation_cli.c
app_text_generation_cli_CPPFLAGS = $(AM_CPPFLAGS) $(CURL_CFLAGS) $(JANSSON_CFLAGS)
app_text_generation_cli_LDADD = $(CURL_LIBS) $(JANSSON_LIBS)
app_evaluate_SOURCES = app/evaluate.c
app_evaluate_CPPFLAGS = $(AM_CPPFLAGS) $(JANSSON_CFLAGS)
app_evaluate_LDADD = $(APP_LIBS)
