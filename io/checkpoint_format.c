/* checkpoint_format.c: see checkpoint_format.h. */
#include "io/checkpoint_format.h"
#include "app/core/error.h"
#include "io/hdf5_attributes.h"
#include "io/io_fault.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- names ---- */

int checkpoint_names_for(checkpoint_names *names, const char *dir, int64_t iteration, char *err,
                         size_t errlen) {
    memset(names, 0, sizeof *names);
    if (strlen(dir) >= sizeof names->dir)
        return error_format(err, errlen, "%.64s...: the checkpoint folder's path is longer than %d characters",
                            dir, CHECKPOINT_PATH_MAX - 1);
    if (iteration < 0 && iteration != CHECKPOINT_RELEASE)
        return error_format(err, errlen, "%s: no checkpoint has the negative iteration %lld", dir,
                            (long long)iteration);
    names->iteration = iteration;
    snprintf(names->dir, sizeof names->dir, "%s", dir);
    if (iteration == CHECKPOINT_RELEASE) snprintf(names->file, sizeof names->file, "%s/release.h5", dir);
    else snprintf(names->file, sizeof names->file, "%s/iter_%07lld.h5", dir, (long long)iteration);
    snprintf(names->partial, sizeof names->partial, "%s.partial", names->file);
    snprintf(names->tracker, sizeof names->tracker, "%s/%s", dir, CHECKPOINT_TRACKER_NAME);
    snprintf(names->tracker_tmp, sizeof names->tracker_tmp, "%s.tmp", names->tracker);
    return 0;
}

/* ---- the tracker ---- */

int checkpoint_tracker_read(const char *dir, int64_t *iteration, char *err, size_t errlen) {
    checkpoint_names names;
    if (checkpoint_names_for(&names, dir, 0, err, errlen) != 0) return -1;
    FILE *f = fopen(names.tracker, "r");
    if (!f) {
        int missing = errno == ENOENT || errno == ENOTDIR;
        error_format(err, errlen, "%s: cannot read the tracker (%s): is %s a checkpoint folder?", names.tracker,
                     strerror(errno), dir);
        return missing ? CHECKPOINT_NO_TRACKER : -1;
    }
    char text[64];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) return error_format(err, errlen, "%s: cannot read the tracker", names.tracker);
    text[n] = '\0';
    char *start = text, *end = text + strlen(text);
    while (*start && isspace((unsigned char)*start)) start++;
    while (end > start && isspace((unsigned char)end[-1])) *--end = '\0';
    if (!strcmp(start, "release")) {
        *iteration = CHECKPOINT_RELEASE;
        return 0;
    }
    char *rest = NULL;
    errno = 0;
    long long value = strtoll(start, &rest, 10);
    if (!*start || *rest || errno || value < 0)
        return error_format(err, errlen, "%s: expected an iteration number or 'release', found '%s'", names.tracker,
                            start);
    *iteration = value;
    return 0;
}

/* fsync a file or a folder; EINVAL (nothing to flush on this file system) counts as done */
static int fsync_path(const char *path) {
    if (io_fault_hit()) return -1;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int status = io_fault_hit() || (fsync(fd) != 0 && errno != EINVAL) ? -1 : 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return status;
}

int checkpoint_tracker_write(const checkpoint_names *names, char *err, size_t errlen) {
    char text[32];
    if (names->iteration == CHECKPOINT_RELEASE) snprintf(text, sizeof text, "release");
    else snprintf(text, sizeof text, "%lld", (long long)names->iteration);
    FILE *f = io_fault_hit() ? NULL : fopen(names->tracker_tmp, "w");
    if (!f) return error_format(err, errlen, "%s: cannot write the tracker: %s", names->tracker_tmp, strerror(errno));
    int ok = !io_fault_hit() && fputs(text, f) >= 0 && !io_fault_hit() && fflush(f) == 0 && !io_fault_hit() &&
             (fsync(fileno(f)) == 0 || errno == EINVAL);
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(names->tracker_tmp);
        return error_format(err, errlen, "%s: cannot write the tracker: %s", names->tracker_tmp, strerror(saved));
    }
    if (io_fault_hit() || rename(names->tracker_tmp, names->tracker) != 0) {
        saved = errno;
        unlink(names->tracker_tmp);
        return error_format(err, errlen, "cannot rename %s to %s: %s", names->tracker_tmp, names->tracker,
                            strerror(saved));
    }
    if (fsync_path(names->dir) != 0)
        return error_format(err, errlen, "%s: cannot flush the folder: %s", names->dir, strerror(errno));
    return 0;
}

