/* npy_file.c: numpy .npy integer arrays, written as numpy.save writes them (see npy_file.h). */
#include "app/data/npy_file.h"
#include "app/core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
enum { ARRAY_ALIGN = 64, GROWTH_AXIS_MAX_DIGITS = 21 };

static const struct { const char *name; int size; int64_t lo, hi; } dtypes[] = {
    [NPY_INT16] = {"<i2", 2, INT16_MIN, INT16_MAX},
    [NPY_INT32] = {"<i4", 4, INT32_MIN, INT32_MAX},
    [NPY_UINT32] = {"<u4", 4, 0, UINT32_MAX},
    [NPY_INT64] = {"<i8", 8, INT64_MIN, INT64_MAX},
};

const char *npy_dtype_name(npy_dtype dtype) { return dtypes[dtype].name; }

/* the header numpy writes: magic, version 1.0, u16 length, then
 * "{'descr': '<i4', 'fortran_order': False, 'shape': (N,), }" + growth spaces, padded with
 * spaces and a newline to a multiple of 64 bytes */
static size_t make_header(char *out, size_t cap, npy_dtype dtype, int64_t rows, int columns) {
    char shape[64], dict[256];
    if (columns > 0) snprintf(shape, sizeof shape, "(%" PRId64 ", %d)", rows, columns);
    else snprintf(shape, sizeof shape, "(%" PRId64 ",)", rows);
    char first[32];
    int first_len = snprintf(first, sizeof first, "%" PRId64, rows);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }%*s",
                     dtypes[dtype].name, shape, GROWTH_AXIS_MAX_DIGITS - first_len, "");
    size_t hlen = (size_t)n + 1, pad = ARRAY_ALIGN - ((6 + 2 + 2 + hlen) % ARRAY_ALIGN);
    size_t total = 10 + hlen + pad;
    CHECK(total <= cap, "npy header too long");
    memcpy(out, magic, 6);
    out[6] = 1;
    out[7] = 0;
    uint16_t length = (uint16_t)(hlen + pad);
    out[8] = (char)(length & 0xff);
    out[9] = (char)(length >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', pad);
    out[total - 1] = '\n';
    return total;
}

int npy_write(const char *path, npy_dtype dtype, const int64_t *values, int64_t rows, int columns,
              char *err, size_t errlen) {
    int64_t count = rows * (columns > 0 ? columns : 1);
    for (int64_t i = 0; i < count; i++)
        if (values[i] < dtypes[dtype].lo || values[i] > dtypes[dtype].hi)
            return error_format(err, errlen, "%s: value %" PRId64 " at %" PRId64 " does not fit %s",
                                path, values[i], i, dtypes[dtype].name);
    char header[512], tmp[4400];
    size_t header_len = make_header(header, sizeof header, dtype, rows, columns);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return error_format(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    int ok = fwrite(header, 1, header_len, f) == header_len;
    unsigned char buffer[1 << 16];
    size_t size = (size_t)dtypes[dtype].size, per_chunk = sizeof buffer / 8;
    for (int64_t at = 0; ok && at < count; at += (int64_t)per_chunk) {
        size_t n = count - at < (int64_t)per_chunk ? (size_t)(count - at) : per_chunk;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)values[at + (int64_t)i];
            for (size_t b = 0; b < size; b++) buffer[i * size + b] = (unsigned char)(v >> (8 * b));
        }
        ok = fwrite(buffer, size, n, f) == n;
    }
    int saved = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved = errno; }
    if (!ok || rename(tmp, path) != 0) {
        if (ok) saved = errno;
        remove(tmp);
        return error_format(err, errlen, "cannot write %s: %s", path, strerror(saved ? saved : EIO));
    }
    return 0;
}

/* little-endian bytes of `dtype` to int64 (one typed loop per dtype: the compiler vectorizes it) */
static void decode(const unsigned char *raw, npy_dtype dtype, int64_t count, int64_t *out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (dtype) {
    case NPY_INT16: for (int64_t i = 0; i < count; i++) { int16_t v; memcpy(&v, raw + 2 * i, 2); out[i] = v; } return;
    case NPY_INT32: for (int64_t i = 0; i < count; i++) { int32_t v; memcpy(&v, raw + 4 * i, 4); out[i] = v; } return;
    case NPY_UINT32: for (int64_t i = 0; i < count; i++) { uint32_t v; memcpy(&v, raw + 4 * i, 4); out[i] = v; } return;
    default: memcpy(out, raw, sizeof(int64_t) * (size_t)count); return;
    }
#else
    size_t size = (size_t)dtypes[dtype].size;
    for (int64_t i = 0; i < count; i++) {
        uint64_t v = 0;
        for (size_t b = 0; b < size; b++) v |= (uint64_t)raw[(size_t)i * size + b] << (8 * b);
        out[i] = dtype == NPY_INT16 ? (int16_t)v : dtype == NPY_INT32 ? (int32_t)v
               : dtype == NPY_UINT32 ? (int64_t)(uint32_t)v : (int64_t)v;
    }
#endif
}

