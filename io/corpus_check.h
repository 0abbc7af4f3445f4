/* corpus_check.h: validation of a tokenized corpus at the door, before training reads it: the
 * corpus holds documents, every token id lies inside the vocabulary, and (HDF5 corpora) every
 * range the writer wrote matches its checksum. The largest id comes from the corpus metadata
 * (max_token_id, written by preprocess_data and convert_corpus) or from one scan of the tokens
 * whose result is cached next to the corpus (FILE.checked: size, modification time, largest id);
 * an HDF5 corpus with checksums is scanned once (verifying them) and cached the same way.
 * A bad corpus is refused with one line naming the file and the first bad document. */
#ifndef CORPUS_CHECK_H
#define CORPUS_CHECK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* One corpus: prefix as --data-path gives it (PREFIX -> PREFIX.h5 or PREFIX.bin/.idx, or a
 * FILE.h5). vocab_size: ids must be in [0, vocab_size). verify_checksums 0 skips the scan when
 * the metadata gives the largest id. Returns 0, or -1 with the message in err; note receives a
 * line worth printing (a scan done, a cache written) or "". */
int corpus_check(const char *prefix, int64_t vocab_size, int verify_checksums, char *note, size_t notelen,
                 char *err, size_t errlen);

/* Collective over comm: rank 0 checks each path; a bad corpus ends the job with user_error on
 * every rank; rank 0 prints the notes. */
void corpus_check_all(const char *const *prefixes, int count, int64_t vocab_size, int verify_checksums, MPI_Comm comm);

#endif
