# app/tokenizers/local.mk: GPT-2 BPE, BERT WordPiece and Null tokenizers (Megatron's
# --tokenizer-type names).
noinst_LIBRARIES += app/tokenizers/libtokenizers.a
app_tokenizers_libtokenizers_a_SOURCES = \
	app/tokenizers/tokenizer.c app/tokenizers/tokenizer.h app/tokenizers/tokenizer_internal.h \
	app/tokenizers/tokenizer_gpt2.c app/tokenizers/tokenizer_wordpiece.c
app_tokenizers_libtokenizers_a_CPPFLAGS = $(AM_CPPFLAGS) $(PCRE2_CFLAGS) $(UTF8PROC_CFLAGS) $(JANSSON_CFLAGS)
