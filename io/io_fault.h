/* io_fault.h: I/O error injection for tests (SQLite's method): every write, fsync, rename and
 * HDF5 call of a checkpoint save asks io_fault_hit() first, and the k-th one fails as if the
 * system had returned an error. Compiled in always; costs one branch unless the environment
 * asks for it:
 *   MTC_FAIL_IO_CALL=k     the k-th call (1-based, counted on each rank from the save's start)
 *                          fails; 0 only counts, and the save's end prints
 *                          "io_fault: N calls on rank R" to stderr
 *   MTC_FAIL_IO_RANK=r     the rank whose call fails (default 0)
 *   MTC_FAIL_IO_ERRNO=E    the error: ENOSPC (default), EDQUOT, EROFS or EIO */
#ifndef IO_FAULT_H
#define IO_FAULT_H

/* a checkpoint save starts / ends on this rank (calls are counted in between) */
void io_fault_save_begin(int rank);
void io_fault_save_end(void);

/* 1 when the call about to be made must fail (errno is then set to the injected error) */
int io_fault_hit(void);

/* the injected errno of the call that io_fault_hit failed, 0 when none */
int io_fault_errno(void);

#endif
