#!/bin/sh
# tests/mpi/finetune_bert_test.sh: finetune_bert (issue 46 part 3: Megatron's tasks/main.py).
# The samples: tests/tools/task_samples (app/tasks/task_data.c) equals
# tests/tools/megatron_task_samples.py (written from Megatron's tasks/data_utils.py, glue/mnli.py,
# race/data.py) for the bundled synthetic MNLI and RACE sets (tests/tools/make_task_data.py) at
# two sequence lengths (one trims), and for a hand-made MNLI file (messy whitespace, " . ",
# upper case, a test file's 10-column header). Bad inputs stop with one message naming file and
# line. Training: a tiny BERT pretrained for a few iterations is fine-tuned on the synthetic MNLI
# (its encoder, tokentype embeddings and pooler loaded, the classification head random with
# Megatron's warning) and reaches >= 80% validation accuracy in 8 epochs (chance: 33%; the run
# sits at 66.7% for one to five epochs before it jumps to 100%, how long depending on the seed and
# the dropout draws: 8 epochs reached 100% at each of 13 seeds, 4 epochs failed at 2 of 6); RACE from
# scratch >= 80% (chance: 25%). TP2, PP2 and DP2 fine-tune with the losses of one rank within 1e-6;
# a run saved after epoch 1 and resumed ends bitwise as 2 straight epochs.
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/mpi/bert_corpus.sh"
FINETUNE="$top_builddir/app/finetune_bert"
SAMPLES="$top_builddir/tests/tools/task_samples"
REFERENCE="$top_srcdir/tests/tools/megatron_task_samples.py"
DATA="$top_srcdir/tests/data"
MNLI_TRAIN="$DATA/mnli_synthetic_train.tsv"
MNLI_DEV="$DATA/mnli_synthetic_dev_matched.tsv"

# ---- samples against the reference ----
if python3 -c 'import json' 2>/dev/null; then
    printf 'index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\n' > "$WORK/test_matched.tsv"
    printf '7\t1\t7e\tg\tx\tx\tx\tx\t  The  quick . brown\t fox . Jumped  over . .  the lazy dog !\n' >> "$WORK/test_matched.tsv"
    printf '8\t1\t8e\tg\tx\tx\tx\tx\tHello World , cafe naive ?\tdon'"'"'t  unaffable tokenizer\n' >> "$WORK/test_matched.tsv"
    for T in 24 9; do
        for task in "MNLI $MNLI_TRAIN $MNLI_DEV $WORK/test_matched.tsv" "RACE $DATA/race_tiny/train $DATA/race_tiny/dev"; do
            set -- $task
            name=$1; shift
            python3 "$REFERENCE" "$name" "$BERT_VOCAB" "$T" "$@" > "$WORK/reference.txt" &&
                "$SAMPLES" "$name" "$BERT_VOCAB" "$T" "$@" > "$WORK/ours.txt" &&
                cmp -s "$WORK/reference.txt" "$WORK/ours.txt"
            ok $? "$name samples at sequence length $T ($(wc -l < "$WORK/ours.txt") rows): ids, token types, padding, label and uid equal Megatron's construction"
        done
    done
else
    diag "python3 missing: the sample comparison is skipped"
fi

# ---- bad inputs: one message naming the file and the line ----
bad() {  # bad TASK PATH PATTERN DESCRIPTION
    "$SAMPLES" "$1" "$BERT_VOCAB" 24 "$2" > /dev/null 2> "$WORK/bad.err"
    status=$?
    [ $status -eq 1 ] && grep -q "$3" "$WORK/bad.err"
    ok $? "$4: $(head -1 "$WORK/bad.err")"
}
head -3 "$MNLI_TRAIN" > "$WORK/short.tsv"
printf '3\tonly\tfour\tcolumns\n' >> "$WORK/short.tsv"
bad MNLI "$WORK/short.tsv" "short.tsv:4: 4 tab-separated columns" "a TSV row of 4 columns"
head -2 "$MNLI_TRAIN" > "$WORK/label.tsv"
head -3 "$MNLI_TRAIN" | tail -1 | sed 's/entailment$/maybe/' >> "$WORK/label.tsv"
bad MNLI "$WORK/label.tsv" "label.tsv:3: label 'maybe'" "an unknown label"
head -2 "$MNLI_TRAIN" | sed '2s/^0\t/x7\t/' > "$WORK/uid.tsv"
bad MNLI "$WORK/uid.tsv" "uid.tsv:2: column 0 'x7'" "a non-numeric id"
mkdir -p "$WORK/race_bad"
head -2 "$DATA/race_tiny/dev/passages.txt" > "$WORK/race_bad/a.txt"
head -1 "$DATA/race_tiny/dev/passages.txt" | sed 's/"answers": \["[A-D]"/"answers": ["E"/' >> "$WORK/race_bad/a.txt"
bad RACE "$WORK/race_bad" "race_bad/a.txt:3: question 0: answer 'E'" "a RACE answer outside A-D"
printf '{"article": "the dog", "questions": [' > "$WORK/race_bad/a.txt"
bad RACE "$WORK/race_bad" "race_bad/a.txt:1: not JSON" "a truncated RACE line"

