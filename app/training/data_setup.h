/* data_setup.h: a run's GPT datasets from its flags, as Megatron's pretrain_gpt builds them:
 * the blend or per-split blends (get_blend_and_blend_per_split: --data-path,
 * --train-data-path/--valid-data-path/--test-data-path, --per-split-data-args-path), the
 * sample counts per split (get_train_valid_test_num_samples) and the GPTDatasetConfig
 * (seed, sequence length, split, cache). Also --print-sample. */
#ifndef DATA_SETUP_H
#define DATA_SETUP_H

#include "app/data/gpt_dataset.h"
#include "app/training/args.h"

#include <mpi.h>

/* Megatron's train_valid_test_num_samples */
void data_setup_num_samples(const args *a, int64_t samples[GPT_DATA_SPLITS]);

/* Collective over comm. *storage receives the words the config points into (free it after
 * closing the datasets). The test split is built only with_test. Bad flags or files end the
 * job through user_error. */
gpt_datasets *data_setup_open(const args *a, int verbose, int with_test, MPI_Comm comm, char **storage);

/* --print-sample SPLIT:I[-J]: rank 0 prints "SPLIT I: t0 t1 ... tS" (seq_length + 1 token
 * ids, the last being the final label) for each sample. Collective over comm. */
void data_setup_print_samples(const args *a, MPI_Comm comm);

#endif
