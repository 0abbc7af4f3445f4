/* checkpoint_file.c: see checkpoint_file.h. Parallel HDF5 through the MPI-IO driver with
 * collective metadata; tensor data moves with MPI-IO collective (two-phase) transfers or, by
 * default, independent ones (each rank's large contiguous pieces go straight to the file: with
 * 8 ranks on 2 cores a tiny model's save took 25 s collective and 1.2 s independent); datasets are contiguous, allocated at creation and
 * never filled (every element is written by some rank), and aligned to 1 MiB so that large
 * tensors start on file-system block boundaries. */
#define _GNU_SOURCE /* fallocate(2) */
#include "io/checkpoint_file.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

static hid_t file_access(MPI_Comm comm) {
    hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    CHECK_HDF5(access);
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    /* ROMIO: let each rank write its own large contiguous pieces when that is faster */
    CHECK_MPI(MPI_Info_set(info, "romio_cb_write", "automatic"));
    CHECK_MPI(MPI_Info_set(info, "romio_cb_read", "automatic"));
    CHECK_HDF5(H5Pset_fapl_mpio(access, comm, info));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_HDF5(H5Pset_all_coll_metadata_ops(access, 1));
    CHECK_HDF5(H5Pset_coll_metadata_write(access, 1));
    CHECK_HDF5(H5Pset_alignment(access, 1 << 16, 1 << 20));
    return access;
}

static void init_common(checkpoint_file *f, const char *path, MPI_Comm comm, int collective_io) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->comm = comm;
    f->transfer = H5Pcreate(H5P_DATASET_XFER);
    CHECK_HDF5(f->transfer);
    CHECK_HDF5(H5Pset_dxpl_mpio(f->transfer, collective_io ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT));
}

void checkpoint_file_create(checkpoint_file *f, const char *path, MPI_Comm comm, int collective_io) {
    init_common(f, path, comm, collective_io);
    hid_t access = file_access(comm);
    H5E_auto2_t handler;
    void *handler_data;
    H5Eget_auto2(H5E_DEFAULT, &handler, &handler_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    io_fault_save_begin(rank);
    io_error_set_file(path, "saving checkpoint");
    f->file = io_fault_hit() ? -1 : H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, access);
    int errnum = f->file < 0 ? hdf5_failure_errno() : 0;
    if (f->file < 0 && hdf5_errors_debug()) H5Eprint2(H5E_DEFAULT, stderr);
    H5Eset_auto2(H5E_DEFAULT, handler, handler_data);
    CHECK_HDF5(H5Pclose(access));
    if (f->file < 0) io_fail(path, "H5Fcreate (is --save a writable folder?)", errnum);
}

/* 0 when `bytes` fit next to `path`, else the errno (ENOSPC, EDQUOT, ...) */
static int room_for(const char *path, uint64_t bytes) {
    char sidecar[sizeof ((checkpoint_file *)0)->path + 16];
    snprintf(sidecar, sizeof sidecar, "%s.reserve", path);
    int fd = open(sidecar, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return errno;
    int errnum = bytes && fallocate(fd, 0, 0, (off_t)bytes) != 0 ? errno : 0;
    if (errnum == EOPNOTSUPP || errnum == ENOSYS) {
        struct statvfs vfs;
        errnum = fstatvfs(fd, &vfs) != 0 ? errno : (uint64_t)vfs.f_bavail * vfs.f_frsize < bytes ? ENOSPC : 0;
    }
    close(fd);
    unlink(sidecar);
    return errnum;
}

void checkpoint_file_reserve(checkpoint_file *f, uint64_t bytes) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(f->comm, &rank));
    int errnum = 0;
    if (rank == 0) errnum = io_fault_hit() ? io_fault_errno() : room_for(f->path, bytes);
    CHECK_MPI(MPI_Bcast(&errnum, 1, MPI_INT, 0, f->comm));
    if (!errnum) return;
    if (rank == 0) unlink(f->path);
    char operation[96];
    snprintf(operation, sizeof operation, "allocating %.1f MB (the checkpoint's size)", (double)bytes / 1e6);
    io_fail(f->path, operation, errnum);
}

