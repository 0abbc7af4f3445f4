/* h5_poke.c: overwrite one float32 element of a contiguous HDF5 dataset in place, behind HDF5's
 * back (bit rot, a stray write): tests use it to damage one tensor of a checkpoint.
 * usage: h5_poke FILE DATASET INDEX VALUE   (INDEX in row-major order; VALUE a float or "nan",
 *                                            or u16:N for a uint16 element such as a token id)
 *        h5_poke FILE --strip-checksums      (the file as saved before checksums existed) */
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int strip_checksums(const char *path) {
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) return 2;
    int status = H5Adelete(file, "checksum") < 0 || H5Ldelete(file, "/checksums", H5P_DEFAULT) < 0;
    return H5Fclose(file) < 0 || status;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[2], "--strip-checksums")) return strip_checksums(argv[1]);
    if (argc != 5) { fprintf(stderr, "usage: h5_poke FILE DATASET INDEX VALUE\n"); return 2; }
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return 2;
    hid_t dataset = H5Dopen2(file, argv[2], H5P_DEFAULT);
    haddr_t offset = dataset >= 0 ? H5Dget_offset(dataset) : HADDR_UNDEF;
    if (dataset >= 0) H5Dclose(dataset);
    H5Fclose(file);
    if (offset == HADDR_UNDEF) { fprintf(stderr, "h5_poke: %s: no contiguous dataset %s\n", argv[1], argv[2]); return 2; }
    float value = strtof(argv[4], NULL);
    unsigned short token = (unsigned short)strtoul(argv[4] + 4, NULL, 10);
    int is_u16 = !strncmp(argv[4], "u16:", 4);
    size_t size = is_u16 ? sizeof token : sizeof value;
    int fd = open(argv[1], O_WRONLY);
    off_t at = (off_t)offset + (off_t)size * strtoll(argv[3], NULL, 10);
    int status = fd < 0 || pwrite(fd, is_u16 ? (void *)&token : (void *)&value, size, at) != (ssize_t)size;
    if (fd >= 0 && close(fd) != 0) status = 1;
    return status;
}
