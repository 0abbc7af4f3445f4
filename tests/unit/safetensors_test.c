/* safetensors_test.c: io/safetensors against the format. Writes and reads back several dtypes
 * and shapes (scalar and empty tensors included) bitwise, checks the reference implementation's
 * exact bytes for known inputs, the element conversions, and that every kind of malformed file
 * is refused with a message naming the file and the tensor at fault. */
#include "io/safetensors.h"
#include "tests/tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char folder[] = "/tmp/safetensors_test.XXXXXX";
static char err[4096];

static char *path_of(const char *name) {
    static char path[8][512];
    static int next = 0;
    char *p = path[next++ % 8];
    snprintf(p, 512, "%s/%s", folder, name);
    return p;
}

/* a file of the 8-byte length, this header text (no padding) and these data bytes */
static const char *write_raw(const char *name, const char *header, const void *data, size_t bytes) {
    const char *path = path_of(name);
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    unsigned char length[8];
    for (int b = 0; b < 8; b++) length[b] = (unsigned char)(n >> (8 * b));
    fwrite(length, 1, 8, f);
    fwrite(header, 1, n, f);
    if (bytes) fwrite(data, 1, bytes, f);
    fclose(f);
    return path;
}

static unsigned char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc(*size + 1);
    if (fread(bytes, 1, *size, f) != *size) *size = 0;
    fclose(f);
    return bytes;
}

