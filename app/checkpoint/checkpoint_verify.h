/* checkpoint_verify.h: verification of a tensor's checksums while a checkpoint loads
 * (io/checkpoint_checksum.h; io/CHECKPOINT_FORMAT.md, "Checksums"), for checkpoint_transfer.c.
 * Each box a rank reads that is also a box some rank wrote is hashed from the staging buffer as
 * it arrives (a load in the saving layout costs no extra I/O); the written boxes no rank read
 * whole (another layout) are then read once more, spread over the ranks, and hashed. A mismatch
 * stops the job naming the file, the tensor, the box and the rank that found it, in one line for
 * the job however many ranks read the damaged box (data-parallel replicas all read it): the ranks
 * agree at the end of the tensor and the first finder's message is printed once. */
#ifndef CHECKPOINT_VERIFY_H
#define CHECKPOINT_VERIFY_H

#include <mpi.h>
#include <stdint.h>

#include "io/checkpoint_checksum.h"
#include "io/checkpoint_file.h"

typedef struct tensor_verifier {
    const char *tensor;
    box_checksum *records;   /* sorted by box */
    int64_t count;           /* -1: nothing to verify */
    unsigned char *covered;  /* record verified by some rank */
    int64_t boxes_checked;   /* by this rank */
    char mismatch[5120];     /* the first mismatch this rank found ("" when none) */
} tensor_verifier;

/* reads the tensor's records; `checksummed` is checkpoint_is_checksummed of the file (a
 * checksummed file lacking this tensor's table is refused; an older file verifies nothing) */
void tensor_verifier_begin(tensor_verifier *v, checkpoint_file *f, const char *tensor, int checksummed);
/* a box just read into data (row-major within the box) */
void tensor_verifier_piece(tensor_verifier *v, checkpoint_file *f, const tensor_box *box, const float *data);
/* collective: verifies the records no rank covered, stops the job (one line) when any rank found
 * a mismatch, then frees */
void tensor_verifier_finish(tensor_verifier *v, checkpoint_file *f, MPI_Comm comm);

#endif
