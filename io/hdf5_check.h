/* hdf5_check.h: the HDF5 error-checking macro shared by every file in io/ (one macro per
 * library, see app/core/error.h): a negative herr_t/hid_t ends the job with one line naming the
 * operation, the file being written (io/io_error.h) and the system's reason. Calls that write
 * (HDF5_IO) may also be failed on purpose by the test hook io/io_fault.h during a save. */
#ifndef HDF5_CHECK_H
#define HDF5_CHECK_H

#include <stdint.h>

#include "app/core/error.h"
#include "io/io_error.h"
#include "io/io_fault.h"

#define CHECK_HDF5(call) do { \
        if ((int64_t)(call) < 0) hdf5_fail(#call, __FILE__, __LINE__); \
    } while (0)

/* an HDF5 call that writes to the file: the fault hook (io/io_fault.h) may fail it instead */
#define HDF5_IO(call) (io_fault_hit() ? -1 : (int64_t)(call))

#endif
