/* checkpoint_transfer.c: see checkpoint_transfer.h. */
#include "app/checkpoint/checkpoint_transfer.h"
#include "app/checkpoint/checkpoint_boxes.h"
#include "app/checkpoint/checkpoint_verify.h"
#include "app/core/error.h"
#include "app/core/hash.h"
#include "io/hdf5_lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* one transfer: a box and where its elements live in backend memory */
typedef struct piece {
    tensor_box box;
    float *data;
} piece;

/* what this rank moves of one tensor, and how many transfer calls every rank makes for it */
typedef struct tensor_pieces {
    piece *pieces;
    int count, capacity;
    int calls;   /* the most pieces any rank has of this tensor */
    int64_t checksum_offset, checksum_total; /* saving: this rank's first record, all ranks' records */
} tensor_pieces;

static size_t piece_elements(void) {
    const char *text = getenv("MTC_CKPT_PIECE_ELEMENTS");
    long long n = text ? atoll(text) : 0;
    return n > 0 ? (size_t)n : CHECKPOINT_PIECE_ELEMENTS;
}

/* ranks that list different tensors would make mismatched collective calls: a bug */
static void check_same_tensors(const sharded_state *s, MPI_Comm comm) {
    uint64_t hash = hash_fnv1a_word(HASH_FNV1A_OFFSET, (uint64_t)s->num_tensors);
    for (int t = 0; t < s->num_tensors; t++) {
        const checkpoint_tensor *tensor = &s->tensors[t];
        hash = hash_fnv1a(hash, tensor->name, strlen(tensor->name) + 1);
        hash = hash_fnv1a_word(hash_fnv1a_word(hash, (uint64_t)tensor->rows), (uint64_t)tensor->cols);
    }
    uint64_t extremes[2] = {hash, ~hash}; /* max(hash) and ~min(hash) */
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MAX, comm));
    CHECK(extremes[0] == ~extremes[1], "ranks list different checkpoint tensors (%d here)", s->num_tensors);
}

/* the pieces of every tensor (saving: the shards this rank writes; loading: all of them) */
static tensor_pieces *plan_pieces(const sharded_state *s, int saving, MPI_Comm comm, size_t *staging_elements) {
    check_same_tensors(s, comm);
    tensor_pieces *plan = calloc((size_t)(s->num_tensors ? s->num_tensors : 1), sizeof *plan);
    int *calls = calloc((size_t)(s->num_tensors ? s->num_tensors : 1), sizeof *calls);
    CHECK(plan && calls, "out of host memory for the checkpoint plan");
    size_t limit = piece_elements();
    *staging_elements = 1;
    for (int i = 0; i < s->num_shards; i++) {
        const checkpoint_shard *shard = &s->shards[i];
        if (saving && !shard->write) continue;
        tensor_pieces *tp = &plan[shard->tensor];
        int n = tensor_part_pieces(&shard->part, limit, NULL, 0);
        if (tp->count + n > tp->capacity) {
            tp->capacity = tp->count + n > 2 * tp->capacity ? tp->count + n : 2 * tp->capacity;
            tp->pieces = realloc(tp->pieces, sizeof(piece) * (size_t)tp->capacity);
            CHECK(tp->pieces, "out of host memory for the checkpoint plan");
        }
        tensor_box *boxes = malloc(sizeof(tensor_box) * (size_t)n);
        CHECK(boxes, "out of host memory for the checkpoint plan");
        tensor_part_pieces(&shard->part, limit, boxes, n);
        float *data = shard->data;
        for (int k = 0; k < n; k++) {
            size_t elements = (size_t)boxes[k].rows * (size_t)boxes[k].cols;
            tp->pieces[tp->count++] = (piece){boxes[k], data};
            data += elements;
            if (elements > *staging_elements) *staging_elements = elements;
        }
        free(boxes);
    }
    for (int t = 0; t < s->num_tensors; t++) calls[t] = plan[t].count;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, calls, s->num_tensors, MPI_INT, MPI_MAX, comm));
    for (int t = 0; t < s->num_tensors; t++) plan[t].calls = calls[t];
    free(calls);
    if (saving) {
        /* one checksum record per piece written: this rank's rows of each tensor's table */
        int64_t *counts = calloc((size_t)s->num_tensors * 3 + 1, sizeof *counts);
        CHECK(counts, "out of host memory for the checkpoint plan");
        int64_t *offsets = counts + s->num_tensors, *totals = offsets + s->num_tensors;
        for (int t = 0; t < s->num_tensors; t++) counts[t] = plan[t].count;
        CHECK_MPI(MPI_Exscan(counts, offsets, s->num_tensors, MPI_INT64_T, MPI_SUM, comm));
        CHECK_MPI(MPI_Allreduce(counts, totals, s->num_tensors, MPI_INT64_T, MPI_SUM, comm));
        int rank;
        CHECK_MPI(MPI_Comm_rank(comm, &rank));
        for (int t = 0; t < s->num_tensors; t++) {
            plan[t].checksum_offset = rank == 0 ? 0 : offsets[t]; /* Exscan leaves rank 0's undefined */
            plan[t].checksum_total = totals[t];
        }
        free(counts);
    }
    return plan;
}

