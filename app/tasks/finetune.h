/* finetune.h: finetune_bert, Megatron's tasks/main.py for BERT (tasks/finetune_utils.py with
 * tasks/glue/finetune.py for MNLI and tasks/race/finetune.py for RACE): the task's samples
 * (task_data.h) feed the trainer in place of a corpus; --epochs passes over --train-data, in
 * DistributedSampler's order (each epoch a fresh permutation seeded --seed + epoch, padded to a
 * multiple of the data-parallel size with its first samples, rank r taking every dp-th from r;
 * the last incomplete batch dropped), one micro-batch per iteration (global batch = micro-batch
 * x data-parallel size); a RACE sample is 4 rows (micro and global batches x 4, as Megatron's
 * sample_multiplier). After each epoch the accuracy on each --valid-data path is printed as
 * tasks/eval_utils.py prints it. Megatron's permutation is torch.randperm's; ours is numpy's
 * RandomState(seed + epoch) shuffle (the same role; not the same order). */
#ifndef FINETUNE_H
#define FINETUNE_H

/* the whole job (MPI included); returns the exit status */
int finetune_bert_main(int argc, char **argv);

#endif
