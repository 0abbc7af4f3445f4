/* checkpoint_checksum.c: see checkpoint_checksum.h. XXH3-64 (libxxhash) rather than CRC32C: the
 * Debian library is maintained, runs at memory speed on any x86-64/arm64 without special
 * instructions, and its 64 bits make an accidental match on a damaged box negligible. */
#include "io/checkpoint_checksum.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t checksum_floats(const float *data, size_t n) { return XXH3_64bits(data, n * sizeof(float)); }

void checksum_path(char *out, size_t size, const char *tensor) {
    snprintf(out, size, "%s%s%s", CHECKPOINT_CHECKSUM_GROUP, tensor[0] == '/' ? "" : "/", tensor);
}

void checkpoint_mark_checksummed(hid_t file) { hdf5_write_string_attribute(file, "checksum", CHECKPOINT_CHECKSUM_KIND); }

int checkpoint_is_checksummed(hid_t file) {
    H5E_auto2_t handler;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &handler, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char *kind = H5Aexists(file, "checksum") > 0 ? hdf5_read_string_attribute(file, "checksum") : NULL;
    H5Eset_auto2(H5E_DEFAULT, handler, data);
    int ours = kind && !strcmp(kind, CHECKPOINT_CHECKSUM_KIND);
    free(kind);
    return ours;
}

void checkpoint_write_checksums(checkpoint_file *f, const char *tensor, const box_checksum *mine, int64_t count,
                                int64_t offset, int64_t total) {
    char path[1024];
    checksum_path(path, sizeof path, tensor);
    hsize_t dims[2] = {(hsize_t)(total ? total : 0), 5};
    hid_t space = H5Screate_simple(2, dims, NULL);
    CHECK_HDF5(space);
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    CHECK_HDF5(links);
    CHECK_HDF5(H5Pset_create_intermediate_group(links, 1));
    hid_t dataset = HDF5_IO(H5Dcreate2(f->file, path, H5T_STD_U64LE, space, links, H5P_DEFAULT, H5P_DEFAULT));
    if (dataset < 0) hdf5_fail("H5Dcreate2", __FILE__, __LINE__);
    hsize_t n = count ? (hsize_t)count : 1;
    hsize_t memory_dims[2] = {n, 5};
    hid_t memory_space = H5Screate_simple(2, memory_dims, NULL);
    CHECK_HDF5(memory_space);
    box_checksum dummy = {0};
    if (count) {
        hsize_t start[2] = {(hsize_t)offset, 0}, size[2] = {(hsize_t)count, 5};
        CHECK_HDF5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, size, NULL));
    } else {
        CHECK_HDF5(H5Sselect_none(space));
        CHECK_HDF5(H5Sselect_none(memory_space));
    }
    CHECK_HDF5(HDF5_IO(H5Dwrite(dataset, H5T_NATIVE_UINT64, memory_space, space, f->transfer, count ? (const void *)mine : &dummy)));
    CHECK_HDF5(H5Sclose(memory_space));
    CHECK_HDF5(H5Dclose(dataset));
    CHECK_HDF5(H5Pclose(links));
    CHECK_HDF5(H5Sclose(space));
}

/* the records of an open checksum dataset, or -1 when it is not a [n, 5] integer table */
static int64_t read_records(hid_t dataset, hid_t transfer, box_checksum **records) {
    *records = NULL;
    hid_t space = H5Dget_space(dataset);
    CHECK_HDF5(space);
    hsize_t dims[2] = {0, 0};
    int ndims = H5Sget_simple_extent_ndims(space);
    if (ndims == 2) H5Sget_simple_extent_dims(space, dims, NULL);
    CHECK_HDF5(H5Sclose(space));
    if (ndims != 2 || dims[1] != 5) return -1;
    if (dims[0] == 0) return 0;
    *records = malloc(sizeof(box_checksum) * dims[0]);
    CHECK(*records, "out of host memory for %llu checksum records", (unsigned long long)dims[0]);
    if (H5Dread(dataset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, transfer, *records) < 0) {
        free(*records);
        *records = NULL;
        return -1;
    }
    return (int64_t)dims[0];
}

int64_t checkpoint_read_checksums(checkpoint_file *f, const char *tensor, box_checksum **records) {
    char path[1024];
    checksum_path(path, sizeof path, tensor);
    *records = NULL;
    H5E_auto2_t handler;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &handler, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* one open, without asking whether the links exist first (each question is a collective
     * metadata operation): a missing table fails the open, quietly */
    hid_t dataset = H5Dopen2(f->file, path, H5P_DEFAULT);
    int64_t n = dataset >= 0 ? read_records(dataset, f->transfer, records) : -1;
    if (dataset >= 0) H5Dclose(dataset);
    H5Eset_auto2(H5E_DEFAULT, handler, data);
    return n;
}

/* ---- the serial verifier ---- */

typedef struct name_list {
    char **names;
    int64_t count, capacity;
} name_list;

