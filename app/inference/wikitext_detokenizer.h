/* wikitext_detokenizer.h: Megatron's zero-shot detokenizers (tasks/zeroshot_gpt/detokenizer.py):
 * WikiText's " @-@ " number separators, spaced punctuation, brackets and quotes, heading marks;
 * the PTB one; LAMBADA's identity. The literal replacements and regular expressions are
 * Megatron's, in its order (regular expressions through PCRE2 in UTF mode). */
#ifndef WIKITEXT_DETOKENIZER_H
#define WIKITEXT_DETOKENIZER_H

#include <stddef.h>

typedef enum { DETOKENIZER_NONE, DETOKENIZER_PTB, DETOKENIZER_WIKITEXT, DETOKENIZER_LAMBADA } detokenizer_kind;

/* Megatron's choice by file name: the first of "ptb", "wiki", "lambada" the path contains;
 * DETOKENIZER_NONE when none (the text is used as it is) */
detokenizer_kind detokenizer_for_path(const char *path);
const char *detokenizer_name(detokenizer_kind kind);

/* the detokenized text (malloc'd), or NULL with a message in err (text not UTF-8) */
char *detokenize_text(detokenizer_kind kind, const char *text, char *err, size_t errlen);

#endif
