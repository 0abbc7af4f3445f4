/* hdf5_check.h: the HDF5 error-checking macro shared by every file in io/ (one macro per
 * library, see app/error.h): a negative herr_t/hid_t aborts the job naming the call. */
#ifndef HDF5_CHECK_H
#define HDF5_CHECK_H

#include <stdint.h>

#include "app/core/error.h"

/* an HDF5 call returning a negative herr_t/hid_t is a bug or a system failure: abort the job
 * naming the call (HDF5 prints its own error stack just before) */
#define CHECK_HDF5(call) do { \
        if ((int64_t)(call) < 0) FATAL("HDF5 call failed: %s", #call); \
    } while (0)

#endif