static void cut_to(const char *path, off_t size) {
    if (truncate(path, size) != 0) perror(path);
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* expects a refusal whose message holds the path and every given fragment */
static void expect_refusal(const char *path, const char *what, const char *fragment1,
                           const char *fragment2) {
    safetensors_file file;
    int status = safetensors_open(path, &file, err, sizeof err);
    int ok = status == -1 && strstr(err, path) && (!fragment1 || strstr(err, fragment1)) &&
             (!fragment2 || strstr(err, fragment2));
    tap_ok(ok, "refused: %s", what);
    if (!ok) tap_diag("status %d, message: %s", status, status ? err : "(none)");
    else tap_diag("%s", err);
    if (status == 0) safetensors_close(&file);
}

/* ---- round trip ---------------------------------------------------------------------------- */
typedef struct sample {
    const char *name;
    safetensors_dtype dtype;
    int ndim;
    int64_t shape[4];
    unsigned char data[96];
} sample;

static int64_t bytes_of(const sample *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->shape[d];
    return n * (int64_t)safetensors_dtype_size(s->dtype);
}

static void fill(sample *s, unsigned seed) {
    for (size_t i = 0; i < sizeof s->data; i++) s->data[i] = (unsigned char)(seed * 131 + i * 7 + 3);
}

static int write_samples(const char *path, sample *samples, int count, int reverse) {
    safetensors_writer *w = safetensors_writer_create();
    safetensors_writer_set_metadata(w, reverse ? "zeta" : "format", reverse ? "last" : "pt");
    safetensors_writer_set_metadata(w, reverse ? "format" : "zeta", reverse ? "pt" : "last");
    for (int k = 0; k < count; k++) {
        sample *s = &samples[reverse ? count - 1 - k : k];
        if (safetensors_writer_add(w, s->name, s->dtype, s->ndim, s->shape, s->data, err, sizeof err))
            return -1;
    }
    int status = safetensors_writer_write(w, path, err, sizeof err);
    safetensors_writer_free(w);
    return status;
}

static void test_round_trip(void) {
    sample samples[] = {
        {"model.weight", SAFETENSORS_F32, 2, {2, 3}, {0}},
        {"half", SAFETENSORS_F16, 1, {5}, {0}},
        {"brain", SAFETENSORS_BF16, 2, {2, 2}, {0}},
        {"wide", SAFETENSORS_F64, 1, {3}, {0}},
        {"index", SAFETENSORS_I64, 1, {2}, {0}},
        {"ints", SAFETENSORS_I32, 3, {1, 2, 1}, {0}},
        {"bytes", SAFETENSORS_U8, 1, {5}, {0}},
        {"scalar", SAFETENSORS_F32, 0, {0}, {0}},
        {"empty", SAFETENSORS_F32, 2, {0, 4}, {0}},
        {"h.0.attn.c_attn.weight", SAFETENSORS_F32, 4, {1, 1, 2, 2}, {0}},
    };
    int count = (int)(sizeof samples / sizeof samples[0]);
    for (int k = 0; k < count; k++) fill(&samples[k], (unsigned)k);
    const char *a = path_of("a.safetensors"), *b = path_of("b.safetensors"), *c = path_of("c.safetensors");
    tap_ok(write_samples(a, samples, count, 0) == 0, "write %d tensors of 7 dtypes", count);
    tap_ok(access(path_of("a.safetensors.tmp"), F_OK) != 0, "no .tmp file left behind");

    safetensors_file file;
    int status = safetensors_open(a, &file, err, sizeof err);
    tap_ok(status == 0, "read it back%s%s", status ? ": " : "", status ? err : "");
    if (status) return;
    int all = file.num_tensors == count;
    for (int k = 0; all && k < count; k++) {
        const sample *s = &samples[k];
        const safetensors_tensor *t = safetensors_find(&file, s->name);
        int same = t && t->dtype == s->dtype && t->ndim == s->ndim &&
                   t->end - t->begin == (uint64_t)bytes_of(s) &&
                   memcmp(t->data, s->data, (size_t)bytes_of(s)) == 0;
        for (int d = 0; same && d < s->ndim; d++) same = t->shape[d] == s->shape[d];
        if (!same) tap_diag("tensor %s differs", s->name);
        all = all && same;
    }
    tap_ok(all, "names, dtypes, shapes and bytes identical (scalar and empty tensors included)");
    const char *format = safetensors_metadata(&file, "format"), *zeta = safetensors_metadata(&file, "zeta");
    tap_ok(format && zeta && !strcmp(format, "pt") && !strcmp(zeta, "last") && file.num_metadata == 2,
           "metadata read back");
    int aligned = 1;
    for (int i = 0; i < file.num_tensors; i++) {
        size_t at = (size_t)(file.tensors[i].data - (const unsigned char *)file.map);
        if (at % safetensors_dtype_size(file.tensors[i].dtype)) aligned = 0;
    }
    tap_ok(aligned, "every tensor's data is aligned to its element size in the file");
    /* largest dtype first, as the reference lays files out: F64 and I64 before F32 */
    tap_ok(file.tensors[0].dtype == SAFETENSORS_I64 && file.tensors[1].dtype == SAFETENSORS_F64 &&
           file.tensors[file.num_tensors - 1].dtype == SAFETENSORS_U8,
           "layout: descending dtype order (%s, %s, ..., %s)", file.tensors[0].name,
           file.tensors[1].name, file.tensors[file.num_tensors - 1].name);

    /* read -> write again gives the same bytes; so does adding in reverse order */
    safetensors_writer *w = safetensors_writer_create();
    for (int i = 0; i < file.num_metadata; i++)
        safetensors_writer_set_metadata(w, file.metadata_keys[i], file.metadata_values[i]);
    for (int i = 0; i < file.num_tensors; i++) {
        const safetensors_tensor *t = &file.tensors[i];
        safetensors_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, err, sizeof err);
    }
    tap_ok(safetensors_writer_write(w, b, err, sizeof err) == 0 && same_file(a, b),
           "read -> write reproduces the file bitwise");
    safetensors_writer_free(w);
    safetensors_close(&file);
    tap_ok(write_samples(c, samples, count, 1) == 0 && same_file(a, c),
           "insertion order does not change the bytes");

    w = safetensors_writer_create();
    float one = 1;
    int64_t shape1[1] = {1};
    safetensors_writer_add(w, "x", SAFETENSORS_F32, 1, shape1, &one, err, sizeof err);
    int dup = safetensors_writer_add(w, "x", SAFETENSORS_F32, 1, shape1, &one, err, sizeof err);
    tap_ok(dup == -1 && strstr(err, "'x'"), "a duplicate name is refused (%s)", err);
    int reserved = safetensors_writer_add(w, "__metadata__", SAFETENSORS_F32, 1, shape1, &one, err,
                                          sizeof err);
    tap_ok(reserved == -1, "the name __metadata__ is refused (%s)", err);
    int missing = safetensors_writer_write(w, "/nonexistent-folder/x.safetensors", err, sizeof err);
    tap_ok(missing == -1 && strstr(err, "/nonexistent-folder/x.safetensors.tmp"),
           "an unwritable path is reported (%s)", err);
    safetensors_writer_free(w);
}