static herr_t collect_link(hid_t group, const char *name, const H5L_info_t *info, void *op_data) {
    (void)group;
    (void)info;
    name_list *list = op_data;
    if (!strncmp(name, CHECKPOINT_CHECKSUM_GROUP + 1, strlen(CHECKPOINT_CHECKSUM_GROUP) - 1)) return 0;
    if (list->count == list->capacity) {
        list->capacity = list->capacity ? 2 * list->capacity : 64;
        list->names = realloc(list->names, sizeof(char *) * (size_t)list->capacity);
        CHECK(list->names, "out of memory");
    }
    list->names[list->count] = strdup(name);
    CHECK(list->names[list->count], "out of memory");
    list->count++;
    return 0;
}

/* verifies the records of one float dataset; returns the bad boxes, -1 when it has no checksums */
static int64_t verify_dataset(hid_t file, hid_t dataset, const char *path, const char *name, int64_t *boxes,
                              char *err, size_t errlen, int first_error) {
    char table_path[1100], tensor[1024];
    snprintf(tensor, sizeof tensor, "/%s", name);
    checksum_path(table_path, sizeof table_path, tensor);
    hid_t table = H5Lexists(file, CHECKPOINT_CHECKSUM_GROUP, H5P_DEFAULT) > 0 &&
                          H5Lexists(file, table_path, H5P_DEFAULT) > 0
                      ? H5Dopen2(file, table_path, H5P_DEFAULT)
                      : -1;
    if (table < 0) return -1;
    box_checksum *records;
    int64_t n = read_records(table, H5P_DEFAULT, &records);
    H5Dclose(table);
    if (n < 0) {
        if (first_error) error_format(err, errlen, "%s: %s is not a checksum table", path, table_path);
        return 1;
    }
    hid_t file_space = H5Dget_space(dataset);
    int ndims = H5Sget_simple_extent_ndims(file_space);
    hsize_t dims[2] = {1, 1};
    if (ndims >= 1 && ndims <= 2) H5Sget_simple_extent_dims(file_space, dims, NULL);
    int64_t bad = 0;
    float *buffer = NULL;
    size_t capacity = 0;
    for (int64_t i = 0; i < n; i++) {
        const box_checksum *r = &records[i];
        (*boxes)++;
        const char *problem = NULL;
        uint64_t computed = 0;
        int fits = ndims >= 1 && ndims <= 2 && r->rows && r->cols && r->row + r->rows <= dims[0] &&
                   (ndims == 1 ? r->col == 0 && r->cols == 1 : r->col + r->cols <= dims[1]);
        if (!fits) problem = "lies outside the tensor";
        else {
            size_t elements = (size_t)(r->rows * r->cols);
            if (elements > capacity) {
                free(buffer);
                buffer = malloc(sizeof(float) * elements);
                CHECK(buffer, "out of memory for a %zu-element box", elements);
                capacity = elements;
            }
            hsize_t start[2] = {r->row, r->col}, size[2] = {r->rows, r->cols}, count = elements;
            hid_t memory_space = H5Screate_simple(1, &count, NULL);
            H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, size, NULL);
            if (H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space, file_space, H5P_DEFAULT, buffer) < 0)
                problem = "cannot be read";
            else if ((computed = checksum_floats(buffer, elements)) != r->hash)
                problem = "does not match its checksum";
            H5Sclose(memory_space);
        }
        if (problem) {
            if (first_error && !bad)
                error_format(err, errlen, "%s: tensor %s: box rows [%llu, %llu) columns [%llu, %llu) %s "
                             "(xxh3 stored %016llx, computed %016llx): the file is damaged", path, tensor,
                             (unsigned long long)r->row, (unsigned long long)(r->row + r->rows),
                             (unsigned long long)r->col, (unsigned long long)(r->col + r->cols), problem,
                             (unsigned long long)r->hash, (unsigned long long)computed);
            bad++;
        }
    }
    free(buffer);
    free(records);
    H5Sclose(file_space);
    return bad;
}

int64_t checkpoint_verify_file(hid_t file, const char *path, int64_t *tensors, int64_t *boxes, int64_t *unchecked,
                               char *err, size_t errlen) {
    *tensors = *boxes = *unchecked = 0;
    name_list list = {0};
    H5E_auto2_t handler;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &handler, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int64_t bad = 0;
    int listed = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_link, &list) >= 0;
    if (!listed) {
        error_format(err, errlen, "%s: cannot list its objects (damaged file?)", path);
        bad = 1;
    }
    for (int64_t i = 0; i < list.count; i++) {
        hid_t dataset = listed ? H5Dopen2(file, list.names[i], H5P_DEFAULT) : -1;
        if (dataset >= 0) {
            hid_t type = H5Dget_type(dataset);
            if (type >= 0 && H5Tget_class(type) == H5T_FLOAT) {
                int64_t result = verify_dataset(file, dataset, path, list.names[i], boxes, err, errlen, bad == 0);
                if (result < 0) (*unchecked)++;
                else {
                    (*tensors)++;
                    bad += result;
                }
            }
            if (type >= 0) H5Tclose(type);
            H5Dclose(dataset);
        }
        free(list.names[i]);
    }
    free(list.names);
    H5Eset_auto2(H5E_DEFAULT, handler, data);
    return bad;
}
