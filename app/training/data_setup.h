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

/* The unpadded vocabulary size of the run's tokenizer as Megatron-Core's build_tokenizer makes it
 * (before --make-vocab-size-divisible-by x TP): for pretrain_t5 the T5 tokenizer's, the lines of
 * --vocab-file plus the sentinels <extra_id_0> .. <extra_id_99> that build_tokenizer gives
 * BertWordPieceCase (Hugging Face's len(tokenizer); the T5 dataset's sentinel ids are these,
 * t5_vocab_load), so every sentinel is an id of the model; for pretrain_bert and finetune_bert
 * the BERT tokenizer's (bert_vocab_load): the lines of --vocab-file, plus those 100 <extra_id_i>
 * for BertWordPieceCase, and no [BOS]/[EOS] (Hugging Face's BertTokenizer has none), so every
 * random token the BERT dataset draws (over that whole vocabulary, as Megatron's token_lookup)
 * is an id of the model; otherwise tokenizer_vocab_size, the size of our tokenizer. Bad flags
 * or files end the job through user_error. */
int data_setup_vocab_size(const args *a, int tokenizer_vocab_size);

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