/* the reference implementation's serializer output for the same inputs (its unit tests) */
static void test_reference_bytes(void) {
    float values[6] = {0, 1, 2, 3, 4, 5};
    struct { const char *name; int ndim; int64_t shape[4]; const char *header; } cases[] = {
        {"attn.0", 3, {1, 2, 3}, "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}"},
        {"attn0", 4, {1, 1, 2, 3},
         "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       "},
    };
    for (int k = 0; k < 2; k++) {
        safetensors_writer *w = safetensors_writer_create();
        safetensors_writer_add(w, cases[k].name, SAFETENSORS_F32, cases[k].ndim, cases[k].shape,
                               values, err, sizeof err);
        const char *got = path_of("ref.safetensors");
        safetensors_writer_write(w, got, err, sizeof err);
        safetensors_writer_free(w);
        const char *expected = write_raw("ref_expected.safetensors", cases[k].header, values, sizeof values);
        tap_ok(same_file(got, expected), "reference bytes for %s (header %zu bytes)", cases[k].name,
               strlen(cases[k].header));
    }
    safetensors_writer *w = safetensors_writer_create();
    safetensors_writer_set_metadata(w, "framework", "pt");
    const char *got = path_of("ref_empty.safetensors");
    safetensors_writer_write(w, got, err, sizeof err);
    safetensors_writer_free(w);
    const char *expected = write_raw("ref_empty_expected.safetensors",
                                     "{\"__metadata__\":{\"framework\":\"pt\"}}     ", NULL, 0);
    tap_ok(same_file(got, expected), "reference bytes for an empty file with metadata");
    safetensors_file file;
    int status = safetensors_open(got, &file, err, sizeof err);
    tap_ok(status == 0 && file.num_tensors == 0, "a file with no tensors reads");
    if (status == 0) safetensors_close(&file);
}

static void test_conversions(void) {
    tap_ok(safetensors_f16_to_float(0x3c00) == 1.0f && safetensors_f16_to_float(0xc000) == -2.0f &&
           safetensors_f16_to_float(0x7bff) == 65504.0f &&
           safetensors_f16_to_float(0x0001) == 0x1p-24f &&
           safetensors_f16_to_float(0x03ff) == 1023 * 0x1p-24f &&
           isinf(safetensors_f16_to_float(0x7c00)) && isnan(safetensors_f16_to_float(0x7e00)) &&
           signbit(safetensors_f16_to_float(0x8000)),
           "F16 -> float32: normal, largest, subnormal, Inf, NaN, -0");
    tap_ok(safetensors_bf16_to_float(0x3f80) == 1.0f && safetensors_bf16_to_float(0xc040) == -3.0f,
           "BF16 -> float32");
    tap_ok(safetensors_float_to_bf16(1.0f) == 0x3f80 &&
           safetensors_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80 &&          /* tie -> even */
           safetensors_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82 &&      /* tie -> even */
           safetensors_float_to_bf16(1.0f + 0x1p-7f + 0x1p-9f) == 0x3f81 && /* below half */
           isnan(safetensors_bf16_to_float(safetensors_float_to_bf16(NAN))),
           "float32 -> BF16 rounds to nearest even and keeps NaN");

    uint16_t halves[3] = {0x3c00, 0xbc00, 0x3800};
    double doubles[2] = {0.25, -1e300};
    int32_t ints[1] = {7};
    const char *header = "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                         "\"pad\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]},"
                         "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]},"
                         "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[24,28]}}";
    unsigned char data[28] = {0};
    memcpy(data, halves, 6);
    memcpy(data + 8, doubles, 16);
    memcpy(data + 24, ints, 4);
    const char *path = write_raw("mixed.safetensors", header, data, sizeof data);
    safetensors_file file;
    if (safetensors_open(path, &file, err, sizeof err)) {
        tap_ok(0, "mixed-dtype file opens: %s", err);
        return;
    }
    float out[3];
    int ok = safetensors_read_float32(&file, safetensors_find(&file, "h"), out, err, sizeof err) == 0 &&
             out[0] == 1.0f && out[1] == -1.0f && out[2] == 0.5f;
    tap_ok(ok, "an F16 tensor reads as float32 (header not padded: data unaligned)");
    ok = safetensors_read_float32(&file, safetensors_find(&file, "d"), out, err, sizeof err) == 0 &&
         out[0] == 0.25f && isinf(out[1]);
    tap_ok(ok, "an F64 tensor reads as float32");
    int status = safetensors_read_float32(&file, safetensors_find(&file, "i"), out, err, sizeof err);
    tap_ok(status == -1 && strstr(err, "'i'") && strstr(err, "I32"),
           "an I32 tensor is not read as float (%s)", err);
    safetensors_close(&file);
}

