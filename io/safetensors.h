/* safetensors.h: read and write Hugging Face safetensors files.
 * A file is: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
 * (padded with spaces to a multiple of 8 bytes), then the data buffer; offsets are relative to
 * the start of the buffer, tensors are little-endian and row-major.
 * The reader maps the file and validates all of it before returning (header length against the
 * file size, the JSON, every dtype and shape, offsets that tile the buffer exactly as the
 * reference implementation requires); errors come back as a message naming the file and the
 * tensor, never as an abort, so a tool can report them as user errors and a test can check them.
 * The writer lays tensors out as the reference does (descending dtype alignment, then name in
 * byte order; metadata keys sorted), so the same tensors always give the same bytes. */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* in the reference implementation's order (increasing alignment), which the writer sorts by */
typedef enum safetensors_dtype {
    SAFETENSORS_BOOL, SAFETENSORS_U8, SAFETENSORS_I8, SAFETENSORS_F8_E5M2, SAFETENSORS_F8_E4M3,
    SAFETENSORS_I16, SAFETENSORS_U16, SAFETENSORS_F16, SAFETENSORS_BF16, SAFETENSORS_I32,
    SAFETENSORS_U32, SAFETENSORS_F32, SAFETENSORS_F64, SAFETENSORS_I64, SAFETENSORS_U64,
    SAFETENSORS_NUM_DTYPES
} safetensors_dtype;

const char *safetensors_dtype_name(safetensors_dtype dtype);       /* "F32", ... */
size_t safetensors_dtype_size(safetensors_dtype dtype);            /* bytes per element */
int safetensors_dtype_from_name(const char *name, safetensors_dtype *dtype); /* 0, or -1 */

/* ---- reading ------------------------------------------------------------------------------ */
typedef struct safetensors_tensor {
    char *name;
    safetensors_dtype dtype;
    int ndim;                      /* 0 for a scalar */
    int64_t *shape;                /* ndim entries */
    int64_t num_elements;          /* product of the shape (1 for a scalar) */
    uint64_t begin, end;           /* data_offsets, relative to the data buffer */
    const unsigned char *data;     /* end - begin bytes inside the mapped file */
} safetensors_tensor;

typedef struct safetensors_file {
    char *path;
    int num_tensors;
    safetensors_tensor *tensors;   /* in order of their data offsets */
    int num_metadata;
    char **metadata_keys, **metadata_values; /* as found in the header */
    void *map;
    size_t map_size;
} safetensors_file;

/* Opens and validates path. Returns 0, or -1 with "PATH: what is wrong" in err (naming the
 * tensor when one is at fault); on failure *file holds nothing that needs closing. */
int safetensors_open(const char *path, safetensors_file *file, char *err, size_t errlen);
void safetensors_close(safetensors_file *file);

/* the tensor called name, or NULL */
const safetensors_tensor *safetensors_find(const safetensors_file *file, const char *name);
/* the __metadata__ value of key, or NULL */
const char *safetensors_metadata(const safetensors_file *file, const char *key);

/* Converts a floating-point tensor (F32, F16, BF16, F64) to float32 in out[num_elements];
 * returns 0, or -1 with a message naming the tensor when its dtype is not floating point. */
int safetensors_read_float32(const safetensors_file *file, const safetensors_tensor *tensor,
                             float *out, char *err, size_t errlen);

/* element conversions (exact widening; narrowing rounds to nearest even, keeps NaN and Inf) */
float safetensors_f16_to_float(uint16_t h);
float safetensors_bf16_to_float(uint16_t b);
uint16_t safetensors_float_to_bf16(float f);

/* ---- writing ------------------------------------------------------------------------------ */
typedef struct safetensors_writer safetensors_writer;

safetensors_writer *safetensors_writer_create(void);
void safetensors_writer_free(safetensors_writer *writer);

/* Adds a tensor. data (num_elements × dtype size bytes, little-endian) is borrowed, not
 * copied: it must stay valid until safetensors_writer_write. Returns 0, or -1 with a message
 * for a duplicate or reserved name or a negative dimension. */
int safetensors_writer_add(safetensors_writer *writer, const char *name, safetensors_dtype dtype,
                           int ndim, const int64_t *shape, const void *data,
                           char *err, size_t errlen);
/* Sets one __metadata__ entry (copied; a second call with the same key replaces the value). */
void safetensors_writer_set_metadata(safetensors_writer *writer, const char *key,
                                     const char *value);

/* Writes PATH.tmp, fsyncs it and renames it to path: path is either the old file or the whole
 * new one. Returns 0, or -1 with a message (and no PATH.tmp left behind). */
int safetensors_writer_write(safetensors_writer *writer, const char *path, char *err,
                             size_t errlen);

#endif
