/* safetensors.c: the safetensors reader (mmap + full validation) and writer (reference layout,
 * crash-safe rename) declared in safetensors.h. JSON goes through jansson. */
#include "io/safetensors.h"

#include "app/core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes little-endian data in place: port it for big-endian hosts"
#endif

/* the reference implementation refuses headers above 100 MB: they are not safetensors files */
enum { max_header_bytes = 100000000 };

static const struct { const char *name; size_t size; } dtype_table[SAFETENSORS_NUM_DTYPES] = {
    [SAFETENSORS_BOOL] = {"BOOL", 1}, [SAFETENSORS_U8] = {"U8", 1}, [SAFETENSORS_I8] = {"I8", 1},
    [SAFETENSORS_F8_E5M2] = {"F8_E5M2", 1}, [SAFETENSORS_F8_E4M3] = {"F8_E4M3", 1},
    [SAFETENSORS_I16] = {"I16", 2}, [SAFETENSORS_U16] = {"U16", 2},
    [SAFETENSORS_F16] = {"F16", 2}, [SAFETENSORS_BF16] = {"BF16", 2},
    [SAFETENSORS_I32] = {"I32", 4}, [SAFETENSORS_U32] = {"U32", 4},
    [SAFETENSORS_F32] = {"F32", 4}, [SAFETENSORS_F64] = {"F64", 8},
    [SAFETENSORS_I64] = {"I64", 8}, [SAFETENSORS_U64] = {"U64", 8},
};

const char *safetensors_dtype_name(safetensors_dtype dtype) {
    return (unsigned)dtype < SAFETENSORS_NUM_DTYPES ? dtype_table[dtype].name : "?";
}
size_t safetensors_dtype_size(safetensors_dtype dtype) {
    return (unsigned)dtype < SAFETENSORS_NUM_DTYPES ? dtype_table[dtype].size : 0;
}
int safetensors_dtype_from_name(const char *name, safetensors_dtype *dtype) {
    for (int i = 0; i < SAFETENSORS_NUM_DTYPES; i++)
        if (!strcmp(name, dtype_table[i].name)) { *dtype = (safetensors_dtype)i; return 0; }
    return -1;
}

/* ---- element conversions ------------------------------------------------------------------ */
float safetensors_f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | mantissa << 13;                 /* Inf, NaN */
    } else if (exponent != 0) {
        bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13; /* rebias the exponent */
    } else {                                                          /* zero, subnormal */
        float magnitude = (float)mantissa * 0x1p-24f;                 /* exact: m × 2^-24 */
        memcpy(&bits, &magnitude, sizeof bits);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float safetensors_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t safetensors_float_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(bits >> 16 | 0x40); /* quiet NaN */
    bits += 0x7fffu + (bits >> 16 & 1);                                /* round to nearest even */
    return (uint16_t)(bits >> 16);
}

/* ---- reading ------------------------------------------------------------------------------ */

static void free_contents(safetensors_file *file) {
    for (int i = 0; i < file->num_tensors; i++) {
        free(file->tensors[i].name);
        free(file->tensors[i].shape);
    }
    for (int i = 0; i < file->num_metadata; i++) {
        free(file->metadata_keys[i]);
        free(file->metadata_values[i]);
    }
    free(file->tensors);
    free(file->metadata_keys);
    free(file->metadata_values);
    if (file->map) munmap(file->map, file->map_size);
    free(file->path);
    memset(file, 0, sizeof *file);
}

void safetensors_close(safetensors_file *file) { free_contents(file); }

/* a JSON integer in [0, 2^63) */
static int json_to_size(const json_t *value, uint64_t *out) {
    if (!json_is_integer(value) || json_integer_value(value) < 0) return -1;
    *out = (uint64_t)json_integer_value(value);
    return 0;
}

/* "[2, 3]" for messages */
static const char *shape_text(const safetensors_tensor *t, char *buffer, size_t size) {
    size_t used = (size_t)snprintf(buffer, size, "[");
    for (int d = 0; d < t->ndim && used < size; d++)
        used += (size_t)snprintf(buffer + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)t->shape[d]);
    if (used < size) snprintf(buffer + used, size - used, "]");
    return buffer;
}

