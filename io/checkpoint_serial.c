/* checkpoint_serial.c: single-process reader and crash-safe writer of our HDF5 checkpoint
 * (see checkpoint_serial.h and io/CHECKPOINT_FORMAT.md). */
#include "io/checkpoint_serial.h"
#include "app/core/error.h"
#include "io/checkpoint_checksum.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* HDF5 prints its error stack on every failed call; while probing user files we report
 * failures ourselves, so printing is off between quiet_begin and quiet_end */
typedef struct quiet_hdf5 { H5E_auto2_t handler; void *data; } quiet_hdf5;
static quiet_hdf5 quiet_begin(void) {
    quiet_hdf5 saved;
    H5Eget_auto2(H5E_DEFAULT, &saved.handler, &saved.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return saved;
}
static void quiet_end(quiet_hdf5 saved) { H5Eset_auto2(H5E_DEFAULT, saved.handler, saved.data); }

/* ---- reading ------------------------------------------------------------------------------ */
int checkpoint_resolve(const char *dir_or_file, char *path, size_t path_size, char *err,
                       size_t errlen) {
    struct stat st;
    if (stat(dir_or_file, &st) != 0)
        return error_format(err, errlen, "%s: %s", dir_or_file, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        snprintf(path, path_size, "%s", dir_or_file);
        return 0;
    }
    int64_t iteration;
    checkpoint_names names;
    if (checkpoint_tracker_read(dir_or_file, &iteration, err, errlen) != 0 ||
        checkpoint_names_for(&names, dir_or_file, iteration, err, errlen) != 0)
        return -1;
    snprintf(path, path_size, "%s", names.file);
    return 0;
}

int checkpoint_reader_open(const char *path, checkpoint_reader *reader, char *err, size_t errlen) {
    memset(reader, 0, sizeof *reader);
    reader->file = reader->args = reader->model = -1;
    snprintf(reader->path, sizeof reader->path, "%s", path);
    if (access(path, R_OK) != 0) return error_format(err, errlen, "%s: %s", path, strerror(errno));
    quiet_hdf5 saved = quiet_begin();
    int status = -1;
    reader->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (reader->file < 0) {
        error_format(err, errlen, "%s: not an HDF5 file (or damaged)", path);
        goto out;
    }
    checkpoint_header_status header = checkpoint_header_check(reader->file, path, err, errlen);
    if (header == CHECKPOINT_INCOMPLETE) /* the converter's own wording of this one (its test expects it) */
        error_format(err, errlen, "%s: the checkpoint is not complete (root attribute complete is not 1): "
             "its save was interrupted", path);
    if (header != CHECKPOINT_HEADER_OK) goto out;
    if ((reader->args = H5Gopen2(reader->file, "args", H5P_DEFAULT)) < 0) {
        error_format(err, errlen, "%s: no /args group", path);
    } else if ((reader->model = H5Gopen2(reader->file, "model", H5P_DEFAULT)) < 0) {
        error_format(err, errlen, "%s: no /model group", path);
    } else {
        status = 0;
    }
out:
    quiet_end(saved);
    if (status) checkpoint_reader_close(reader);
    return status;
}

void checkpoint_reader_close(checkpoint_reader *reader) {
    if (reader->model >= 0) H5Gclose(reader->model);
    if (reader->args >= 0) H5Gclose(reader->args);
    if (reader->file >= 0) H5Fclose(reader->file);
    reader->file = reader->args = reader->model = -1;
}

int checkpoint_read_int_arg(const checkpoint_reader *reader, const char *name, int64_t *value,
                            char *err, size_t errlen) {
    quiet_hdf5 saved = quiet_begin();
    int status = hdf5_read_scalar_attribute(reader->args, name, H5T_NATIVE_INT64, 0, value);
    quiet_end(saved);
    if (status) return error_format(err, errlen, "%s: /args has no integer attribute %s", reader->path, name);
    return 0;
}

int checkpoint_has_int_arg(const checkpoint_reader *reader, const char *name) {
    int64_t value;
    quiet_hdf5 saved = quiet_begin();
    int status = hdf5_read_scalar_attribute(reader->args, name, H5T_NATIVE_INT64, 0, &value);
    quiet_end(saved);
    return status == 0;
}

int checkpoint_read_double_arg(const checkpoint_reader *reader, const char *name, double *value,
                               char *err, size_t errlen) {
    quiet_hdf5 saved = quiet_begin();
    int status = hdf5_read_scalar_attribute(reader->args, name, H5T_NATIVE_DOUBLE, 1, value);
    quiet_end(saved);
    if (status) return error_format(err, errlen, "%s: /args has no numeric attribute %s", reader->path, name);
    return 0;
}

char *checkpoint_read_string_arg(const checkpoint_reader *reader, const char *name) {
    quiet_hdf5 saved = quiet_begin();
    char *value = hdf5_read_string_attribute(reader->args, name);
    quiet_end(saved);
    return value;
}

int checkpoint_has_tensor(const checkpoint_reader *reader, const char *name) {
    quiet_hdf5 saved = quiet_begin();
    int exists = H5Lexists(reader->model, name, H5P_DEFAULT) > 0;
    quiet_end(saved);
    return exists;
}

static void shape_text(char *buffer, size_t size, int ndim, const hsize_t *dims64,
                       const int64_t *dims) {
    size_t used = (size_t)snprintf(buffer, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buffer + used, size - used, "%s%lld", d ? ", " : "",
                                 dims64 ? (long long)dims64[d] : (long long)dims[d]);
    if (used < size) snprintf(buffer + used, size - used, "]");
}

/* opens /model/<name> after checking its shape and type; -1 with a message otherwise */
static hid_t open_checked(const checkpoint_reader *reader, const char *name, int ndim,
                          const int64_t *shape, char *err, size_t errlen) {
    if (!checkpoint_has_tensor(reader, name)) {
        error_format(err, errlen, "%s: no tensor /model/%s", reader->path, name);
        return -1;
    }
    quiet_hdf5 saved = quiet_begin();
    hid_t dataset = H5Dopen2(reader->model, name, H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
    int found_ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    hsize_t dims[H5S_MAX_RANK] = {0};
    if (found_ndim > 0) H5Sget_simple_extent_dims(space, dims, NULL);
    int is_float = type >= 0 && H5Tget_class(type) == H5T_FLOAT;
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    quiet_end(saved);
    int same = found_ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = (int64_t)dims[d] == shape[d];
    if (dataset < 0 || !is_float || !same) {
        char expected[128], found[128];
        shape_text(expected, sizeof expected, ndim, NULL, shape);
        shape_text(found, sizeof found, found_ndim > 0 ? found_ndim : 0, dims, NULL);
        if (dataset < 0 || !is_float)
            error_format(err, errlen, "%s: /model/%s is not a floating-point dataset", reader->path, name);
        else
            error_format(err, errlen, "%s: /model/%s has shape %s, expected %s from /args", reader->path,
                 name, found, expected);
        if (dataset >= 0) H5Dclose(dataset);
        return -1;
    }
    return dataset;
}

int checkpoint_check_tensor(const checkpoint_reader *reader, const char *name, int ndim,
                            const int64_t *shape, char *err, size_t errlen) {
    hid_t dataset = open_checked(reader, name, ndim, shape, err, errlen);
    if (dataset < 0) return -1;
    H5Dclose(dataset);
    return 0;
}

int checkpoint_reader_read_tensor(const checkpoint_reader *reader, const char *name, int ndim,
                           const int64_t *shape, float *out, char *err, size_t errlen) {
    hid_t dataset = open_checked(reader, name, ndim, shape, err, errlen);
    if (dataset < 0) return -1;
    quiet_hdf5 saved = quiet_begin();
    herr_t status = H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
    quiet_end(saved);
    H5Dclose(dataset);
    if (status < 0) return error_format(err, errlen, "%s: cannot read /model/%s (damaged file?)",
                                reader->path, name);
    return 0;
}

/* ---- writing ------------------------------------------------------------------------------ */
struct checkpoint_writer {
    checkpoint_names names;
    hid_t file, args, model;
};

checkpoint_writer *checkpoint_writer_create(const char *dir, int64_t iteration, char *err, size_t errlen) {
    checkpoint_writer *w = calloc(1, sizeof *w);
    CHECK(w, "out of memory");
    if (checkpoint_names_for(&w->names, dir, iteration, err, errlen) != 0 ||
        checkpoint_make_directory(dir, err, errlen) != 0) {
        free(w);
        return NULL;
    }
    quiet_hdf5 saved = quiet_begin();
    w->file = H5Fcreate(w->names.partial, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    quiet_end(saved);
    if (w->file < 0) {
        error_format(err, errlen, "%s: cannot create the HDF5 file (is the folder writable?)",
             w->names.partial);
        free(w);
        return NULL;
    }
    checkpoint_header_write(w->file, iteration, 0, 0);
    checkpoint_mark_checksummed(w->file);
    w->args = H5Gcreate2(w->file, "args", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_HDF5(w->args);
    w->model = H5Gcreate2(w->file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_HDF5(w->model);
    return w;
}

void checkpoint_write_int_arg(checkpoint_writer *w, const char *name, int64_t value) {
    hdf5_write_int_attribute(w->args, name, value);
}
void checkpoint_write_double_arg(checkpoint_writer *w, const char *name, double value) {
    hdf5_write_double_attribute(w->args, name, value);
}
void checkpoint_write_string_arg(checkpoint_writer *w, const char *name, const char *value) {
    hdf5_write_string_attribute(w->args, name, value);
}

void checkpoint_write_group_int(checkpoint_writer *w, const char *group, const char *name,
                                int64_t value) {
    hid_t g = H5Lexists(w->file, group, H5P_DEFAULT) > 0
                  ? H5Gopen2(w->file, group, H5P_DEFAULT)
                  : H5Gcreate2(w->file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_HDF5(g);
    hdf5_write_int_attribute(g, name, value);
    CHECK_HDF5(H5Gclose(g));
}

void checkpoint_writer_write_tensor(checkpoint_writer *w, const char *name, int ndim,
                             const int64_t *shape, const float *data) {
    hsize_t dims[H5S_MAX_RANK];
    CHECK(ndim >= 1 && ndim <= H5S_MAX_RANK, "tensor %s: rank %d", name, ndim);
    for (int d = 0; d < ndim; d++) dims[d] = (hsize_t)shape[d];
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    CHECK_HDF5(space);
    hid_t dataset = H5Dcreate2(w->model, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
    CHECK_HDF5(dataset);
    CHECK_HDF5(H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
    CHECK_HDF5(H5Dclose(dataset));
    CHECK_HDF5(H5Sclose(space));
    /* the whole tensor is one box (io/checkpoint_checksum.h) */
    CHECK(ndim <= 2, "tensor %s: rank %d (checkpoints hold vectors and matrices)", name, ndim);
    uint64_t rows = (uint64_t)shape[0], cols = ndim == 2 ? (uint64_t)shape[1] : 1;
    box_checksum record = {0, 0, rows, cols, checksum_floats(data, (size_t)(rows * cols))};
    char path[1024];
    snprintf(path, sizeof path, "/model/%s", name);
    checkpoint_file serial = {.file = w->file, .transfer = H5P_DEFAULT};
    checkpoint_write_checksums(&serial, path, &record, 1, 0, 1);
}

int checkpoint_writer_commit(checkpoint_writer *w, char *err, size_t errlen) {
    checkpoint_header_set_complete(w->file);
    CHECK_HDF5(H5Gclose(w->model));
    CHECK_HDF5(H5Gclose(w->args));
    CHECK_HDF5(H5Fclose(w->file));
    int status = checkpoint_commit(&w->names, err, errlen);
    free(w);
    return status;
}

void checkpoint_writer_abandon(checkpoint_writer *w) {
    H5Gclose(w->model);
    H5Gclose(w->args);
    H5Fclose(w->file);
    unlink(w->names.partial);
    free(w);
}
