/* jsonl_reader.h: streaming line reader for JSONL input (plain or gzip-compressed), restricted
 * to a byte range so ranks can share one plain file, plus extraction of one string field from
 * a JSON line. Memory is bounded by the longest line, never by the file. */
#ifndef JSONL_READER_H
#define JSONL_READER_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the file starts with the gzip magic (1f 8b), 0 otherwise (or unreadable) */
int jsonl_file_is_gzip(const char *path);

typedef struct line_reader line_reader;

/* Plain file: yields the lines whose first byte lies in [begin, end) (end < 0: to the end of
 * the file); a line that starts in the range is read to its end even past `end`, so ranges
 * aligned any way cover every line exactly once. Gzip file: begin must be 0, end < 0.
 * Returns NULL with "PATH: why" in err. */
line_reader *line_reader_open(const char *path, int is_gzip, int64_t begin, int64_t end,
                              char *err, size_t errlen);

/* 1: *line (not NUL-terminated, no trailing '\n' or '\r') of *len bytes, valid until the next
 * call; 0: no more lines; -1: read error (message in line_reader_error). */
int line_reader_next(line_reader *r, const char **line, size_t *len);
const char *line_reader_error(const line_reader *r);
int64_t line_reader_bytes(const line_reader *r);   /* input bytes consumed (uncompressed) */
void line_reader_close(line_reader *r);

/* What jsonl_extract_string found. */
enum jsonl_status {
    JSONL_OK = 0,
    JSONL_MALFORMED = 1,   /* not a JSON object */
    JSONL_MISSING_KEY = 2, /* object without the key */
    JSONL_NOT_STRING = 3   /* key present, value not a string */
};

/* Parses one JSON line (jansson) and returns the UTF-8 bytes of its string field `key` as a
 * malloc'd buffer in *text (*text_len bytes; may hold NULs). Raw bytes that are not valid UTF-8
 * are passed through unchanged (so a byte-level tokenizer sees them). On failure, a short
 * reason goes into why. */
enum jsonl_status jsonl_extract_string(const char *line, size_t len, const char *key,
                                       char **text, size_t *text_len, char *why, size_t whylen);

#endif