/* fills t from one header entry {"dtype", "shape", "data_offsets"} */
static int parse_tensor_entry(const char *path, const char *name, const json_t *entry,
                              safetensors_tensor *t, char *err, size_t errlen) {
    if (!json_is_object(entry))
        return error_format(err, errlen, "%s: tensor '%s': header entry is not a JSON object", path, name);
    const json_t *dtype = json_object_get(entry, "dtype"), *shape = json_object_get(entry, "shape"),
                 *offsets = json_object_get(entry, "data_offsets");
    if (!dtype || !shape || !offsets)
        return error_format(err, errlen, "%s: tensor '%s': header entry lacks \"%s\"", path, name,
                    !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!json_is_string(dtype) || safetensors_dtype_from_name(json_string_value(dtype), &t->dtype))
        return error_format(err, errlen, "%s: tensor '%s': unknown dtype %s", path, name,
                    json_is_string(dtype) ? json_string_value(dtype) : "(not a string)");
    if (!json_is_array(shape))
        return error_format(err, errlen, "%s: tensor '%s': \"shape\" is not an array", path, name);
    t->ndim = (int)json_array_size(shape);
    t->shape = malloc(sizeof(int64_t) * (size_t)(t->ndim ? t->ndim : 1));
    CHECK(t->shape, "out of memory");
    /* elements and bytes, refusing products that overflow 63 bits */
    uint64_t elements = 1, limit = (uint64_t)INT64_MAX;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t extent;
        if (json_to_size(json_array_get(shape, (size_t)d), &extent))
            return error_format(err, errlen, "%s: tensor '%s': shape entry %d is not a non-negative integer",
                        path, name, d);
        t->shape[d] = (int64_t)extent;
        if (extent && elements > limit / extent)
            return error_format(err, errlen, "%s: tensor '%s': shape overflows 64 bits", path, name);
        elements *= extent;
    }
    size_t element_size = safetensors_dtype_size(t->dtype);
    if (elements > limit / element_size)
        return error_format(err, errlen, "%s: tensor '%s': shape overflows 64 bits", path, name);
    t->num_elements = (int64_t)elements;
    if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
        json_to_size(json_array_get(offsets, 0), &t->begin) ||
        json_to_size(json_array_get(offsets, 1), &t->end) || t->end < t->begin)
        return error_format(err, errlen, "%s: tensor '%s': \"data_offsets\" is not [begin, end] with "
                    "0 <= begin <= end", path, name);
    uint64_t needed = elements * element_size;
    if (t->end - t->begin != needed) {
        char text[256];
        return error_format(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but "
                    "%s %s needs %llu", path, name, (unsigned long long)t->begin,
                    (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                    safetensors_dtype_name(t->dtype), shape_text(t, text, sizeof text),
                    (unsigned long long)needed);
    }
    return 0;
}

static int compare_offsets(const void *a, const void *b) {
    const safetensors_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* the tensors must tile [0, buffer_size) exactly, as the reference implementation requires */
static int check_layout(safetensors_file *file, uint64_t buffer_size, char *err, size_t errlen) {
    for (int i = 0; i < file->num_tensors; i++) {
        const safetensors_tensor *t = &file->tensors[i];
        if (t->end > buffer_size)
            return error_format(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end "
                        "of the %llu-byte data buffer (truncated file?)", file->path, t->name,
                        (unsigned long long)t->begin, (unsigned long long)t->end,
                        (unsigned long long)buffer_size);
    }
    qsort(file->tensors, (size_t)file->num_tensors, sizeof *file->tensors, compare_offsets);
    uint64_t covered = 0;
    for (int i = 0; i < file->num_tensors; i++) {
        const safetensors_tensor *t = &file->tensors[i];
        if (t->begin < covered)
            return error_format(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor "
                        "'%s' [%llu, %llu]", file->path, t->name, (unsigned long long)t->begin,
                        (unsigned long long)t->end, file->tensors[i - 1].name,
                        (unsigned long long)file->tensors[i - 1].begin,
                        (unsigned long long)file->tensors[i - 1].end);
        if (t->begin > covered)
            return error_format(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] leave a gap of "
                        "%llu bytes before it", file->path, t->name, (unsigned long long)t->begin,
                        (unsigned long long)t->end, (unsigned long long)(t->begin - covered));
        covered = t->end;
    }
    if (covered != buffer_size)
        return error_format(err, errlen, "%s: the tensors cover %llu bytes of the %llu-byte data buffer "
                    "(extra bytes at the end of the file)", file->path,
                    (unsigned long long)covered, (unsigned long long)buffer_size);
    return 0;
}