static void fault_pause(MPI_Comm comm) {
    const char *pause = getenv("MTC_FAULT_PAUSE_IN_SAVE");
    if (!pause || atoi(pause) <= 0) return;
    int rank;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    if (rank == 0) {
        fprintf(stderr, "checkpoint: pausing %d s in the middle of a save (MTC_FAULT_PAUSE_IN_SAVE)\n", atoi(pause));
        fflush(stderr);
    }
    sleep((unsigned)atoi(pause));
}

/* MTC_FAULT_WRITE_DELAY_MS=N: a save sleeps N ms before each tensor, so that an asynchronous
 * writer is still writing when a test kills a rank */
static void fault_write_delay(void) {
    const char *delay = getenv("MTC_FAULT_WRITE_DELAY_MS");
    long ms = delay ? atol(delay) : 0;
    if (ms > 0) nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
}

/* backend memory to host memory; a NULL ops: the data already is in host memory (a snapshot) */
static void to_host(const kernel_ops *ops, void *host, const void *data, size_t bytes) {
    if (ops) ops->copy_to_host(host, data, bytes);
    else memcpy(host, data, bytes);
}

int64_t checkpoint_transfer(checkpoint_file *f, const sharded_state *s, const kernel_ops *ops, MPI_Comm comm,
                            int saving, int verify) {
    size_t staging_elements;
    tensor_pieces *plan = plan_pieces(s, saving, comm, &staging_elements);
    float *staging = malloc(sizeof(float) * staging_elements);
    CHECK(staging, "out of host memory for checkpoint staging");
    int checksummed = !saving && verify && checkpoint_is_checksummed(f->file);
    int64_t boxes_checked = 0;
    box_checksum *records = NULL;
    for (int t = 0; t < s->num_tensors; t++) {
        const checkpoint_tensor *tensor = &s->tensors[t];
        if (saving && t == s->num_tensors / 2) fault_pause(comm);
        if (saving) {
            fault_write_delay();
            hdf5_lock();
            checkpoint_create_tensor(f, tensor->name, tensor->rows, tensor->cols);
            hdf5_unlock();
        }
        const tensor_pieces *tp = &plan[t];
        tensor_verifier verifier = {.count = -1};
        if (checksummed) tensor_verifier_begin(&verifier, f, tensor->name, 1);
        if (saving) {
            records = realloc(records, sizeof *records * (size_t)(tp->count ? tp->count : 1));
            CHECK(records, "out of host memory for checksums");
        }
        for (int j = 0; j < tp->calls; j++) {
            tensor_part part = {0};
            const piece *pc = j < tp->count ? &tp->pieces[j] : NULL;
            if (pc) part = (tensor_part){.num_boxes = 1, .boxes = {pc->box}};
            size_t bytes = sizeof(float) * tensor_part_elements(&part);
            if (saving) {
                if (bytes) {
                    to_host(ops, staging, pc->data, bytes);
                    records[j] = (box_checksum){(uint64_t)pc->box.row, (uint64_t)pc->box.col, (uint64_t)pc->box.rows,
                                                (uint64_t)pc->box.cols, checksum_floats(staging, bytes / sizeof(float))};
                }
                hdf5_lock();
                checkpoint_write_tensor(f, tensor->name, &part, staging);
                hdf5_unlock();
            } else {
                hdf5_lock();
                checkpoint_read_tensor(f, tensor->name, &part, staging);
                hdf5_unlock();
                if (bytes) tensor_verifier_piece(&verifier, f, &pc->box, staging);
                if (bytes) ops->copy_from_host(pc->data, staging, bytes);
            }
        }
        if (saving) {
            hdf5_lock();
            checkpoint_write_checksums(f, tensor->name, records, tp->count, tp->checksum_offset, tp->checksum_total);
            hdf5_unlock();
        }
        if (checksummed) {
            tensor_verifier_finish(&verifier, f, comm);
            boxes_checked += verifier.boxes_checked;
        }
    }
    free(records);
    free(staging);
    for (int t = 0; t < s->num_tensors; t++) free(plan[t].pieces);
    free(plan);
    if (!saving && verify && !checksummed) return -1;
    return boxes_checked;
}
