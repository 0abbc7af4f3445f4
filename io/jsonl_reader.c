/* jsonl_reader.c: byte-range line reading over plain files (pread) and gzip files (zlib), and
 * JSON string-field extraction with a pass-through for invalid UTF-8 (see jsonl_reader.h). */
#include "io/jsonl_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { read_block = 1 << 20 };

struct line_reader {
    char path[4096];
    int fd;
    gzFile gz;
    int64_t file_pos;    /* file offset of buffer[0] (plain files) */
    int64_t end;         /* lines must start before this offset (plain files; < 0: none) */
    char *buffer;
    size_t head, tail, cap;
    int eof;
    int64_t bytes;
    char error[4096 + 512];
};

int jsonl_file_is_gzip(const char *path) {
    unsigned char magic[2];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(magic, 1, 2, f);
    fclose(f);
    return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

/* appends up to cap - tail bytes; returns bytes read, 0 at end, -1 on error */
static long fill(line_reader *r) {
    if (r->gz) {
        int got = gzread(r->gz, r->buffer + r->tail, (unsigned)(r->cap - r->tail));
        /* zlib hands out what it decoded before a fault and reports the fault with the next
         * read: a truncated stream ends with Z_BUF_ERROR ("unexpected end of file", gzeof
         * true), corrupt data with Z_DATA_ERROR */
        int code = Z_OK;
        const char *why = got <= 0 ? gzerror(r->gz, &code) : "";
        if (got < 0 || (got == 0 && code != Z_OK)) {
            size_t path_len = strlen(r->path);  /* zlib's message starts "PATH: " */
            if (!strncmp(why, r->path, path_len) && !strncmp(why + path_len, ": ", 2)) why += path_len + 2;
            snprintf(r->error, sizeof r->error, "%s: %s (%s gzip stream)", r->path, why,
                     code == Z_BUF_ERROR ? "a truncated" : "a corrupt");
            return -1;
        }
        if (got == 0 && !gzeof(r->gz)) {
            snprintf(r->error, sizeof r->error, "%s: gzip stream ends early (truncated?)",
                     r->path);
            return -1;
        }
        return got;
    }
    ssize_t got = pread(r->fd, r->buffer + r->tail, r->cap - r->tail,
                        (off_t)(r->file_pos + (int64_t)r->tail));
    if (got < 0) {
        snprintf(r->error, sizeof r->error, "%s: read failed: %s", r->path, strerror(errno));
        return -1;
    }
    return (long)got;
}

line_reader *line_reader_open(const char *path, int is_gzip, int64_t begin, int64_t end,
                              char *err, size_t errlen) {
    line_reader *r = calloc(1, sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return NULL; }
    snprintf(r->path, sizeof r->path, "%s", path);
    r->fd = -1;
    r->end = end;
    r->cap = read_block;
    r->buffer = malloc(r->cap);
    if (!r->buffer) { snprintf(err, errlen, "out of memory"); free(r); return NULL; }
    if (is_gzip) {
        r->gz = gzopen(path, "rb");
        if (!r->gz) {
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            goto fail;
        }
        gzbuffer(r->gz, 1 << 18);
        r->end = -1;
        return r;
    }
    r->fd = open(path, O_RDONLY);
    if (r->fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    r->file_pos = begin;
    if (begin > 0) {
        /* a line starts at `begin` only when the byte before it ends a line; otherwise skip
         * the partial line, which belongs to the range before */
        r->file_pos = begin - 1;
        for (;;) {
            long got = fill(r);
            if (got < 0) { snprintf(err, errlen, "%s", r->error); goto fail; }
            if (got == 0) { r->eof = 1; r->file_pos += (int64_t)r->tail; r->tail = 0; break; }
            char *newline = memchr(r->buffer, '\n', (size_t)got);
            if (newline) {
                r->head = (size_t)(newline - r->buffer) + 1;
                r->tail = (size_t)got;
                break;
            }
            r->file_pos += got;
        }
    }
    return r;
fail:
    free(r->buffer);
    if (r->fd >= 0) close(r->fd);
    free(r);
    return NULL;
}

int line_reader_next(line_reader *r, const char **line, size_t *len) {
    for (;;) {
        if (r->end >= 0 && r->file_pos + (int64_t)r->head >= r->end) return 0;
        char *start = r->buffer + r->head;
        char *newline = memchr(start, '\n', r->tail - r->head);
        if (newline || (r->eof && r->tail > r->head)) {
            size_t n = newline ? (size_t)(newline - start) : r->tail - r->head;
            r->head += n + (newline ? 1 : 0);
            r->bytes += (int64_t)n + (newline ? 1 : 0);
            if (n > 0 && start[n - 1] == '\r') n--;
            *line = start;
            *len = n;
            return 1;
        }
        if (r->eof) return 0;
        /* no complete line buffered: move the partial line to the front, grow if full, read */
        if (r->head > 0) {
            memmove(r->buffer, r->buffer + r->head, r->tail - r->head);
            r->file_pos += (int64_t)r->head;
            r->tail -= r->head;
            r->head = 0;
        }
        if (r->tail == r->cap) {
            char *bigger = realloc(r->buffer, r->cap * 2);
            if (!bigger) {
                snprintf(r->error, sizeof r->error, "%s: out of memory for a %zu-byte line",
                         r->path, r->cap);
                return -1;
            }
            r->buffer = bigger;
            r->cap *= 2;
        }
        long got = fill(r);
        if (got < 0) return -1;
        if (got == 0) r->eof = 1;
        r->tail += (size_t)got;
    }
}

const char *line_reader_error(const line_reader *r) { return r->error; }
int64_t line_reader_bytes(const line_reader *r) { return r->bytes; }

void line_reader_close(line_reader *r) {
    if (!r) return;
    if (r->gz) gzclose(r->gz);
    if (r->fd >= 0) close(r->fd);
    free(r->buffer);
    free(r);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

/* length of the valid UTF-8 sequence at s (1..4), or 0 when the byte there starts none */
static int utf8_sequence_length(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; min = 0x10000; }
    else return 0;
    if (left < (size_t)n) return 0;
    unsigned cp = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* Invalid bytes are carried through jansson as private-use code points U+10FF00 + byte
 * (F4 8F BC|BD|BE|BF xx) and turned back into the raw byte afterwards. */
static char *escape_invalid_utf8(const char *line, size_t len, size_t *out_len, int *changed) {
    char *out = malloc(4 * len + 1);
    if (!out) return NULL;
    size_t o = 0;
    *changed = 0;
    for (size_t i = 0; i < len;) {
        int n = utf8_sequence_length((const unsigned char *)line + i, len - i);
        if (n > 0) {
            memcpy(out + o, line + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        } else {
            unsigned b = (unsigned char)line[i++];
            out[o++] = (char)0xF4;
            out[o++] = (char)0x8F;
            out[o++] = (char)(0xBC + (b >> 6));
            out[o++] = (char)(0x80 | (b & 0x3F));
            *changed = 1;
        }
    }
    *out_len = o;
    return out;
}

static size_t unescape_invalid_utf8(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char *u = (unsigned char *)s + i;
        if (i + 3 < len && u[0] == 0xF4 && u[1] == 0x8F && u[2] >= 0xBC && u[2] <= 0xBF &&
            (u[3] & 0xC0) == 0x80) {
            s[o++] = (char)(((u[2] - 0xBC) << 6) | (u[3] & 0x3F));
            i += 4;
        } else {
            s[o++] = s[i++];
        }
    }
    return o;
}

enum jsonl_status jsonl_extract_string(const char *line, size_t len, const char *key,
                                       char **text, size_t *text_len, char *why, size_t whylen) {
    json_error_t error;
    *text = NULL;
    *text_len = 0;
    json_t *root = json_loadb(line, len, JSON_ALLOW_NUL, &error);
    int escaped = 0;
    if (!root) {
        size_t escaped_len;
        char *copy = escape_invalid_utf8(line, len, &escaped_len, &escaped);
        if (copy && escaped) root = json_loadb(copy, escaped_len, JSON_ALLOW_NUL, &error);
        free(copy);
        if (!root) {
            snprintf(why, whylen, "malformed JSON: %s (column %d)", error.text, error.column);
            return JSONL_MALFORMED;
        }
    }
    enum jsonl_status status = JSONL_OK;
    json_t *value;
    if (!json_is_object(root)) {
        snprintf(why, whylen, "malformed JSON: not an object");
        status = JSONL_MALFORMED;
    } else if (!(value = json_object_get(root, key))) {
        snprintf(why, whylen, "missing key \"%s\"", key);
        status = JSONL_MISSING_KEY;
    } else if (!json_is_string(value)) {
        snprintf(why, whylen, "key \"%s\" is not a string", key);
        status = JSONL_NOT_STRING;
    } else {
        size_t n = json_string_length(value);
        *text = malloc(n + 1);
        if (!*text) {
            snprintf(why, whylen, "out of memory");
            status = JSONL_MALFORMED;
        } else {
            memcpy(*text, json_string_value(value), n);
            if (escaped) n = unescape_invalid_utf8(*text, n);
            (*text)[n] = 0;
            *text_len = n;
        }
    }
    json_decref(root);
    return status;
}