static int parse_header(safetensors_file *file, const char *header, size_t length,
                        uint64_t buffer_size, const unsigned char *buffer, char *err,
                        size_t errlen) {
    const char *path = file->path;
    if (length == 0 || header[0] != '{')
        return error_format(err, errlen, "%s: the header does not start with '{' (not a safetensors file?)",
                    path);
    json_error_t json_error;
    json_t *root = json_loadb(header, length, JSON_REJECT_DUPLICATES, &json_error);
    if (!root)
        return error_format(err, errlen, "%s: the header is not valid JSON: %s (header line %d, column %d)",
                    path, json_error.text, json_error.line, json_error.column);
    int status = 0;
    if (!json_is_object(root)) {
        status = error_format(err, errlen, "%s: the header is not a JSON object", path);
        goto done;
    }
    size_t entries = json_object_size(root);
    file->tensors = calloc(entries ? entries : 1, sizeof *file->tensors);
    CHECK(file->tensors, "out of memory");
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(value)) {
                status = error_format(err, errlen, "%s: \"__metadata__\" is not a JSON object", path);
                goto done;
            }
            size_t n = json_object_size(value);
            file->metadata_keys = calloc(n ? n : 1, sizeof(char *));
            file->metadata_values = calloc(n ? n : 1, sizeof(char *));
            CHECK(file->metadata_keys && file->metadata_values, "out of memory");
            const char *meta_key;
            json_t *meta_value;
            json_object_foreach(value, meta_key, meta_value) {
                if (!json_is_string(meta_value)) {
                    status = error_format(err, errlen, "%s: \"__metadata__\" value of \"%s\" is not a "
                                  "string", path, meta_key);
                    goto done;
                }
                int m = file->num_metadata++;
                file->metadata_keys[m] = strdup(meta_key);
                file->metadata_values[m] = strdup(json_string_value(meta_value));
                CHECK(file->metadata_keys[m] && file->metadata_values[m], "out of memory");
            }
            continue;
        }
        safetensors_tensor *t = &file->tensors[file->num_tensors++];
        t->name = strdup(key);
        CHECK(t->name, "out of memory");
        if ((status = parse_tensor_entry(path, key, value, t, err, errlen))) goto done;
    }
    if ((status = check_layout(file, buffer_size, err, errlen))) goto done;
    for (int i = 0; i < file->num_tensors; i++) file->tensors[i].data = buffer + file->tensors[i].begin;
done:
    json_decref(root);
    return status;
}

int safetensors_open(const char *path, safetensors_file *file, char *err, size_t errlen) {
    memset(file, 0, sizeof *file);
    file->path = strdup(path);
    CHECK(file->path, "out of memory");
    int status = -1;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0) {
        error_format(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error_format(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        error_format(err, errlen, "%s: %llu bytes, too short for the 8-byte header length (truncated or "
             "not a safetensors file)", path, (unsigned long long)size);
        goto out;
    }
    file->map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file->map == MAP_FAILED) {
        file->map = NULL;
        error_format(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        goto out;
    }
    file->map_size = (size_t)size;
    const unsigned char *bytes = file->map;
    uint64_t header_length = 0;
    for (int b = 7; b >= 0; b--) header_length = header_length << 8 | bytes[b];
    if (header_length > max_header_bytes) {
        error_format(err, errlen, "%s: header length %llu exceeds the 100 MB limit (not a safetensors "
             "file?)", path, (unsigned long long)header_length);
        goto out;
    }
    if (8 + header_length > size) {
        error_format(err, errlen, "%s: header length %llu runs past the end of the %llu-byte file "
             "(truncated or not a safetensors file)", path, (unsigned long long)header_length,
             (unsigned long long)size);
        goto out;
    }
    status = parse_header(file, (const char *)bytes + 8, (size_t)header_length,
                          size - 8 - header_length, bytes + 8 + header_length, err, errlen);
out:
    if (fd >= 0) close(fd);
    if (status) free_contents(file);
    return status;
}

const safetensors_tensor *safetensors_find(const safetensors_file *file, const char *name) {
    for (int i = 0; i < file->num_tensors; i++)
        if (!strcmp(file->tensors[i].name, name)) return &file->tensors[i];
    return NULL;
}

const char *safetensors_metadata(const safetensors_file *file, const char *key) {
    for (int i = 0; i < file->num_metadata; i++)
        if (!strcmp(file->metadata_keys[i], key)) return file->metadata_values[i];
    return NULL;
}

int safetensors_read_float32(const safetensors_file *file, const safetensors_tensor *tensor,
                             float *out, char *err, size_t errlen) {
    const unsigned char *data = tensor->data;
    int64_t n = tensor->num_elements;
    switch (tensor->dtype) {
    case SAFETENSORS_F32:
        if (n) memcpy(out, data, sizeof(float) * (size_t)n);
        return 0;
    case SAFETENSORS_F16:
    case SAFETENSORS_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t half;
            memcpy(&half, data + 2 * i, sizeof half);
            out[i] = tensor->dtype == SAFETENSORS_F16 ? safetensors_f16_to_float(half)
                                                      : safetensors_bf16_to_float(half);
        }
        return 0;
    case SAFETENSORS_F64:
        for (int64_t i = 0; i < n; i++) {
            double wide;
            memcpy(&wide, data + 8 * i, sizeof wide);
            out[i] = (float)wide;
        }
        return 0;
    default:
        return error_format(err, errlen, "%s: tensor '%s' is %s, not a floating-point dtype (F32, F16, "
                    "BF16, F64)", file->path, tensor->name, safetensors_dtype_name(tensor->dtype));
    }
}

