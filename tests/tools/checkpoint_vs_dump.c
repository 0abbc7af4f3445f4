/* checkpoint_vs_dump.c: checks that a checkpoint's /model tensors are bitwise the global tensors
 * of a --dump-parameters file (written independently, with MPI-IO, by the same run).
 * usage: checkpoint_vs_dump CHECKPOINT.h5 DUMP.bin
 * Prints the number of tensors compared; exits 1 naming the first tensor that differs, 2 on bad
 * input. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 3) { fprintf(stderr, "usage: checkpoint_vs_dump CHECKPOINT.h5 DUMP.bin\n"); return 2; }
    char index_path[4096];
    snprintf(index_path, sizeof index_path, "%s.index", argv[2]);
    FILE *index = fopen(index_path, "r"), *dump = fopen(argv[2], "rb");
    hid_t file = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (!index || !dump || file < 0) { fprintf(stderr, "checkpoint_vs_dump: cannot open the inputs\n"); return 2; }
    char name[256];
    int rows, cols, compared = 0, status = 0;
    size_t offset;
    while (status == 0 && fscanf(index, "%255s %d %d %zu", name, &rows, &cols, &offset) == 4) {
        size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
        float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
        char path[300];
        snprintf(path, sizeof path, "/model/%s", name);
        hid_t dataset = H5Dopen2(file, path, H5P_DEFAULT);
        if (!want || !got || dataset < 0) { fprintf(stderr, "checkpoint_vs_dump: no tensor %s\n", path); return 2; }
        if (fseek(dump, (long)(offset * sizeof(float)), SEEK_SET) != 0 || fread(want, sizeof(float), n, dump) != n) {
            fprintf(stderr, "checkpoint_vs_dump: %s is short at %s\n", argv[2], name);
            return 2;
        }
        if (H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) < 0) return 2;
        H5Dclose(dataset);
        if (memcmp(want, got, n * sizeof(float)) != 0) {
            printf("tensor %s differs between the checkpoint and the dump\n", name);
            status = 1;
        }
        compared++;
        free(want);
        free(got);
    }
    if (status == 0) printf("%d tensors bitwise equal\n", compared);
    H5Fclose(file);
    fclose(index);
    fclose(dump);
    MPI_Finalize();
    return compared > 0 ? status : 2;
}
