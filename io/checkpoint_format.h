/* checkpoint_format.h: the one definition of the checkpoint format around its tensors
 * (io/CHECKPOINT_FORMAT.md): the format constants, the file names of a checkpoint, the tracker
 * (reading and writing it), the save folder, the commit protocol and the root attributes with
 * their checks. The training's collective save and load (app/checkpoint/) and the serial reader
 * and writer of the offline tools (io/checkpoint_serial.c) both go through it.
 * Failures come back as -1 with one line in err naming the file (app/core/error.h), so that
 * each caller chooses user_error or FATAL; HDF5 failures on files being written abort. */
#ifndef CHECKPOINT_FORMAT_H
#define CHECKPOINT_FORMAT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#define CHECKPOINT_FORMAT_NAME "megatron-c checkpoint"
#define CHECKPOINT_TRACKER_NAME "latest_checkpointed_iteration.txt"
/* the groups of the tensors: the model's fp32 weights and Adam's moments, each tensor under
 * its Megatron name (/model/decoder.layers.0.mlp.linear_fc1.weight) */
#define CHECKPOINT_MODEL_GROUP "/model"
#define CHECKPOINT_EXP_AVG_GROUP "/optimizer/exp_avg"
#define CHECKPOINT_EXP_AVG_SQ_GROUP "/optimizer/exp_avg_sq"
/* the iteration of a converted model: file release.h5, tracker "release", root iteration 0 */
#define CHECKPOINT_RELEASE ((int64_t)-1)
enum {
    CHECKPOINT_FORMAT_VERSION = 1,
    CHECKPOINT_PATH_MAX = 4096,  /* longest checkpoint folder */
    CHECKPOINT_NO_TRACKER = 1,   /* checkpoint_tracker_read: the folder has no tracker */
};

/* every file name of one checkpoint */
typedef struct checkpoint_names {
    int64_t iteration;                            /* or CHECKPOINT_RELEASE */
    char dir[CHECKPOINT_PATH_MAX];
    char file[CHECKPOINT_PATH_MAX + 32];          /* DIR/iter_NNNNNNN.h5 or DIR/release.h5 */
    char partial[CHECKPOINT_PATH_MAX + 48];       /* file + ".partial": the file while written */
    char tracker[CHECKPOINT_PATH_MAX + 48];       /* DIR/latest_checkpointed_iteration.txt */
    char tracker_tmp[CHECKPOINT_PATH_MAX + 64];   /* tracker + ".tmp": the tracker while replaced */
} checkpoint_names;

/* the names of iteration `iteration` (or CHECKPOINT_RELEASE) of folder dir; -1 when dir is too
 * long */
int checkpoint_names_for(checkpoint_names *names, const char *dir, int64_t iteration, char *err,
                         size_t errlen);

/* the iteration dir's tracker names (CHECKPOINT_RELEASE for "release"; white space around it is
 * ignored). Returns 0; CHECKPOINT_NO_TRACKER when dir has no tracker; -1 when the tracker
 * cannot be read or holds something else. err says why whenever it does not return 0. */
int checkpoint_tracker_read(const char *dir, int64_t *iteration, char *err, size_t errlen);

/* names->tracker := the bare iteration or "release", no newline (as Megatron writes it),
 * replaced atomically: tracker_tmp written and fsynced, renamed over it, the folder fsynced */
int checkpoint_tracker_write(const checkpoint_names *names, char *err, size_t errlen);

/* create dir and its missing parents */
int checkpoint_make_directory(const char *dir, char *err, size_t errlen);

/* The commit protocol, once names->partial is complete and closed: fsync it, rename it to
 * names->file, fsync the folder, then point the tracker at it (checkpoint_tracker_write).
 * On failure the .partial (or the tracker's .tmp) is removed; the tracker still names the
 * previous checkpoint. Single process: in a parallel save one rank commits. */
int checkpoint_commit(const checkpoint_names *names, char *err, size_t errlen);

/* the root attributes of a new checkpoint: format, format_version, complete = 0, iteration
 * (CHECKPOINT_RELEASE is stored as 0), consumed_train_samples, consumed_valid_samples.
 * On a parallel file every rank calls it (collective metadata). */
void checkpoint_header_write(hid_t file, int64_t iteration, int64_t consumed_train_samples,
                             int64_t consumed_valid_samples);
/* complete = 1: the last thing a save writes into the file */
void checkpoint_header_set_complete(hid_t file);

/* why checkpoint_header_check refused a file */
typedef enum {
    CHECKPOINT_HEADER_OK = 0,
    CHECKPOINT_NOT_OURS = -1,        /* no format attribute, or another one */
    CHECKPOINT_OTHER_VERSION = -2,   /* format_version missing or not ours */
    CHECKPOINT_INCOMPLETE = -3,      /* complete missing or not 1: the save did not finish */
} checkpoint_header_status;

/* checks format, format_version and complete = 1 of the open file `path`; returns
 * CHECKPOINT_HEADER_OK, or the first check that failed with a message naming path */
checkpoint_header_status checkpoint_header_check(hid_t file, const char *path, char *err, size_t errlen);

#endif