/* ---- the folder and the commit ---- */

int checkpoint_make_directory(const char *dir, char *err, size_t errlen) {
    char path[CHECKPOINT_PATH_MAX];
    if (strlen(dir) >= sizeof path)
        return error_format(err, errlen, "%.64s...: the checkpoint folder's path is longer than %d characters",
                            dir, CHECKPOINT_PATH_MAX - 1);
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return error_format(err, errlen, "cannot create directory %s: %s", path, strerror(errno));
        *p = c;
        if (c == '\0') return 0;
    }
}

int checkpoint_commit(const checkpoint_names *names, char *err, size_t errlen) {
    if (fsync_path(names->partial) != 0) {
        int saved = errno;
        unlink(names->partial);
        return error_format(err, errlen, "%s: cannot flush it to disk: %s", names->partial, strerror(saved));
    }
    if (io_fault_hit() || rename(names->partial, names->file) != 0) {
        int saved = errno;
        unlink(names->partial);
        return error_format(err, errlen, "cannot rename %s to %s: %s", names->partial, names->file,
                            strerror(saved));
    }
    if (fsync_path(names->dir) != 0)
        return error_format(err, errlen, "%s: cannot flush the folder: %s", names->dir, strerror(errno));
    return checkpoint_tracker_write(names, err, errlen);
}

/* ---- root attributes ---- */

void checkpoint_header_write(hid_t file, int64_t iteration, int64_t consumed_train_samples,
                             int64_t consumed_valid_samples) {
    hdf5_write_string_attribute(file, "format", CHECKPOINT_FORMAT_NAME);
    hdf5_write_int_attribute(file, "format_version", CHECKPOINT_FORMAT_VERSION);
    hdf5_write_int_attribute(file, "complete", 0);
    hdf5_write_int_attribute(file, "iteration", iteration == CHECKPOINT_RELEASE ? 0 : iteration);
    hdf5_write_int_attribute(file, "consumed_train_samples", consumed_train_samples);
    hdf5_write_int_attribute(file, "consumed_valid_samples", consumed_valid_samples);
}

void checkpoint_header_set_complete(hid_t file) { hdf5_write_int_attribute(file, "complete", 1); }

checkpoint_header_status checkpoint_header_check(hid_t file, const char *path, char *err, size_t errlen) {
    char *format = hdf5_read_string_attribute(file, "format");
    int ours = format && !strcmp(format, CHECKPOINT_FORMAT_NAME);
    if (!ours)
        error_format(err, errlen, "%s is not a megatron-c checkpoint (root attribute 'format' is '%s')", path,
                     format ? format : "");
    free(format);
    if (!ours) return CHECKPOINT_NOT_OURS;
    int64_t version = 0, complete = 0;
    if (hdf5_read_scalar_attribute(file, "format_version", H5T_NATIVE_INT64, 0, &version) != 0 ||
        version != CHECKPOINT_FORMAT_VERSION) {
        error_format(err, errlen, "%s has format version %lld; this build reads version %d", path,
                     (long long)version, CHECKPOINT_FORMAT_VERSION);
        return CHECKPOINT_OTHER_VERSION;
    }
    if (hdf5_read_scalar_attribute(file, "complete", H5T_NATIVE_INT64, 0, &complete) != 0 || complete != 1) {
        error_format(err, errlen, "%s is incomplete (its save did not finish): refusing to load it", path);
        return CHECKPOINT_INCOMPLETE;
    }
    return CHECKPOINT_HEADER_OK;
}
