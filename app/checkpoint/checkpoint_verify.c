/* checkpoint_verify.c: see checkpoint_verify.h. */
#include "app/checkpoint/checkpoint_verify.h"
#include "app/core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_boxes(const void *a, const void *b) {
    const box_checksum *x = a, *y = b;
    uint64_t kx[4] = {x->row, x->col, x->rows, x->cols}, ky[4] = {y->row, y->col, y->rows, y->cols};
    for (int i = 0; i < 4; i++)
        if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

static int rank_of(MPI_Comm comm) {
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    return rank;
}

void tensor_verifier_begin(tensor_verifier *v, checkpoint_file *f, const char *tensor, int checksummed) {
    memset(v, 0, sizeof *v);
    v->tensor = tensor;
    v->count = checksummed ? checkpoint_read_checksums(f, tensor, &v->records) : -1;
    if (checksummed && v->count < 0)
        user_error_local("checkpoint %s: tensor %s has no checksums although the file is checksummed: the file is "
                         "damaged (--no-verify-checksums loads it anyway)", f->path, tensor);
    if (v->count <= 0) return;
    qsort(v->records, (size_t)v->count, sizeof *v->records, compare_boxes);
    v->covered = calloc((size_t)v->count + 1, 1); /* the last byte: a mismatch found (agreed with coverage) */
    CHECK(v->covered, "out of host memory for checksum records");
}

/* note the first mismatch; tensor_verifier_finish reports it */
static void mismatch(tensor_verifier *v, checkpoint_file *f, const box_checksum *r, uint64_t computed) {
    if (v->mismatch[0]) return;
    snprintf(v->mismatch, sizeof v->mismatch,
             "checkpoint %s: tensor %s: rows [%llu, %llu) columns [%llu, %llu) do not match their checksum "
             "(xxh3 stored %016llx, read %016llx; found by rank %d): the file is damaged "
             "(--no-verify-checksums loads it anyway)", f->path, v->tensor, (unsigned long long)r->row,
             (unsigned long long)(r->row + r->rows), (unsigned long long)r->col,
             (unsigned long long)(r->col + r->cols), (unsigned long long)r->hash,
             (unsigned long long)computed, rank_of(f->comm));
}

/* collective: the lowest rank that found a mismatch gives its message to all, and the job stops
 * with it once */
static void agree_on_mismatch(tensor_verifier *v, MPI_Comm comm) {
    int rank = rank_of(comm), size, finder;
    CHECK_MPI(MPI_Comm_size(comm, &size));
    finder = v->mismatch[0] ? rank : size;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &finder, 1, MPI_INT, MPI_MIN, comm));
    if (finder == size) return;
    CHECK_MPI(MPI_Bcast(v->mismatch, sizeof v->mismatch, MPI_CHAR, finder, comm));
    user_error("%s", v->mismatch);
}

void tensor_verifier_piece(tensor_verifier *v, checkpoint_file *f, const tensor_box *box, const float *data) {
    if (v->count <= 0) return;
    box_checksum key = {(uint64_t)box->row, (uint64_t)box->col, (uint64_t)box->rows, (uint64_t)box->cols, 0};
    box_checksum *r = bsearch(&key, v->records, (size_t)v->count, sizeof key, compare_boxes);
    if (!r) return;
    uint64_t computed = checksum_floats(data, (size_t)(box->rows * box->cols));
    if (computed != r->hash) mismatch(v, f, r, computed);
    v->covered[r - v->records] = 1;
    v->boxes_checked++;
}

void tensor_verifier_finish(tensor_verifier *v, checkpoint_file *f, MPI_Comm comm) {
    if (v->count > 0) {
        CHECK(v->count < (int64_t)1 << 30, "tensor %s has %lld checksum records", v->tensor, (long long)v->count);
        v->covered[v->count] = v->mismatch[0] != 0;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v->covered, (int)v->count + 1, MPI_UNSIGNED_CHAR, MPI_MAX, comm));
        int rank = rank_of(comm), size;
        CHECK_MPI(MPI_Comm_size(comm, &size));
        int64_t uncovered = 0;
        uint64_t largest = 1;
        for (int64_t i = 0; i < v->count; i++)
            if (!v->covered[i]) {
                uncovered++;
                if (v->records[i].rows * v->records[i].cols > largest) largest = v->records[i].rows * v->records[i].cols;
            }
        float *buffer = uncovered ? malloc(sizeof(float) * largest) : NULL;
        CHECK(!uncovered || buffer, "out of host memory verifying tensor %s", v->tensor);
        /* uncovered record k (in order) is read by rank k % size; every rank makes the same calls */
        int64_t rounds = (uncovered + size - 1) / size, k = 0;
        int64_t next = 0;
        for (int64_t round = 0; round < rounds; round++) {
            const box_checksum *mine = NULL;
            for (; next < v->count; next++) {
                if (v->covered[next]) continue;
                if (k++ % size == rank) {
                    mine = &v->records[next++];
                    break;
                }
            }
            tensor_part part = {0};
            if (mine) part = (tensor_part){.num_boxes = 1,
                                           .boxes = {{(int64_t)mine->row, (int64_t)mine->col, (int64_t)mine->rows,
                                                      (int64_t)mine->cols}}};
            checkpoint_read_tensor(f, v->tensor, &part, buffer);
            f->bytes -= sizeof(float) * tensor_part_elements(&part); /* verification, not loading */
            if (mine) {
                uint64_t computed = checksum_floats(buffer, (size_t)(mine->rows * mine->cols));
                if (computed != mine->hash) mismatch(v, f, mine, computed);
                v->boxes_checked++;
            }
        }
        free(buffer);
        /* one collective more only when a rank found a mismatch or boxes were read again */
        if (v->covered[v->count] || uncovered) agree_on_mismatch(v, comm);
    }
    free(v->records);
    free(v->covered);
    v->records = NULL;
    v->covered = NULL;
}