# ---- fine-tuning ----
MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 24 --max-position-embeddings 24
       --make-vocab-size-divisible-by 8 --vocab-file $BERT_VOCAB"
finetune() {  # finetune NRANKS FLAGS...
    n=$1; shift
    timeout 300 "$MPIEXEC" -n "$n" "$FINETUNE" $MODEL "$@" > "$WORK/out" 2> "$WORK/err"
}
last_accuracy() { grep '>> |epoch: ' "$WORK/out" | tail -1 | sed 's/.* = \([0-9.]*\) %$/\1/'; }

bert_corpus bert 120
timeout 300 "$MPIEXEC" -n 1 "$top_builddir/app/pretrain_bert" $MODEL --micro-batch-size 4 --global-batch-size 8 \
    --train-iters 10 --lr 1e-3 --eval-iters 0 --data-path "$WORK/bert_text_sentence.h5" --split 949,50,1 \
    --save "$WORK/pretrained" > "$WORK/out" 2> "$WORK/err"
ok $? "pretrain_bert: 10 iterations of a tiny BERT saved"

MNLI="--task MNLI --train-data $MNLI_TRAIN --valid-data $MNLI_DEV --micro-batch-size 4 --lr 1e-3 --log-interval 1"
finetune 1 $MNLI --epochs 8 --pretrained-checkpoint "$WORK/pretrained" --metrics-file "$WORK/eight_epochs.jsonl"
status=$?
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -5
ok $status "MNLI: 8 epochs from the pretrained checkpoint"
grep -q "loaded checkpoint .*(weights only" "$WORK/out" &&
    grep -q 'WARNING.* could not find /model/classification_head.weight in the pretrained checkpoint' "$WORK/out" &&
    ! grep -q 'could not find /model/encoder\|could not find /model/pooler\|could not find /model/embedding' "$WORK/out"
ok $? "the encoder, tokentype embeddings and pooler come from the checkpoint; the classification head starts random (Megatron's warning)"
grep -c '>> |epoch: [0-7]| overall: correct / total = [0-9]* / 60 = ' "$WORK/out" | grep -qx 8
ok $? "an accuracy line after each of the 8 epochs, as tasks/eval_utils.py prints it"
accuracy=$(last_accuracy)
diag "MNLI validation accuracy after 8 epochs: $accuracy %"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 80) }'
ok $? "MNLI: validation accuracy $accuracy % >= 80 % (3 classes)"

# one epoch (75 iterations of 4) on one rank, at TP2 and at PP2, dropout on
epoch() {  # epoch NAME NRANKS FLAGS...
    name=$1; n=$2; shift 2
    finetune "$n" $MNLI --epochs 1 --pretrained-checkpoint "$WORK/pretrained" --metrics-file "$WORK/$name.jsonl" "$@"
    ok $? "$name: one epoch"
    json_field "$WORK/$name.jsonl" train lm_loss > "$WORK/$name.loss"
}
epoch one 1
epoch TP2 2 --tensor-model-parallel-size 2
compare_losses one TP2 1e-6 75 "TP2: the fine-tuning losses of one epoch within 1e-6 of one rank"
epoch PP2 2 --pipeline-model-parallel-size 2
compare_losses one PP2 1e-6 75 "PP2 (tokentype embeddings on the first stage, pooler and head on the last): the losses within 1e-6 of one rank"
# DP2 (global batch 8 = 2 x 4) against one rank at micro-batch 8: the same samples in each
# global batch (DistributedSampler's rank r takes every second), at other rows of it, so
# without dropout (its masks follow the row)
NODROP="--hidden-dropout 0 --attention-dropout 0"
epoch one8 1 --micro-batch-size 8 $NODROP
epoch DP2 2 --global-batch-size 8 $NODROP
compare_losses one8 DP2 1e-6 37 "DP2: each global batch's loss within 1e-6 of one rank's (37 iterations)"

