#!/bin/sh
# tests/mpi/sample_training_test.sh: sample-based training as Megatron's: --train-samples sets the
# iterations (train_samples // global batch) and the train split's size, and the learning rate
# follows --lr-warmup-samples / --lr-decay-samples with the schedule's steps counted in samples
# (OptimizerParamScheduler stepped by the global batch).
. "${top_srcdir:-.}/tests/lib.sh"
BASE="--num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 8 --micro-batch-size 2
      --global-batch-size 4 --vocab-size 64 --mock-data --log-interval 1 --eval-iters 0
      --lr 1e-3 --min-lr 1e-4 --lr-decay-style linear"
run_app 2 $BASE --train-samples 42 --lr-warmup-samples 10 --lr-decay-samples 30 --metrics-file "$WORK/s.jsonl"
ok $? "pretrain_gpt --train-samples 42 --lr-warmup-samples 10 --lr-decay-samples 30"
json_field "$WORK/s.jsonl" train iteration > "$WORK/iters"
[ "$(tail -1 "$WORK/iters")" = 10 ] && [ "$(wc -l < "$WORK/iters")" -eq 10 ]
ok $? "42 samples in global batches of 4: 10 iterations (Megatron's update_train_iters)"
json_field "$WORK/s.jsonl" train learning_rate > "$WORK/lr"
# iteration i uses the rate after (i - 1) x 4 samples: warm-up to 10 samples, linear decay to 30
awk 'BEGIN { max = 1e-3; min = 1e-4; bad = 0 }
     { step = (NR - 1) * 4;
       if (step <= 10) want = max * step / 10;
       else if (step > 30) want = min;
       else want = min + (1 - (step - 10) / 20) * (max - min);
       d = $1 - want; if (d < 0) d = -d; if (d > 1e-6 * max) { bad++; print "# iteration " NR ": " $1 " expected " want } }
     END { exit bad != 0 }' "$WORK/lr"
ok $? "the learning rates follow the schedule in samples ($(tr '\n' ' ' < "$WORK/lr" | cut -c1-120))"
run_app 2 $BASE --train-samples 40 --lr-warmup-iters 2
grep -q "\-\-lr-warmup-iters and --lr-decay-iters need --train-iters" "$WORK/err"
ok $? "iteration-based schedule flags are refused with --train-samples"
run_app 2 $BASE --train-iters 10 --train-samples 40
grep -q "cannot both be given" "$WORK/err"
ok $? "--train-iters and --train-samples exclude each other"
done_testing
