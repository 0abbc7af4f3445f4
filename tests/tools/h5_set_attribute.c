/* h5_set_attribute.c: overwrite an int64 attribute of an HDF5 file's root group (tests use it to
 * forge a checkpoint whose save "did not finish": complete = 0).
 * usage: h5_set_attribute FILE NAME VALUE */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: h5_set_attribute FILE NAME VALUE\n"); return 2; }
    int64_t value = strtoll(argv[3], NULL, 10);
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) return 2;
    if (H5Aexists(file, argv[2]) > 0) H5Adelete(file, argv[2]);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = H5Acreate2(file, argv[2], H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    int status = attribute < 0 || H5Awrite(attribute, H5T_NATIVE_INT64, &value) < 0;
    H5Aclose(attribute);
    H5Sclose(space);
    return H5Fclose(file) < 0 || status ? 1 : 0;
}