/* the value of 'key' in numpy's header dict: the text after "'key': " */
static const char *header_value(const char *header, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "'%s':", key);
    const char *at = strstr(header, pattern);
    if (!at) return NULL;
    at += strlen(pattern);
    while (*at == ' ') at++;
    return at;
}

int npy_read(const char *path, int64_t **values, int64_t *rows, int *columns, npy_dtype *dtype,
             char *err, size_t errlen) {
    *values = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return error_format(err, errlen, "cannot open %s: %s", path, strerror(errno));
    unsigned char prefix[12];
    char *header = NULL;
    int status = -1;
    if (fread(prefix, 1, 10, f) != 10 || memcmp(prefix, magic, 6) != 0) {
        error_format(err, errlen, "%s is not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    size_t hlen;
    if (prefix[6] == 1) {
        hlen = prefix[8] | (size_t)prefix[9] << 8;
    } else if (prefix[6] == 2 || prefix[6] == 3) {
        if (fread(prefix + 10, 1, 2, f) != 2) { error_format(err, errlen, "%s: truncated header", path); goto done; }
        hlen = prefix[8] | (size_t)prefix[9] << 8 | (size_t)prefix[10] << 16 | (size_t)prefix[11] << 24;
    } else {
        error_format(err, errlen, "%s: .npy version %d.%d is not supported", path, prefix[6], prefix[7]);
        goto done;
    }
    if (hlen > (1u << 20)) { error_format(err, errlen, "%s: header of %zu bytes", path, hlen); goto done; }
    header = malloc(hlen + 1);
    CHECK(header, "out of memory");
    if (fread(header, 1, hlen, f) != hlen) { error_format(err, errlen, "%s: truncated header", path); goto done; }
    header[hlen] = '\0';
    const char *descr = header_value(header, "descr"), *order = header_value(header, "fortran_order");
    const char *shape = header_value(header, "shape");
    int found = -1;
    for (int d = 0; descr && d < (int)(sizeof dtypes / sizeof dtypes[0]); d++)
        if (descr[0] == '\'' && !strncmp(descr + 1, dtypes[d].name, 3) && descr[4] == '\'') found = d;
    /* numpy writes '|i1'-style names only for one-byte types; '=' is native (little-endian here) */
    if (found < 0) { error_format(err, errlen, "%s: dtype %.12s is not one of <i2 <i4 <u4 <i8", path, descr ? descr : "(none)"); goto done; }
    if (!order || strncmp(order, "False", 5)) { error_format(err, errlen, "%s: Fortran order is not supported", path); goto done; }
    long long r = -1, c = 0;
    char close = 0;
    if (!shape || (sscanf(shape, "(%lld, %lld%c", &r, &c, &close) != 3 &&
                   sscanf(shape, "(%lld,%c", &r, &close) != 2) || close != ')' || r < 0 || c < 0 || c > 16) {
        error_format(err, errlen, "%s: shape %.40s is not (N,) or (N, K)", path, shape ? shape : "(none)");
        goto done;
    }
    int64_t count = (int64_t)r * (c > 0 ? c : 1);
    size_t size = (size_t)dtypes[found].size;
    unsigned char *raw = malloc((size_t)count * size + 1);
    int64_t *out = malloc(sizeof(int64_t) * (size_t)(count > 0 ? count : 1));
    CHECK(raw && out, "out of memory for %s", path);
    if (fread(raw, size, (size_t)count, f) != (size_t)count) {
        free(raw);
        free(out);
        error_format(err, errlen, "%s: truncated (shorter than its %lld values)", path, (long long)count);
        goto done;
    }
    if (fgetc(f) != EOF) {
        free(raw);
        free(out);
        error_format(err, errlen, "%s: longer than its shape says", path);
        goto done;
    }
    decode(raw, (npy_dtype)found, count, out);
    free(raw);
    *values = out;
    *rows = r;
    *columns = (int)c;
    *dtype = (npy_dtype)found;
    status = 0;
done:
    free(header);
    fclose(f);
    return status;
}
