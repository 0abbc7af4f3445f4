/* py_json.c: Python's json.dumps(indent=4) text and repr(float), and MD5 (see py_json.h). */
#include "app/data/py_json.h"
#include "app/core/error.h"

#include <inttypes.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void py_json_init(py_json *j) { memset(j, 0, sizeof *j); }

void py_json_free(py_json *j) {
    free(j->text);
    memset(j, 0, sizeof *j);
}

static void put(py_json *j, const char *s, size_t n) {
    if (j->length + n + 1 > j->capacity) {
        size_t capacity = j->capacity ? j->capacity : 1024;
        while (j->length + n + 1 > capacity) capacity *= 2;
        j->text = realloc(j->text, capacity);
        CHECK(j->text, "out of memory");
        j->capacity = capacity;
    }
    memcpy(j->text + j->length, s, n);
    j->length += n;
    j->text[j->length] = '\0';
}

static void puts_(py_json *j, const char *s) { put(j, s, strlen(s)); }

static void newline(py_json *j, int level) {
    puts_(j, "\n");
    for (int i = 0; i < level; i++) puts_(j, "    ");
}

static void string_literal(py_json *j, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    puts_(j, "\"");
    while (*p) {
        char escape[16];
        uint32_t c = *p++;
        /* decode UTF-8 (ensure_ascii escapes every code point outside ' ' .. '~') */
        int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
        if (more) c &= 0x3fu >> more;
        for (int k = 0; k < more && (*p & 0xc0) == 0x80; k++) c = (c << 6) | (*p++ & 0x3f);
        if (c == '"') puts_(j, "\\\"");
        else if (c == '\\') puts_(j, "\\\\");
        else if (c == '\n') puts_(j, "\\n");
        else if (c == '\r') puts_(j, "\\r");
        else if (c == '\t') puts_(j, "\\t");
        else if (c == '\b') puts_(j, "\\b");
        else if (c == '\f') puts_(j, "\\f");
        else if (c >= ' ' && c <= '~') { escape[0] = (char)c; put(j, escape, 1); }
        else if (c >= 0x10000) {
            c -= 0x10000;
            snprintf(escape, sizeof escape, "\\u%04x\\u%04x", 0xd800 + (c >> 10), 0xdc00 + (c & 0x3ff));
            puts_(j, escape);
        } else {
            snprintf(escape, sizeof escape, "\\u%04x", c);
            puts_(j, escape);
        }
    }
    puts_(j, "\"");
}

/* the separator, indentation and key before a value */
static void before_value(py_json *j) {
    if (j->depth == 0) return;
    int level = j->depth - 1;
    if (j->count[level]++ > 0) puts_(j, ",");
    newline(j, j->depth);
    if (j->kind[level] == '{') {
        CHECK(j->key, "py_json: a value inside an object needs a key");
        string_literal(j, j->key);
        puts_(j, ": ");
    }
    j->key = NULL;
}

void py_json_key(py_json *j, const char *key) { j->key = key; }

static void begin(py_json *j, char kind) {
    before_value(j);
    CHECK(j->depth < PY_JSON_MAX_DEPTH, "py_json: nested too deep");
    put(j, &kind, 1);
    j->kind[j->depth] = kind;
    j->count[j->depth] = 0;
    j->depth++;
}

static void end(py_json *j, char kind) {
    CHECK(j->depth > 0 && j->kind[j->depth - 1] == kind, "py_json: unbalanced %c", kind);
    j->depth--;
    if (j->count[j->depth] > 0) newline(j, j->depth);
    char close = kind == '{' ? '}' : ']';
    put(j, &close, 1);
}

void py_json_begin_object(py_json *j) { begin(j, '{'); }
void py_json_end_object(py_json *j) { end(j, '{'); }
void py_json_begin_array(py_json *j) { begin(j, '['); }
void py_json_end_array(py_json *j) { end(j, '['); }

void py_json_string(py_json *j, const char *value) {
    before_value(j);
    if (value) string_literal(j, value);
    else puts_(j, "null");
}

void py_json_int(py_json *j, int64_t value) {
    char s[32];
    snprintf(s, sizeof s, "%" PRId64, value);
    before_value(j);
    puts_(j, s);
}

void py_json_null(py_json *j) {
    before_value(j);
    puts_(j, "null");
}

void py_json_bool(py_json *j, int value) {
    before_value(j);
    puts_(j, value ? "true" : "false");
}

void py_float_repr(double value, char *out, size_t cap) {
    if (isnan(value)) { snprintf(out, cap, "NaN"); return; }
    if (isinf(value)) { snprintf(out, cap, value > 0 ? "Infinity" : "-Infinity"); return; }
    if (value == 0) { snprintf(out, cap, signbit(value) ? "-0.0" : "0.0"); return; }
    /* the shortest %.Ne that reads back exactly: digits d1..dn and the decimal exponent */
    char e[40];
    for (int precision = 0; precision < 17; precision++) {
        snprintf(e, sizeof e, "%.*e", precision, value);
        if (strtod(e, NULL) == value) break;
    }
    char digits[24];
    int n = 0, negative = e[0] == '-';
    const char *p = e + negative;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0') n--;
    digits[n] = '\0';
    int exponent = atoi(p + 1);
    char body[64];
    if (exponent >= -4 && exponent < 16) {
        int at = 0;
        if (exponent < 0) {
            at += snprintf(body + at, sizeof body - (size_t)at, "0.");
            for (int k = 0; k < -exponent - 1; k++) body[at++] = '0';
            at += snprintf(body + at, sizeof body - (size_t)at, "%s", digits);
        } else {
            for (int k = 0; k <= exponent; k++) body[at++] = k < n ? digits[k] : '0';
            body[at++] = '.';
            if (n > exponent + 1) at += snprintf(body + at, sizeof body - (size_t)at, "%s", digits + exponent + 1);
            else body[at++] = '0';
            body[at] = '\0';
        }
    } else {
        snprintf(body, sizeof body, "%c%s%s%se%c%02d", digits[0], n > 1 ? "." : "", digits + 1, "",
                 exponent < 0 ? '-' : '+', abs(exponent));
    }
    snprintf(out, cap, "%s%s", negative ? "-" : "", body);
}

void py_json_float(py_json *j, double value) {
    char s[64];
    py_float_repr(value, s, sizeof s);
    before_value(j);
    puts_(j, s);
}

void md5_hex(const char *text, size_t length, char out[33]) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    CHECK(EVP_Digest(text, length, digest, &size, EVP_md5(), NULL) == 1 && size == 16,
          "MD5 (OpenSSL EVP_Digest) failed");
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}
