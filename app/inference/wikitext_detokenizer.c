/* wikitext_detokenizer.c: see wikitext_detokenizer.h. Python's str.replace is replace_all here
 * (every non-overlapping occurrence, left to right); re.sub is pcre2_substitute with
 * PCRE2_SUBSTITUTE_GLOBAL, "\1" written "$1". */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "app/inference/wikitext_detokenizer.h"
#include "app/core/error.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

detokenizer_kind detokenizer_for_path(const char *path) {
    if (strstr(path, "ptb")) return DETOKENIZER_PTB;
    if (strstr(path, "wiki")) return DETOKENIZER_WIKITEXT;
    if (strstr(path, "lambada")) return DETOKENIZER_LAMBADA;
    return DETOKENIZER_NONE;
}

const char *detokenizer_name(detokenizer_kind kind) {
    switch (kind) {
    case DETOKENIZER_PTB: return "ptb";
    case DETOKENIZER_WIKITEXT: return "wiki";
    case DETOKENIZER_LAMBADA: return "lambada";
    default: return "none";
    }
}

/* every occurrence of from in *s replaced by to (*s is replaced) */
static void replace_all(char **s, const char *from, const char *to) {
    size_t lf = strlen(from), lt = strlen(to), count = 0;
    for (const char *p = strstr(*s, from); p; p = strstr(p + lf, from)) count++;
    if (!count) return;
    size_t n = strlen(*s);
    char *out = malloc(n + count * (lt > lf ? lt - lf : 0) + 1), *o = out;
    CHECK(out, "out of host memory detokenizing");
    const char *p = *s, *q;
    while ((q = strstr(p, from))) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, lt);
        o += lt;
        p = q + lf;
    }
    strcpy(o, p);
    free(*s);
    *s = out;
}

/* re.sub(pattern, replacement, *s); -1 with a message when the text is not UTF-8 */
static int regex_replace(char **s, const char *pattern, const char *replacement, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE offset;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &offset, NULL);
    CHECK(re, "detokenizer pattern %s does not compile (PCRE2 error %d)", pattern, code);
    size_t n = strlen(*s), size = n + n / 4 + 64;
    char *out = NULL;
    int rc;
    for (;;) {
        out = realloc(out, size);
        CHECK(out, "out of host memory detokenizing");
        PCRE2_SIZE length = size;
        rc = pcre2_substitute(re, (PCRE2_SPTR)*s, n, 0, PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                              NULL, NULL, (PCRE2_SPTR)replacement, PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)out, &length);
        if (rc == PCRE2_ERROR_NOMEMORY) { size = length + 1; continue; }
        break;
    }
    pcre2_code_free(re);
    if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        free(out);
        return error_format(err, errlen, "%s", (const char *)message);
    }
    free(*s);
    *s = out;
    return 0;
}

char *detokenize_text(detokenizer_kind kind, const char *text, char *err, size_t errlen) {
    char *s = strdup(text);
    CHECK(s, "out of host memory detokenizing");
    if (kind == DETOKENIZER_PTB) {
        static const char *pairs[][2] = {{" '", "'"}, {" \n", "\n"}, {"\n ", "\n"}, {" n't", "n't"},
                                         {" N ", "1 "}, {"$ 1", "$1"}, {"# 1", "#1"}};
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(&s, pairs[i][0], pairs[i][1]);
    } else if (kind == DETOKENIZER_WIKITEXT) {
        static const char *before[][2] = {{"s '", "s'"}};
        static const char *middle[][2] = {{" @-@ ", "-"}, {" @,@ ", ","}, {" @.@ ", "."}, {" : ", ": "}, {" ; ", "; "},
                                          {" . ", ". "}, {" ! ", "! "}, {" ? ", "? "}, {" , ", ", "}};
        static const char *regexes[][2] = {{"\\(\\s*([^\\)]*?)\\s*\\)", "($1)"}, {"\\[\\s*([^\\]]*?)\\s*\\]", "[$1]"},
                                           {"{\\s*([^}]*?)\\s*}", "{$1}"}, {"\\\"\\s*([^\\\"]*?)\\s*\\\"", "\"$1\""},
                                           {"'\\s*([^']*?)\\s*'", "'$1'"}};
        static const char *after[][2] = {{"= = = =", "===="}, {"= = =", "==="}, {"= =", "=="},
                                         {" \xC2\xB0 ", "\xC2\xB0"}, {" \n", "\n"}, {"\n ", "\n"}, {" N ", " 1 "}, {" 's", "'s"}};
        replace_all(&s, before[0][0], before[0][1]);
        if (regex_replace(&s, "/' [0-9]/", "/'[0-9]/", err, errlen) != 0) { free(s); return NULL; }
        for (size_t i = 0; i < sizeof middle / sizeof middle[0]; i++) replace_all(&s, middle[i][0], middle[i][1]);
        for (size_t i = 0; i < sizeof regexes / sizeof regexes[0]; i++)
            if (regex_replace(&s, regexes[i][0], regexes[i][1], err, errlen) != 0) { free(s); return NULL; }
        for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) replace_all(&s, after[i][0], after[i][1]);
    }
    return s;
}
