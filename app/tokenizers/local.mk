# app/tokenizers/local.mk: GPT-2 BPE, BERT WordPiece, Null, Hugging Face tokenizer.json and
# SentencePiece tokenizers (Megatron's --tokenizer-type names); the SentencePiece shim is C++.
noinst_LIBRARIES += app/tokenizers/libtokenizers.a
app_tokenizers_libtokenizers_a_SOURCES = \
	app/tokenizers/tokenizer.c app/tokenizers/tokenizer.h app/tokenizers/tokenizer_internal.h \
	app/tokenizers/tokenizer_gpt2.c app/tokenizers/tokenizer_wordpiece.c \
	app/tokenizers/tokenizer_hf.c app/tokenizers/sentencepiece_shim.h app/tokenizers/sentencepiece_shim.cc
app_tokenizers_libtokenizers_a_CPPFLAGS = $(AM_CPPFLAGS) $(PCRE2_CFLAGS) $(UTF8PROC_CFLAGS) $(JANSSON_CFLAGS) \
	$(SENTENCEPIECE_CFLAGS)
app_tokenizers_libtokenizers_a_CXXFLAGS = -std=c++17 -Wall -Wextra -O2
