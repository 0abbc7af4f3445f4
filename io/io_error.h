/* io_error.h: a failed file-system or HDF5 call reported as one line that names the file, the
 * operation and the system's reason ("No space left on device"), once per job: rank 0 reports
 * at once, other ranks after a pause that lets rank 0's abort end them first, so a collective
 * failure prints one line, not one per rank. HDF5's own error stack is off unless
 * hdf5_errors_setup(1) (--hdf5-debug, or MTC_HDF5_DEBUG=1) turns it on. */
#ifndef IO_ERROR_H
#define IO_ERROR_H

/* HDF5's automatic error-stack printing: off, or on with debug (or MTC_HDF5_DEBUG=1) */
void hdf5_errors_setup(int debug);
int hdf5_errors_debug(void);

/* the file being written or read, named by failures that have no file of their own (a failed
 * HDF5 call inside a checkpoint save); NULL clears it */
void io_error_set_file(const char *path, const char *activity);

/* the system error behind the HDF5 call that just failed, read from HDF5's error stack
 * ("errno = 28", or a strerror text in an MPI-IO message); EIO when none is named */
int hdf5_failure_errno(void);

/* "<program>: error: <activity> <file>: <operation> failed: <strerror>" once per job, then the
 * job ends (MPI_Abort) */
void io_fail(const char *file, const char *operation, int errnum) __attribute__((noreturn));

/* a message already formatted, reported the same way */
void io_fail_line(const char *message) __attribute__((noreturn));

/* a failed HDF5 call (the CHECK_HDF5 macro of io/hdf5_check.h): the call's function name, the
 * current file (io_error_set_file), the errno from HDF5's stack; source location when there is
 * no current file */
void hdf5_fail(const char *call, const char *source, int line) __attribute__((noreturn));

#endif
