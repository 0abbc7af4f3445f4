/* checkpoint_format_test.c: the checkpoint format module (io/checkpoint_format.h) in a
 * temporary folder: file names, the tracker's round trip and its refusals (naming the file),
 * the commit protocol (no .partial left, the tracker names the final file, a failed commit
 * keeps the previous tracker), folder creation, and the root attributes and their checks. */
#include "io/checkpoint_format.h"
#include "io/hdf5_attributes.h"
#include "tests/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* the whole content of a small file ("" when missing) */
static const char *content(const char *path) {
    static char text[256];
    text[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return text;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_names(void) {
    checkpoint_names names;
    char want[256], err[512] = "";
    int status = checkpoint_names_for(&names, dir, 100, err, sizeof err);
    snprintf(want, sizeof want, "%s/iter_0000100.h5", dir);
    int ok = status == 0 && !strcmp(names.file, want);
    snprintf(want, sizeof want, "%s/iter_0000100.h5.partial", dir);
    ok = ok && !strcmp(names.partial, want);
    snprintf(want, sizeof want, "%s/latest_checkpointed_iteration.txt", dir);
    ok = ok && !strcmp(names.tracker, want);
    tap_ok(ok, "iteration 100: iter_0000100.h5, its .partial, latest_checkpointed_iteration.txt (%s)", names.file);
    status = checkpoint_names_for(&names, dir, CHECKPOINT_RELEASE, err, sizeof err);
    snprintf(want, sizeof want, "%s/release.h5", dir);
    tap_ok(status == 0 && !strcmp(names.file, want), "a release is release.h5");
    char *long_dir = malloc(CHECKPOINT_PATH_MAX + 10);
    memset(long_dir, 'x', CHECKPOINT_PATH_MAX + 9);
    long_dir[CHECKPOINT_PATH_MAX + 9] = '\0';
    status = checkpoint_names_for(&names, long_dir, 1, err, sizeof err);
    const char *reason = strstr(err, "the checkpoint folder");
    tap_ok(status == -1 && reason, "a folder path that is too long is refused: ...%s", reason ? reason : err);
    free(long_dir);
}

static void test_tracker(void) {
    checkpoint_names names;
    char err[512] = "";
    int64_t iteration = -5;
    int status = checkpoint_tracker_read(dir, &iteration, err, sizeof err);
    tap_ok(status == CHECKPOINT_NO_TRACKER && strstr(err, "latest_checkpointed_iteration.txt: cannot read the tracker"),
           "no tracker: CHECKPOINT_NO_TRACKER, and a message naming it: %s", err);

    checkpoint_names_for(&names, dir, 42, err, sizeof err);
    status = checkpoint_tracker_write(&names, err, sizeof err);
    int round_trip = status == 0 && checkpoint_tracker_read(dir, &iteration, err, sizeof err) == 0 && iteration == 42;
    tap_ok(round_trip && !strcmp(content(names.tracker), "42") && !exists(names.tracker_tmp),
           "tracker round trip: 42 written as \"42\" (no newline, as Megatron), read back, no .tmp left");
    checkpoint_names_for(&names, dir, CHECKPOINT_RELEASE, err, sizeof err);
    status = checkpoint_tracker_write(&names, err, sizeof err);
    round_trip = status == 0 && checkpoint_tracker_read(dir, &iteration, err, sizeof err) == 0 &&
                 iteration == CHECKPOINT_RELEASE;
    tap_ok(round_trip && !strcmp(content(names.tracker), "release"), "tracker round trip: release");
    write_text(names.tracker, "  7\n");
    tap_ok(checkpoint_tracker_read(dir, &iteration, err, sizeof err) == 0 && iteration == 7,
           "white space around the iteration is ignored");

    const char *bad[] = {"latest\n", "-3", "12abc", "", "release2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(names.tracker, bad[i]);
        err[0] = '\0';
        status = checkpoint_tracker_read(dir, &iteration, err, sizeof err);
        tap_ok(status == -1 && strstr(err, names.tracker) && strstr(err, "expected an iteration number or 'release'"),
               "tracker holding '%.*s' is refused naming the file: %s", (int)strcspn(bad[i], "\n"), bad[i], err);
    }
    write_text(names.tracker, "latest\n");
    checkpoint_tracker_read(dir, &iteration, err, sizeof err);
    tap_ok(strstr(err, "found 'latest'") != NULL, "the message quotes what the tracker holds");
}

static void test_commit(void) {
    checkpoint_names names;
    char err[512] = "";
    checkpoint_names_for(&names, dir, 3, err, sizeof err);
    write_text(names.partial, "tensors");
    int status = checkpoint_commit(&names, err, sizeof err);
    int64_t iteration = -5;
    tap_ok(status == 0 && !exists(names.partial) && !strcmp(content(names.file), "tensors"),
           "commit renames the .partial to %s and leaves no .partial", strrchr(names.file, '/') + 1);
    tap_ok(checkpoint_tracker_read(dir, &iteration, err, sizeof err) == 0 && iteration == 3 &&
               !exists(names.tracker_tmp),
           "after the commit the tracker names the final file's iteration");

    checkpoint_names next;
    checkpoint_names_for(&next, dir, 4, err, sizeof err);
    status = checkpoint_commit(&next, err, sizeof err); /* no iter_0000004.h5.partial */
    tap_ok(status == -1 && strstr(err, next.partial) && checkpoint_tracker_read(dir, &iteration, err, sizeof err) == 0 &&
               iteration == 3 && !exists(next.file),
           "a commit that fails names the .partial and leaves the tracker on the previous checkpoint");
}

static void test_directories(void) {
    char nested[256], err[512] = "", blocked[256];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    tap_ok(checkpoint_make_directory(nested, err, sizeof err) == 0 && exists(nested) &&
               checkpoint_make_directory(nested, err, sizeof err) == 0,
           "checkpoint_make_directory creates missing parents, and accepts an existing folder");
    snprintf(blocked, sizeof blocked, "%s/a/file", dir);
    write_text(blocked, "x");
    snprintf(nested, sizeof nested, "%s/a/file/d", dir);
    tap_ok(checkpoint_make_directory(nested, err, sizeof err) == -1 && strstr(err, "cannot create directory") &&
               strstr(err, "a/file/d"),
           "a folder under a regular file is refused, naming it: %s", err);
}

static void test_header(void) {
    char path[256], err[512] = "";
    snprintf(path, sizeof path, "%s/header.h5", dir);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    checkpoint_header_write(file, CHECKPOINT_RELEASE, 0, 0);
    int64_t iteration = -5;
    char *format = hdf5_read_string_attribute(file, "format");
    tap_ok(format && !strcmp(format, CHECKPOINT_FORMAT_NAME) &&
               hdf5_read_scalar_attribute(file, "iteration", H5T_NATIVE_INT64, 0, &iteration) == 0 && iteration == 0,
           "the header names the format; a release stores iteration 0");
    free(format);
    checkpoint_header_status status = checkpoint_header_check(file, path, err, sizeof err);
    tap_ok(status == CHECKPOINT_INCOMPLETE && strstr(err, "header.h5 is incomplete"),
           "complete = 0 until the save ends: %s", err);
    checkpoint_header_set_complete(file);
    tap_ok(checkpoint_header_check(file, path, err, sizeof err) == CHECKPOINT_HEADER_OK, "complete = 1 passes");
    hdf5_write_int_attribute(file, "format_version", CHECKPOINT_FORMAT_VERSION + 1);
    status = checkpoint_header_check(file, path, err, sizeof err);
    tap_ok(status == CHECKPOINT_OTHER_VERSION && strstr(err, "format version 2"), "another version: %s", err);
    hdf5_write_string_attribute(file, "format", "something else");
    status = checkpoint_header_check(file, path, err, sizeof err);
    tap_ok(status == CHECKPOINT_NOT_OURS && strstr(err, "is not a megatron-c checkpoint"), "another format: %s", err);
    H5Fclose(file);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/checkpoint_format_test.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_tracker();
    test_commit();
    test_directories();
    test_header();
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    if (system(command) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
