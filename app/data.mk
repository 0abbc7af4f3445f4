# app/data.mk: the data pipeline: GPT datasets (index building, blending, cache) as
# app/libdata.a, the preprocess_data and convert_corpus tools, and their tests.
# Included from the top Makefile.am after app/tokenizer.mk; io/libio.a comes from io/local.mk.
noinst_LIBRARIES += app/libdata.a
app_libdata_a_SOURCES = \
	app/gpt_dataset.c app/gpt_dataset.h \
	app/blended_dataset.c app/blended_dataset.h \
	app/dataset_index.c app/dataset_index.h

# what a program using gpt_dataset.h links (pretrain_gpt: add $(DATA_LIBS) after app/libapp.a)
DATA_LIBS = app/libdata.a io/libio.a app/libapp.a $(HDF5_LIBS) $(JANSSON_LIBS) $(ZLIB_LIBS) -lm
PREPROCESS_LIBS = io/libio.a app/libtokenizer.a app/libapp.a $(HDF5_LIBS) $(JANSSON_LIBS) \
	$(PCRE2_LIBS) $(UTF8PROC_LIBS) $(ZLIB_LIBS) -lm

bin_PROGRAMS += app/preprocess_data app/convert_corpus
app_preprocess_data_SOURCES = app/preprocess_data.c
app_preprocess_data_LDADD = $(PREPROCESS_LIBS)
app_convert_corpus_SOURCES = app/convert_corpus.c
app_convert_corpus_LDADD = $(PREPROCESS_LIBS)

check_PROGRAMS += tests/corpus_tool tests/dataset_test
tests_corpus_tool_SOURCES = tests/corpus_tool.c
tests_corpus_tool_LDADD = $(PREPROCESS_LIBS)
tests_dataset_test_SOURCES = tests/dataset_test.c tests/tap.h
tests_dataset_test_LDADD = $(DATA_LIBS)

TESTS += tests/preprocess_test.sh tests/dataset_test.sh
EXTRA_DIST += tests/preprocess_test.sh tests/dataset_test.sh configs/data/tinyshakespeare.txt \
	perf/preprocess_bench.sh io/CORPUS_FORMAT.md perf/results/preprocess-2026-11-22.md