# --save at the end of epoch 1 (--exit-interval), --load for epoch 2: epoch 2's losses and the
# final parameters bitwise those of 2 straight epochs
hash_of() { grep -o 'final parameter hash: [0-9a-f]*' "$WORK/out"; }
TWO="$MNLI --epochs 2 --micro-batch-size 8"
finetune 1 $TWO --metrics-file "$WORK/straight.jsonl"
ok $? "MNLI: 2 epochs straight"
straight=$(hash_of)
json_field "$WORK/straight.jsonl" train lm_loss > "$WORK/straight.loss"
finetune 1 $TWO --save "$WORK/ft_ckpt" --exit-interval 37 --metrics-file "$WORK/first.jsonl"
ok $? "MNLI: epoch 1, then a checkpoint"
finetune 1 $TWO --load "$WORK/ft_ckpt" --metrics-file "$WORK/second.jsonl"
ok $? "MNLI: resumed for epoch 2"
resumed=$(hash_of)
cat "$WORK/first.jsonl" "$WORK/second.jsonl" > "$WORK/resumed.jsonl"
json_field "$WORK/resumed.jsonl" train lm_loss > "$WORK/resumed.loss"
[ -n "$straight" ] && [ "$straight" = "$resumed" ] && [ "$(wc -l < "$WORK/straight.loss")" -eq 74 ] &&
    cmp -s "$WORK/straight.loss" "$WORK/resumed.loss"
ok $? "saved after epoch 1 and resumed: the 74 losses and the $straight of 2 straight epochs, bitwise"

finetune 1 --task RACE --train-data "$DATA/race_tiny/train" --valid-data "$DATA/race_tiny/dev" --micro-batch-size 4 \
    --lr 1e-3 --epochs 3 --log-interval 10
ok $? "RACE: 3 epochs from scratch (4 rows a sample)"
accuracy=$(last_accuracy)
grep -q 'metrics for .*-race_tiny-dev: correct / total = [0-9]* / 24' "$WORK/out" &&
    awk -v a="$accuracy" 'BEGIN { exit !(a >= 80) }'
ok $? "RACE: validation accuracy $accuracy % >= 80 % (4 choices)"

# ---- the same through finetune_bert: one message (rank 0), no training ----
finetune 2 --task MNLI --train-data "$WORK/short.tsv" --valid-data "$MNLI_DEV" --epochs 1 --micro-batch-size 1 --lr 1e-3
status=$?
[ $status -ne 0 ] && [ "$(grep -c 'error' "$WORK/err")" -eq 1 ] && grep -q "finetune_bert: error: .*short.tsv:4: 4 tab-separated columns" "$WORK/err" &&
    ! grep -q 'iteration' "$WORK/out"
ok $? "finetune_bert on a malformed TSV line, 2 ranks: one error naming file and line: $(head -1 "$WORK/err")"

# ---- flags ----
finetune 1 $MNLI --epochs 1 --train-iters 5
[ $? -ne 0 ] && grep -q -- '--train-iters: finetune_bert reads --train-data' "$WORK/err"
ok $? "--train-iters is refused (the epochs decide): $(head -1 "$WORK/err")"
finetune 1 $MNLI --epochs 1 --global-batch-size 8
[ $? -ne 0 ] && grep -q 'one micro-batch per iteration' "$WORK/err"
ok $? "two micro-batches per iteration are refused as Megatron asserts: $(head -1 "$WORK/err")"
run_app 1 --task MNLI --mock-data --train-iters 1 --num-layers 1 --hidden-size 8 --num-attention-heads 2 \
    --seq-length 8 --max-position-embeddings 8 --vocab-size 64 --micro-batch-size 1 --lr 1e-3
[ $? -ne 0 ] && grep -q -- '--task is a fine-tuning flag' "$WORK/err"
ok $? "pretrain_gpt refuses --task: $(head -1 "$WORK/err")"
done_testing