/* ---- writing ------------------------------------------------------------------------------ */
typedef struct writer_tensor {
    char *name;
    safetensors_dtype dtype;
    int ndim;
    int64_t *shape;
    const void *data;
    uint64_t bytes;
} writer_tensor;

struct safetensors_writer {
    writer_tensor *tensors;
    int num_tensors, capacity;
    char **metadata_keys, **metadata_values;
    int num_metadata;
};

safetensors_writer *safetensors_writer_create(void) {
    safetensors_writer *writer = calloc(1, sizeof *writer);
    CHECK(writer, "out of memory");
    return writer;
}

void safetensors_writer_free(safetensors_writer *writer) {
    if (!writer) return;
    for (int i = 0; i < writer->num_tensors; i++) {
        free(writer->tensors[i].name);
        free(writer->tensors[i].shape);
    }
    for (int i = 0; i < writer->num_metadata; i++) {
        free(writer->metadata_keys[i]);
        free(writer->metadata_values[i]);
    }
    free(writer->tensors);
    free(writer->metadata_keys);
    free(writer->metadata_values);
    free(writer);
}

int safetensors_writer_add(safetensors_writer *writer, const char *name, safetensors_dtype dtype,
                           int ndim, const int64_t *shape, const void *data,
                           char *err, size_t errlen) {
    if (!strcmp(name, "__metadata__"))
        return error_format(err, errlen, "tensor name \"__metadata__\" is reserved");
    if ((unsigned)dtype >= SAFETENSORS_NUM_DTYPES || ndim < 0)
        return error_format(err, errlen, "tensor '%s': bad dtype or rank", name);
    for (int i = 0; i < writer->num_tensors; i++)
        if (!strcmp(writer->tensors[i].name, name))
            return error_format(err, errlen, "tensor '%s' added twice", name);
    json_t *probe = json_string(name);  /* NULL when the name is not valid UTF-8 */
    if (!probe) return error_format(err, errlen, "tensor name '%s' is not valid UTF-8", name);
    json_decref(probe);
    uint64_t elements = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return error_format(err, errlen, "tensor '%s': negative dimension", name);
        elements *= (uint64_t)shape[d];
    }
    if (writer->num_tensors == writer->capacity) {
        writer->capacity = writer->capacity ? 2 * writer->capacity : 64;
        writer->tensors = realloc(writer->tensors, sizeof *writer->tensors * (size_t)writer->capacity);
        CHECK(writer->tensors, "out of memory");
    }
    writer_tensor *t = &writer->tensors[writer->num_tensors++];
    t->name = strdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->shape = malloc(sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
    CHECK(t->name && t->shape, "out of memory");
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->data = data;
    t->bytes = elements * safetensors_dtype_size(dtype);
    return 0;
}

void safetensors_writer_set_metadata(safetensors_writer *writer, const char *key,
                                     const char *value) {
    for (int i = 0; i < writer->num_metadata; i++)
        if (!strcmp(writer->metadata_keys[i], key)) {
            free(writer->metadata_values[i]);
            writer->metadata_values[i] = strdup(value);
            CHECK(writer->metadata_values[i], "out of memory");
            return;
        }
    int n = ++writer->num_metadata;
    writer->metadata_keys = realloc(writer->metadata_keys, sizeof(char *) * (size_t)n);
    writer->metadata_values = realloc(writer->metadata_values, sizeof(char *) * (size_t)n);
    CHECK(writer->metadata_keys && writer->metadata_values, "out of memory");
    writer->metadata_keys[n - 1] = strdup(key);
    writer->metadata_values[n - 1] = strdup(value);
    CHECK(writer->metadata_keys[n - 1] && writer->metadata_values[n - 1], "out of memory");
}