static void test_malformed(void) {
    float six[6] = {1, 2, 3, 4, 5, 6};
    const char *path;

    path = path_of("short.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("\x10\0\0", 1, 3, f);
    fclose(f);
    expect_refusal(path, "a file shorter than the length field", "too short", NULL);

    path = write_raw("header_cut.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6],", NULL, 0);
    cut_to(path, 20);
    expect_refusal(path, "a header cut short (length past the end of the file)", "runs past the end", NULL);

    path = path_of("huge.safetensors");
    f = fopen(path, "wb");
    fwrite("\0\0\0\0\1\0\0\0{}", 1, 10, f);
    fclose(f);
    expect_refusal(path, "an absurd header length", "limit", NULL);

    path = write_raw("bad_json.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6]", six, 24);
    expect_refusal(path, "a header that is not valid JSON", "not valid JSON", NULL);

    path = write_raw("not_object.safetensors", "[1, 2]", NULL, 0);
    expect_refusal(path, "a header that is not a JSON object", "'{'", NULL);

    path = write_raw("duplicate.safetensors",
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                     "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", six, 8);
    expect_refusal(path, "a tensor named twice", "duplicate", NULL);

    path = write_raw("dtype.safetensors", "{\"w\":{\"dtype\":\"F99\",\"shape\":[6],\"data_offsets\":[0,24]}}", six, 24);
    expect_refusal(path, "an unknown dtype", "'w'", "F99");

    path = write_raw("no_offsets.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6]}}", six, 24);
    expect_refusal(path, "a tensor without data_offsets", "'w'", "data_offsets");

    path = write_raw("neg_shape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-6],\"data_offsets\":[0,24]}}", six, 24);
    expect_refusal(path, "a negative dimension", "'w'", "shape");

    path = write_raw("bad_offsets.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", six, 24);
    expect_refusal(path, "end before begin", "'w'", "begin <= end");

    path = write_raw("size.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", six, 20);
    expect_refusal(path, "offsets that disagree with dtype x shape", "'w'", "needs 24");

    path = write_raw("range.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", six, 16);
    expect_refusal(path, "offsets past the end of the data (truncated data)", "'w'", "run past the end");

    path = write_raw("overlap.safetensors",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", six, 24);
    expect_refusal(path, "overlapping tensors", "'b'", "overlap tensor 'a'");

    path = write_raw("gap.safetensors",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", six, 24);
    expect_refusal(path, "a gap between tensors", "'b'", "gap");

    path = write_raw("extra.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", six, 24);
    expect_refusal(path, "bytes after the last tensor", "cover 8 bytes of the 24", NULL);

    path = write_raw("metadata.safetensors", "{\"__metadata__\":{\"format\":1}}", NULL, 0);
    expect_refusal(path, "a non-string metadata value", "__metadata__", "format");

    expect_refusal(path_of("missing.safetensors"), "a missing file", "cannot open", NULL);

    /* a good file truncated by a few bytes (an interrupted copy) */
    safetensors_writer *w = safetensors_writer_create();
    int64_t shape[1] = {6};
    safetensors_writer_add(w, "transformer.wte.weight", SAFETENSORS_F32, 1, shape, six, err, sizeof err);
    path = path_of("truncated.safetensors");
    safetensors_writer_write(w, path, err, sizeof err);
    safetensors_writer_free(w);
    size_t size;
    free(slurp(path, &size));
    cut_to(path, (off_t)size - 4);
    expect_refusal(path, "a written file truncated by 4 bytes", "'transformer.wte.weight'", "truncated");
}

int main(void) {
    if (!mkdtemp(folder)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_reference_bytes();
    test_conversions();
    test_malformed();
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    if (system(command) != 0) tap_diag("could not remove %s", folder);
    return tap_done();
}
