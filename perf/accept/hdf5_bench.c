/* hdf5_bench.c: parallel-HDF5 write and read bandwidth through the checkpoint layer
 * (io/checkpoint_file.h), the checkpoint-I/O check of the cluster acceptance suite.
 *
 *   mpiexec -n R perf/accept/hdf5_bench [--dir DIR] [--mib-per-rank M] [--io collective|independent]
 *                                       [--repeat K] [--keep]
 *                                       [--no-drop-caches]
 *
 * One fp32 dataset of R*M MiB (rows of 1 MiB) in one file, as a checkpoint tensor is stored: each
 * rank writes its own block of rows (a hyperslab) in one transfer, collective by default (MPI-IO
 * two-phase; --io independent lets each rank write its piece directly, the checkpoint default).
 * Write time runs from the file's creation to the file closed and fsynced on every rank; then
 * every rank asks the kernel to drop the file's cached pages (posix_fadvise DONTNEED; as root
 * also /proc/sys/vm/drop_caches unless --no-drop-caches), so reads come from the file system where it allows; read time
 * runs from opening to the last element in memory. Bandwidth = all bytes / the slowest rank's
 * time (GB = 1e9 bytes); the best of K repeats is reported. Every element read is compared with
 * what was written (a function of its global index).
 * RESULT lines: hdf5_write_gbs, hdf5_read_gbs, hdf5_wrong. */
#include "perf/accept/bench_common.h"
#include "io/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#define ROW_FLOATS ((int64_t)1 << 18) /* 1 MiB rows */

static float expected(int64_t global_index) { return (float)(global_index % 16777213); }

/* fsync the file and drop its cached pages on this rank; returns 1 when the whole page cache was dropped */
static int flush_and_drop(const char *path, int local_rank, int drop_all) {
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "cannot open %s to fsync it", path);
    CHECK(fsync(fd) == 0, "fsync of %s failed", path);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    int dropped = 0;
    if (local_rank == 0 && drop_all) {
        FILE *drop = fopen("/proc/sys/vm/drop_caches", "w");
        if (drop) {
            dropped = fputs("1\n", drop) >= 0;
            dropped = (fclose(drop) == 0) && dropped;
        }
    }
    return dropped;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    program_name = "hdf5_bench";
    kernels_set_error_handler(error_report_fatal);
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", *io = "collective", *value;
    int mib = 256, repeat = 2, keep = 0, drop_all = 1;
    for (int i = 1; i < argc; i++) {
        if (bench_flag(argc, argv, &i, "--dir", &dir)) continue;
        if (bench_flag(argc, argv, &i, "--io", &io)) continue;
        if (bench_flag(argc, argv, &i, "--mib-per-rank", &value)) { mib = atoi(value); continue; }
        if (bench_flag(argc, argv, &i, "--repeat", &value)) { repeat = atoi(value); continue; }
        if (strcmp(argv[i], "--keep") == 0) { keep = 1; continue; }
        if (strcmp(argv[i], "--no-drop-caches") == 0) { drop_all = 0; continue; }
        user_error("unknown argument '%s' (usage: hdf5_bench [--dir DIR] [--mib-per-rank M] [--io collective|independent] [--repeat K] [--keep] [--no-drop-caches])", argv[i]);
    }
    if (mib < 1 || repeat < 1) user_error("--mib-per-rank and --repeat must be at least 1");
    if (strcmp(io, "collective") != 0 && strcmp(io, "independent") != 0) user_error("--io is collective or independent, not '%s'", io);
    int collective = strcmp(io, "collective") == 0;
    int rank, size, local_rank, nodes;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_placement(&local_rank, &nodes);

    char path[4096];
    int job = (int)getpid();
    CHECK_MPI(MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD));
    snprintf(path, sizeof path, "%s/accept-hdf5-bench.%d.h5", dir, job);
    int64_t rows_per_rank = mib;
    size_t elements = (size_t)(rows_per_rank * ROW_FLOATS);
    float *data = malloc(sizeof(float) * elements);
    CHECK(data, "out of host memory for %d MiB", mib);
    int64_t first = (int64_t)rank * rows_per_rank * ROW_FLOATS;
    tensor_part part = {1, {{(int64_t)rank * rows_per_rank, 0, rows_per_rank, ROW_FLOATS}}};
    double total_bytes = (double)size * (double)elements * sizeof(float);
    if (rank == 0)
        printf("# parallel HDF5 (io/checkpoint_file.c, %s transfers): %d ranks on %d nodes, %d MiB per rank, "
               "%.3f GB in %s, best of %d\n", io, size, nodes, mib, total_bytes / 1e9, path, repeat);
    double best_write = 0, best_read = 0;
    long long wrong_total = 0;
    int all_dropped = 1;
    for (int r = 0; r < repeat; r++) {
        for (size_t i = 0; i < elements; i++) data[i] = expected(first + (int64_t)i);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = bench_now();
        checkpoint_file f;
        checkpoint_file_create(&f, path, MPI_COMM_WORLD, collective);
        checkpoint_create_tensor(&f, "/bench/data", (int64_t)size * rows_per_rank, ROW_FLOATS);
        checkpoint_write_tensor(&f, "/bench/data", &part, data);
        checkpoint_file_close(&f);
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0, "cannot open %s to fsync it", path);
        CHECK(fsync(fd) == 0, "fsync of %s failed", path);
        close(fd);
        double write_seconds = bench_now() - t0, write_max;
        CHECK_MPI(MPI_Allreduce(&write_seconds, &write_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        int dropped = flush_and_drop(path, local_rank, drop_all), dropped_all;
        if (local_rank != 0) dropped = 1;
        CHECK_MPI(MPI_Allreduce(&dropped, &dropped_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        all_dropped &= dropped_all;

        memset(data, 0, sizeof(float) * elements);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        t0 = bench_now();
        char err[256];
        CHECK(checkpoint_file_open(&f, path, MPI_COMM_WORLD, collective, err, sizeof err) == 0, "%s", err);
        checkpoint_read_tensor(&f, "/bench/data", &part, data);
        checkpoint_file_close(&f);
        double read_seconds = bench_now() - t0, read_max;
        CHECK_MPI(MPI_Allreduce(&read_seconds, &read_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        long long wrong = 0, wrong_all;
        for (size_t i = 0; i < elements; i++) wrong += data[i] != expected(first + (int64_t)i);
        CHECK_MPI(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
        wrong_total += wrong_all;
        double write_gbs = total_bytes / write_max / 1e9, read_gbs = total_bytes / read_max / 1e9;
        if (write_gbs > best_write) best_write = write_gbs;
        if (read_gbs > best_read) best_read = read_gbs;
        if (rank == 0)
            printf("  repeat %d: write %.3f s (%.3f GB/s), read %.3f s (%.3f GB/s), %lld wrong elements\n", r + 1,
                   write_max, write_gbs, read_max, read_gbs, wrong_all);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0 && !keep) unlink(path);
    }
    if (rank == 0) {
        printf("# page cache before reads: %s\n",
               all_dropped ? "dropped (drop_caches and fadvise)"
               : drop_all ? "the file's pages dropped with fadvise only (not root: reads may partly come from cache)"
                          : "the file's pages dropped with fadvise only (--no-drop-caches)");
        bench_result("hdf5_write_gbs", best_write);
        bench_result("hdf5_read_gbs", best_read);
        bench_result("hdf5_wrong", (double)wrong_total);
        fflush(stdout);
    }
    free(data);
    MPI_Finalize();
    return 0;
}