/* the reference order: descending dtype alignment, then name in byte order */
static int compare_layout(const void *a, const void *b) {
    const writer_tensor *x = *(const writer_tensor *const *)a, *y = *(const writer_tensor *const *)b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}
static char **sort_by_key_strings; /* qsort has no context argument in C11 */
static int compare_key_indices(const void *a, const void *b) {
    return strcmp(sort_by_key_strings[*(const int *)a], sort_by_key_strings[*(const int *)b]);
}

/* the padded JSON header for tensors in this order; malloc'd, length in *length */
static char *build_header(const safetensors_writer *writer, writer_tensor **order, size_t *length) {
    json_t *root = json_object();
    CHECK(root, "out of memory");
    if (writer->num_metadata) {  /* keys sorted, so the header does not depend on call order */
        int *by_key = malloc(sizeof(int) * (size_t)writer->num_metadata);
        CHECK(by_key, "out of memory");
        for (int i = 0; i < writer->num_metadata; i++) by_key[i] = i;
        sort_by_key_strings = writer->metadata_keys;
        qsort(by_key, (size_t)writer->num_metadata, sizeof *by_key, compare_key_indices);
        json_t *metadata = json_object();
        for (int i = 0; i < writer->num_metadata; i++)
            json_object_set_new(metadata, writer->metadata_keys[by_key[i]],
                                json_string(writer->metadata_values[by_key[i]]));
        json_object_set_new(root, "__metadata__", metadata);
        free(by_key);
    }
    uint64_t offset = 0;
    for (int i = 0; i < writer->num_tensors; i++) {
        const writer_tensor *t = order[i];
        json_t *entry = json_object(), *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_object_set_new(entry, "dtype", json_string(safetensors_dtype_name(t->dtype)));
        json_object_set_new(entry, "shape", shape);
        json_object_set_new(entry, "data_offsets",
                            json_pack("[II]", (json_int_t)offset, (json_int_t)(offset + t->bytes)));
        CHECK(json_object_set_new(root, t->name, entry) == 0, "cannot add '%s' to the header",
              t->name);
        offset += t->bytes;
    }
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    CHECK(text, "out of memory (or invalid UTF-8 in a tensor name)");
    json_decref(root);
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    text = realloc(text, padded + 1);
    CHECK(text, "out of memory");
    memset(text + n, ' ', padded - n);
    text[padded] = 0;
    *length = padded;
    return text;
}

/* makes the rename of a file in this folder durable (best effort: not every FS allows it) */
static void sync_parent_folder(const char *path) {
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash == folder) folder[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(folder, sizeof folder, ".");
    int fd = open(folder, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int safetensors_writer_write(safetensors_writer *writer, const char *path, char *err,
                             size_t errlen) {
    writer_tensor **order = malloc(sizeof *order * (size_t)(writer->num_tensors + 1));
    CHECK(order, "out of memory");
    for (int i = 0; i < writer->num_tensors; i++) order[i] = &writer->tensors[i];
    qsort(order, (size_t)writer->num_tensors, sizeof *order, compare_layout);
    size_t header_length;
    char *header = build_header(writer, order, &header_length);

    size_t tmp_size = strlen(path) + 8;
    char *tmp = malloc(tmp_size);
    CHECK(tmp, "out of memory");
    snprintf(tmp, tmp_size, "%s.tmp", path);
    int status = -1;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        error_format(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char length_bytes[8];
    for (int b = 0; b < 8; b++) length_bytes[b] = (unsigned char)((uint64_t)header_length >> (8 * b));
    int ok = fwrite(length_bytes, 1, 8, f) == 8 && fwrite(header, 1, header_length, f) == header_length;
    for (int i = 0; ok && i < writer->num_tensors; i++)
        ok = order[i]->bytes == 0 || fwrite(order[i]->data, 1, order[i]->bytes, f) == order[i]->bytes;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved_errno = errno; }
    if (!ok) {
        error_format(err, errlen, "%s: write failed: %s", tmp, strerror(saved_errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        error_format(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    sync_parent_folder(path);
    status = 0;
out:
    free(tmp);
    free(header);
    free(order);
    return status;
}
