/* layer_pattern.c: see layer_pattern.h. */
#include "app/model/layer_pattern.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a tiny evaluator of Python list expressions over 0/1: sum := term ('+' term)*;
 * term := atom ('*' integer)*; atom := '[' int (',' int)* ']' | '(' sum ')' */
typedef struct pattern_parser {
    const char *flag, *text, *at;
    unsigned char *out;    /* max_layers entries */
    int length, max_layers;
    char *err;
    size_t errlen;
} pattern_parser;

static void skip_space(pattern_parser *p) { while (isspace((unsigned char)*p->at)) p->at++; }

static int pattern_error(pattern_parser *p, const char *what) {
    snprintf(p->err, p->errlen, "--%s \"%s\": %s at offset %d", p->flag, p->text, what, (int)(p->at - p->text));
    return -1;
}

static int parse_sum(pattern_parser *p);

static int parse_atom(pattern_parser *p) {
    skip_space(p);
    if (*p->at == '(') {
        p->at++;
        if (parse_sum(p)) return -1;
        skip_space(p);
        if (*p->at != ')') return pattern_error(p, "expected ')'");
        p->at++;
        return 0;
    }
    if (*p->at != '[') return pattern_error(p, "expected '[' or '('");
    p->at++;
    for (;;) {
        skip_space(p);
        if (*p->at != '0' && *p->at != '1') return pattern_error(p, "expected 0 or 1");
        if (p->length >= p->max_layers) return pattern_error(p, "pattern too long");
        p->out[p->length++] = (unsigned char)(*p->at++ - '0');
        skip_space(p);
        if (*p->at == ',') { p->at++; continue; }
        if (*p->at == ']') { p->at++; return 0; }
        return pattern_error(p, "expected ',' or ']'");
    }
}

static int parse_term(pattern_parser *p) {
    int start = p->length;
    if (parse_atom(p)) return -1;
    for (;;) {
        skip_space(p);
        if (*p->at != '*') return 0;
        p->at++;
        skip_space(p);
        char *end;
        long times = strtol(p->at, &end, 10);
        if (end == p->at || times < 0) return pattern_error(p, "expected a repetition count after '*'");
        p->at = end;
        int piece = p->length - start;
        if (times == 0) { p->length = start; continue; }
        if ((long)start + piece * times > p->max_layers) return pattern_error(p, "pattern too long");
        for (long k = 1; k < times; k++) memcpy(p->out + start + k * piece, p->out + start, (size_t)piece);
        p->length = start + (int)(piece * times);
    }
}

static int parse_sum(pattern_parser *p) {
    if (parse_term(p)) return -1;
    for (;;) {
        skip_space(p);
        if (*p->at != '+') return 0;
        p->at++;
        if (parse_term(p)) return -1;
    }
}

int layer_pattern_parse(const char *flag, const char *text, int num_layers, unsigned char *out, int max_layers,
                        char *err, size_t errlen) {
    pattern_parser p = {flag, text, text, out, 0, max_layers, err, errlen};
    if (parse_sum(&p)) return -1;
    skip_space(&p);
    if (*p.at) return pattern_error(&p, "unexpected text");
    if (p.length != num_layers) {
        snprintf(err, errlen, "--%s \"%s\" gives %d layers, but --num-layers is %d", flag, text, p.length, num_layers);
        return -1;
    }
    return 0;
}