int checkpoint_file_open(checkpoint_file *f, const char *path, MPI_Comm comm, int collective_io, char *err,
                         size_t errlen) {
    init_common(f, path, comm, collective_io);
    hid_t access = file_access(comm);
    H5E_auto2_t handler;
    void *handler_data;
    H5Eget_auto2(H5E_DEFAULT, &handler, &handler_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    f->file = H5Fopen(path, H5F_ACC_RDONLY, access);
    H5Eset_auto2(H5E_DEFAULT, handler, handler_data);
    CHECK_HDF5(H5Pclose(access));
    if (f->file < 0) {
        snprintf(err, errlen, "%s is not a readable HDF5 file", path);
        CHECK_HDF5(H5Pclose(f->transfer));
        return -1;
    }
    return 0;
}

void checkpoint_file_close(checkpoint_file *f) {
    CHECK_HDF5(H5Pclose(f->transfer));
    CHECK_HDF5(HDF5_IO(H5Fclose(f->file)));
    f->file = f->transfer = -1;
}

/* ---- groups and attributes ---- */

static int link_exists(hid_t file, const char *path) {
    if (strcmp(path, "/") == 0) return 1;
    /* every prefix must exist for H5Lexists to answer safely */
    char prefix[1024];
    for (const char *p = strchr(path + 1, '/');; p = strchr(p + 1, '/')) {
        size_t n = p ? (size_t)(p - path) : strlen(path);
        snprintf(prefix, sizeof prefix, "%.*s", (int)n, path);
        htri_t exists = H5Lexists(file, prefix, H5P_DEFAULT);
        CHECK_HDF5(exists);
        if (!exists) return 0;
        if (!p) return 1;
    }
}

void checkpoint_make_group(checkpoint_file *f, const char *group) {
    if (link_exists(f->file, group)) return;
    hid_t g = HDF5_IO(H5Gcreate2(f->file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (g < 0) hdf5_fail("H5Gcreate2", __FILE__, __LINE__);
    CHECK_HDF5(H5Gclose(g));
}

int checkpoint_has_group(checkpoint_file *f, const char *group) { return link_exists(f->file, group); }

/* the object at `group` (created on demand when writing; -1 when reading and missing) */
static hid_t open_group(checkpoint_file *f, const char *group, int create) {
    if (create) checkpoint_make_group(f, group);
    else if (!link_exists(f->file, group)) return -1;
    hid_t g = H5Oopen(f->file, group, H5P_DEFAULT);
    CHECK_HDF5(g);
    return g;
}

void checkpoint_put_int(checkpoint_file *f, const char *group, const char *name, int64_t value) {
    hid_t g = open_group(f, group, 1);
    hdf5_write_int_attribute(g, name, value);
    CHECK_HDF5(H5Oclose(g));
}

void checkpoint_put_double(checkpoint_file *f, const char *group, const char *name, double value) {
    hid_t g = open_group(f, group, 1);
    hdf5_write_double_attribute(g, name, value);
    CHECK_HDF5(H5Oclose(g));
}

void checkpoint_put_string(checkpoint_file *f, const char *group, const char *name, const char *value) {
    hid_t g = open_group(f, group, 1);
    hdf5_write_string_attribute(g, name, value);
    CHECK_HDF5(H5Oclose(g));
}

int checkpoint_get_int(checkpoint_file *f, const char *group, const char *name, int64_t *value) {
    hid_t g = open_group(f, group, 0);
    if (g < 0) return -1;
    int status = hdf5_read_scalar_attribute(g, name, H5T_NATIVE_INT64, 0, value);
    CHECK_HDF5(H5Oclose(g));
    return status;
}

int checkpoint_get_double(checkpoint_file *f, const char *group, const char *name, double *value) {
    hid_t g = open_group(f, group, 0);
    if (g < 0) return -1;
    int status = hdf5_read_scalar_attribute(g, name, H5T_NATIVE_DOUBLE, 1, value);
    CHECK_HDF5(H5Oclose(g));
    return status;
}

char *checkpoint_get_string(checkpoint_file *f, const char *group, const char *name) {
    hid_t g = open_group(f, group, 0);
    if (g < 0) return NULL;
    char *value = hdf5_read_string_attribute(g, name);
    CHECK_HDF5(H5Oclose(g));
    return value;
}

/* ---- tensors ---- */

size_t tensor_part_elements(const tensor_part *part) {
    size_t n = 0;
    for (int i = 0; i < part->num_boxes; i++) n += (size_t)(part->boxes[i].rows * part->boxes[i].cols);
    return n;
}

void checkpoint_create_tensor(checkpoint_file *f, const char *path, int64_t rows, int64_t cols) {
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)cols};
    hid_t space = H5Screate_simple(cols ? 2 : 1, dims, NULL);
    CHECK_HDF5(space);
    hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    CHECK_HDF5(create);
    CHECK_HDF5(H5Pset_alloc_time(create, H5D_ALLOC_TIME_EARLY));
    CHECK_HDF5(H5Pset_fill_time(create, H5D_FILL_TIME_NEVER));
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    CHECK_HDF5(links);
    CHECK_HDF5(H5Pset_create_intermediate_group(links, 1));
    hid_t dataset = HDF5_IO(H5Dcreate2(f->file, path, H5T_IEEE_F32LE, space, links, create, H5P_DEFAULT));
    if (dataset < 0) hdf5_fail("H5Dcreate2", __FILE__, __LINE__);
    CHECK_HDF5(H5Dclose(dataset));
    CHECK_HDF5(H5Pclose(links));
    CHECK_HDF5(H5Pclose(create));
    CHECK_HDF5(H5Sclose(space));
}

int checkpoint_tensor_shape(checkpoint_file *f, const char *path, int64_t *rows, int64_t *cols) {
    if (!link_exists(f->file, path)) return -1;
    hid_t dataset = H5Dopen2(f->file, path, H5P_DEFAULT);
    CHECK_HDF5(dataset);
    hid_t space = H5Dget_space(dataset);
    CHECK_HDF5(space);
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    CHECK_HDF5(rank);
    *rows = rank >= 1 ? (int64_t)dims[0] : 1;
    *cols = rank >= 2 ? (int64_t)dims[1] : 0;
    if (rank > 2) *rows = -1; /* not a tensor of ours: the caller's shape check names it */
    CHECK_HDF5(H5Sclose(space));
    CHECK_HDF5(H5Dclose(dataset));
    return 0;
}

/* select the part's boxes in the dataset's file space and a matching 1-D memory space */
static void select_part(hid_t dataset, const tensor_part *part, hid_t *file_space, hid_t *memory_space) {
    *file_space = H5Dget_space(dataset);
    CHECK_HDF5(*file_space);
    int rank = H5Sget_simple_extent_ndims(*file_space);
    CHECK_HDF5(rank);
    size_t n = tensor_part_elements(part);
    hsize_t count = n ? (hsize_t)n : 1;
    *memory_space = H5Screate_simple(1, &count, NULL);
    CHECK_HDF5(*memory_space);
    if (n == 0) {
        CHECK_HDF5(H5Sselect_none(*file_space));
        CHECK_HDF5(H5Sselect_none(*memory_space));
        return;
    }
    for (int i = 0; i < part->num_boxes; i++) {
        const tensor_box *b = &part->boxes[i];
        hsize_t start[2] = {(hsize_t)b->row, (hsize_t)b->col};
        hsize_t size[2] = {(hsize_t)b->rows, (hsize_t)b->cols};
        if (rank == 1) { start[0] = (hsize_t)b->row; size[0] = (hsize_t)b->rows; }
        CHECK_HDF5(H5Sselect_hyperslab(*file_space, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start,
                                       NULL, size, NULL));
    }
}

static void transfer(checkpoint_file *f, const char *path, const tensor_part *part, float *data, int write) {
    hid_t dataset = H5Dopen2(f->file, path, H5P_DEFAULT);
    CHECK_HDF5(dataset);
    hid_t file_space, memory_space;
    select_part(dataset, part, &file_space, &memory_space);
    float dummy = 0.0f;
    float *buffer = tensor_part_elements(part) ? data : &dummy;
    if (write) CHECK_HDF5(HDF5_IO(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space, file_space, f->transfer, buffer)));
    else CHECK_HDF5(H5Dread(dataset, H5T_NATIVE_FLOAT, memory_space, file_space, f->transfer, buffer));
    f->bytes += sizeof(float) * tensor_part_elements(part);
    CHECK_HDF5(H5Sclose(memory_space));
    CHECK_HDF5(H5Sclose(file_space));
    CHECK_HDF5(H5Dclose(dataset));
}

void checkpoint_write_tensor(checkpoint_file *f, const char *path, const tensor_part *part, const float *data) {
    transfer(f, path, part, (float *)data, 1);
}

void checkpoint_read_tensor(checkpoint_file *f, const char *path, const tensor_part *part, float *data) {
    transfer(f, path, part, data, 0);
}
