# app/tokenizer.mk: the tokenizers (GPT-2 BPE, BERT WordPiece, Null) as app/libtokenizer.a, their
# TAP test, and the shipped GPT-2 vocabulary. Included from the top Makefile.am.
noinst_LIBRARIES += app/libtokenizer.a
app_libtokenizer_a_SOURCES = app/tokenizer.h app/tokenizer.c app/tokenizer_internal.h \
	app/tokenizer_gpt2.c app/tokenizer_wordpiece.c app/hashmap.h app/hashmap.c
app_libtokenizer_a_CPPFLAGS = $(AM_CPPFLAGS) $(PCRE2_CFLAGS) $(UTF8PROC_CFLAGS) $(JANSSON_CFLAGS)

check_PROGRAMS += tests/tokenizer_test
tests_tokenizer_test_SOURCES = tests/tokenizer_test.c tests/tap.h
tests_tokenizer_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests $(JANSSON_CFLAGS)
tests_tokenizer_test_LDADD = app/libtokenizer.a $(PCRE2_LIBS) $(UTF8PROC_LIBS) $(JANSSON_LIBS)
TESTS += tests/tokenizer_test

EXTRA_DIST += configs/tokenizers/gpt2/vocab.json configs/tokenizers/gpt2/merges.txt \
	configs/tokenizers/gpt2/LICENSE tests/data/gpt2_encode_vectors.jsonl \
	tests/data/wordpiece-vocab.txt
