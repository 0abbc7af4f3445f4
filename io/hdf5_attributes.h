/* hdf5_attributes.h: scalar attributes of HDF5 objects (files, groups, datasets), as the corpus
 * and the serial checkpoint reader/writer store them: 64-bit integers, doubles, and fixed-length
 * UTF-8 strings. Writers replace an existing attribute and abort with the HDF5 error stack on
 * failure (CHECK_HDF5); readers return -1 / NULL for a missing or mistyped attribute and never
 * abort, so callers can name what is wrong in the file. */
#ifndef MTC_HDF5_ATTRIBUTES_H
#define MTC_HDF5_ATTRIBUTES_H

#include <hdf5.h>
#include <stdint.h>

void hdf5_write_int_attribute(hid_t object, const char *name, int64_t value);
void hdf5_write_double_attribute(hid_t object, const char *name, double value);
void hdf5_write_string_attribute(hid_t object, const char *name, const char *value);

/* a scalar integer attribute (or, with allow_float, a floating-point one) read as memtype into
 * out: 0, or -1 when it is missing, not scalar or of another class */
int hdf5_read_scalar_attribute(hid_t object, const char *name, hid_t memtype, int allow_float, void *out);
/* malloc'd value of a string attribute (fixed or variable length), or NULL */
char *hdf5_read_string_attribute(hid_t object, const char *name);

#endif
