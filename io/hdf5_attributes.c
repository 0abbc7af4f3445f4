/* hdf5_attributes.c: see hdf5_attributes.h. */
#include "io/hdf5_attributes.h"
#include "io/hdf5_check.h"

#include <stdlib.h>
#include <string.h>

/* a new scalar attribute of file type ftype (an existing one of that name is replaced) */
static void write_scalar(hid_t object, const char *name, hid_t ftype, hid_t memtype, const void *value) {
    hid_t space = H5Screate(H5S_SCALAR);
    CHECK_HDF5(space);
    if (H5Aexists(object, name) > 0) CHECK_HDF5(H5Adelete(object, name));
    hid_t attr = HDF5_IO(H5Acreate2(object, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT));
    if (attr < 0) hdf5_fail("H5Acreate2", __FILE__, __LINE__);
    if (HDF5_IO(H5Awrite(attr, memtype, value)) < 0) hdf5_fail("H5Awrite", __FILE__, __LINE__);
    CHECK_HDF5(H5Aclose(attr));
    CHECK_HDF5(H5Sclose(space));
}

void hdf5_write_int_attribute(hid_t object, const char *name, int64_t value) {
    write_scalar(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void hdf5_write_double_attribute(hid_t object, const char *name, double value) {
    write_scalar(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void hdf5_write_string_attribute(hid_t object, const char *name, const char *value) {
    hid_t type = H5Tcopy(H5T_C_S1);
    CHECK_HDF5(type);
    CHECK_HDF5(H5Tset_size(type, strlen(value) + 1));
    CHECK_HDF5(H5Tset_strpad(type, H5T_STR_NULLTERM));
    CHECK_HDF5(H5Tset_cset(type, H5T_CSET_UTF8));
    write_scalar(object, name, type, type, value);
    CHECK_HDF5(H5Tclose(type));
}

int hdf5_read_scalar_attribute(hid_t object, const char *name, hid_t memtype, int allow_float, void *out) {
    if (H5Aexists(object, name) <= 0) return -1;
    hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
    if (attr < 0) return -1;
    hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    int ok = (cls == H5T_INTEGER || (allow_float && cls == H5T_FLOAT)) && space >= 0 &&
             H5Sget_simple_extent_npoints(space) == 1 && H5Aread(attr, memtype, out) >= 0;
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Aclose(attr);
    return ok ? 0 : -1;
}

char *hdf5_read_string_attribute(hid_t object, const char *name) {
    if (H5Aexists(object, name) <= 0) return NULL;
    hid_t attr = H5Aopen(object, name, H5P_DEFAULT);
    if (attr < 0) return NULL;
    char *value = NULL;
    hid_t type = H5Aget_type(attr);
    if (type >= 0 && H5Tget_class(type) == H5T_STRING) {
        hid_t memtype = H5Tcopy(H5T_C_S1);
        H5Tset_cset(memtype, H5Tget_cset(type));  /* HDF5 does not convert between charsets */
        if (H5Tis_variable_str(type) > 0) {
            char *vlen = NULL;
            H5Tset_size(memtype, H5T_VARIABLE);
            if (H5Aread(attr, memtype, &vlen) >= 0 && vlen) {
                value = strdup(vlen);
                H5free_memory(vlen);
            }
        } else {
            size_t size = H5Tget_size(type);
            H5Tset_size(memtype, size + 1);
            H5Tset_strpad(memtype, H5T_STR_NULLTERM);
            value = calloc(size + 2, 1);
            if (value && H5Aread(attr, memtype, value) < 0) { free(value); value = NULL; }
        }
        H5Tclose(memtype);
    }
    if (type >= 0) H5Tclose(type);
    H5Aclose(attr);
    return value;
}
