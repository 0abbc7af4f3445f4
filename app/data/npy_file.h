/* npy_file.h: numpy's .npy format (version 1.0, little-endian, C order), byte for byte as
 * numpy.save writes it (numpy/lib/format.py: the dict header, the growth-axis spaces, padding to
 * 64 bytes), for the integer arrays of Megatron's index cache. Arrays live in memory as int64
 * whatever their dtype on disk. */
#ifndef NPY_FILE_H
#define NPY_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef enum npy_dtype { NPY_INT16, NPY_INT32, NPY_UINT32, NPY_INT64 } npy_dtype;

/* "<i2", "<i4", "<u4", "<i8" */
const char *npy_dtype_name(npy_dtype dtype);

/* writes rows x columns values (columns 0: a 1-D array of `rows`) as `dtype` to path (through
 * path.tmp.PID and a rename). Returns 0, or -1 with err naming the file and the system error;
 * a value that does not fit the dtype is an error too. */
int npy_write(const char *path, npy_dtype dtype, const int64_t *values, int64_t rows, int columns,
              char *err, size_t errlen);

/* reads an integer .npy (version 1 or 2, any of the dtypes above, C order) into *values
 * (malloc'd, rows x max(columns, 1) int64). Returns 0, or -1 with err saying what is wrong. */
int npy_read(const char *path, int64_t **values, int64_t *rows, int *columns, npy_dtype *dtype,
             char *err, size_t errlen);

#endif
