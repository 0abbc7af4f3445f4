/* hdf5_lock.h: one process-wide mutex around HDF5 calls. The HDF5 library built with parallel
 * I/O is not thread-safe (h5pcc -showconfig: "Threadsafety: no"): two threads inside HDF5 at
 * once corrupt its global state. Since --async-save writes checkpoints from a background thread
 * (app/checkpoint/async_checkpoint.h) while the training thread reads HDF5 corpora, both take this
 * lock around each of their HDF5 calls (the writer per tensor piece, the corpus reader per read).
 * The training thread holds it only for local, non-collective reads, which always finish, so the
 * writer's collective calls made under the lock cannot deadlock with it; a corpus read waits at
 * most for one piece of a checkpoint to be written (CHECKPOINT_PIECE_ELEMENTS). Uncontended
 * (synchronous saves), a lock costs tens of nanoseconds. */
#ifndef HDF5_LOCK_H
#define HDF5_LOCK_H

void hdf5_lock(void);
void hdf5_unlock(void);

#endif
