/* local_checkpoint_file.h: the files of node-local checkpoints (--non-persistent-ckpt-type local,
 * app/checkpoint/local_checkpoint.h). Each rank keeps a folder of its own under the local
 * checkpoint folder, DIR/rank_RRRRR/, holding its own shard of an iteration
 * (iter_NNNNNNN.rank_RRRRR.local, RRRRR its own rank) and the replicas it keeps for peers on other
 * nodes (the same name with the peer's rank). A file is an opaque payload followed by a trailer of
 * 24 bytes: the magic "MTCLOCAL", the payload's length and its XXH3-64 (little-endian uint64s).
 *
 * Commit protocol of one file: written as NAME.partial, fsynced, renamed to NAME, the folder
 * fsynced; so a file that exists under its name is whole, and a save killed at any moment leaves
 * at most a .partial (ignored, removed by the next save). Reading checks the trailer: a truncated
 * or damaged file is reported as such, never loaded. Failures return -1 with one line in err
 * naming the file (app/core/error.h). */
#ifndef LOCAL_CHECKPOINT_FILE_H
#define LOCAL_CHECKPOINT_FILE_H

#include <stddef.h>
#include <stdint.h>

#define LOCAL_CHECKPOINT_MAGIC "MTCLOCAL"
enum { LOCAL_CHECKPOINT_PATH_MAX = 4200 };

/* DIR/rank_RRRRR (the folder rank `holder` keeps) */
void local_checkpoint_folder(char *out, size_t cap, const char *dir, int holder);
/* DIR/rank_HHHHH/iter_NNNNNNN.rank_OOOOO.local: owner's shard of iteration, kept by holder */
void local_checkpoint_path(char *out, size_t cap, const char *dir, int holder, int64_t iteration, int owner);
/* parses a file name of that form (not a .partial); 0 on success */
int local_checkpoint_parse_name(const char *name, int64_t *iteration, int *owner);

/* writes payload[bytes] to path by the commit protocol above, creating the folder when needed */
int local_checkpoint_file_write(const char *path, const void *payload, size_t bytes, char *err, size_t errlen);
/* reads and checks path; *payload is malloc'ed (free it). -1 with err when it is absent ("no
 * such file" in err, *missing = 1) or damaged (*missing = 0). */
int local_checkpoint_file_read(const char *path, void **payload, size_t *bytes, int *missing, char *err,
                               size_t errlen);

/* The iterations rank holder's folder has files of (own or replicas, .partial left out), newest
 * first, at most cap of them, duplicates merged; returns the count (0 when the folder is absent). */
int local_checkpoint_list_iterations(const char *dir, int holder, int64_t *iterations, int cap);
/* removes, in holder's folder, the files of every iteration other than keep (and every .partial);
 * returns the number of files that could not be removed */
int local_checkpoint_remove_others(const char *dir, int holder, int64_t keep);

#endif
