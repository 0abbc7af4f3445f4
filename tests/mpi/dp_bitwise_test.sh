#!/bin/sh
# dp_bitwise_test.sh: --deterministic-mode gives the same bits at every data-parallel size
# (app/optim/fixed_tree_reduce.h: one summation tree over the global batch's micro-batches, split
# into per-rank subtrees and pairwise exchanges). With the same global batch (16 samples, 2 per
# micro-batch), 4 iterations:
#  - DP 1, 2, 4: the losses, the grad norms and the final parameters (--dump-parameters) bitwise
#    equal, and the final checkpoints' model and optimizer tensors identical (h5diff);
#  - the distributed optimizer at DP 2, 4 and 8 equal to DP 1 likewise (its reduce-scatter by
#    recursive halving, the norm by fixed blocks);
#  - TP2 x DP2 equal to TP2 x DP1, with the distributed optimizer too; PP2 x DP2 (tied embeddings
#    summed across the stages after the tree) equal to PP2 x DP1;
#  - a run saved at DP4 and resumed at DP2 continues with the DP4 run's losses and ends with its
#    parameters, bit for bit;
#  - a data-parallel size that is not a power of two says that the bits hold at that size only.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --num-layers 2 --train-iters 4 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1
       --eval-iters 0 --micro-batch-size 2 --global-batch-size 16 --deterministic-mode --hidden-dropout 0.1
       --attention-dropout 0.1"

# run TAG NRANKS FLAGS...: losses and grad norms in TAG.loss, parameters in TAG.bin
run() {
    run_tag=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$run_tag.jsonl" --dump-parameters "$WORK/$run_tag.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run_tag failed ($status): $(tail -1 "$WORK/err")"; return $status; }
    paste -d ' ' "$(json_field "$WORK/$run_tag.jsonl" train lm_loss > "$WORK/$run_tag.l"; echo "$WORK/$run_tag.l")" \
        "$(json_field "$WORK/$run_tag.jsonl" train grad_norm > "$WORK/$run_tag.g"; echo "$WORK/$run_tag.g")" > "$WORK/$run_tag.loss"
    [ "$(wc -l < "$WORK/$run_tag.loss")" -eq "${ITERATIONS:-4}" ]
}
# same A B DESCRIPTION: losses, grad norms and parameters of runs A and B bitwise equal
same() {
    cmp -s "$WORK/$1.loss" "$WORK/$2.loss" && cmp -s "$WORK/$1.bin" "$WORK/$2.bin"
    status=$?
    [ $status -eq 0 ] || paste "$WORK/$1.loss" "$WORK/$2.loss" | sed 's/^/#   /'
    ok $status "$3"
}

run dp1 1 --save "$WORK/ckpt1"
ok $? "DP1: 4 iterations"
diag "DP1 losses and grad norms: $(tr '\n' ' ' < "$WORK/dp1.loss")"
for n in 2 4; do
    run dp$n $n --save "$WORK/ckpt$n"
    same dp1 dp$n "DP$n: losses, grad norms and final parameters bitwise those of DP1"
    h5diff -q "$WORK/ckpt1/iter_0000004.h5" "$WORK/ckpt$n/iter_0000004.h5" /model /model &&
        h5diff -q "$WORK/ckpt1/iter_0000004.h5" "$WORK/ckpt$n/iter_0000004.h5" /optimizer /optimizer
    ok $? "DP$n: the final checkpoint's model and optimizer tensors are DP1's (h5diff)"
done
for n in 2 4 8; do
    run dist$n $n --use-distributed-optimizer
    same dp1 dist$n "DP$n with the distributed optimizer: bitwise DP1"
done

run tp2 2 --tensor-model-parallel-size 2
run tp2dp2 4 --tensor-model-parallel-size 2
same tp2 tp2dp2 "TP2 x DP2: bitwise TP2 x DP1"
run tp2dp2dist 4 --tensor-model-parallel-size 2 --use-distributed-optimizer
same tp2 tp2dp2dist "TP2 x DP2 with the distributed optimizer: bitwise TP2 x DP1"
run pp2 2 --pipeline-model-parallel-size 2
run pp2dp2 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer
same pp2 pp2dp2 "PP2 x DP2 (tied embeddings across the stages, distributed optimizer): bitwise PP2 x DP1"

# ---- saved at DP4, resumed at DP2 ----
run_app 4 $MODEL --use-distributed-optimizer --save "$WORK/resume" --save-interval 2 --exit-interval 2 \
    --metrics-file "$WORK/first.jsonl"
ok $? "resume: DP4 (distributed optimizer) saves iteration 2 and exits"
run_app 2 $MODEL --use-distributed-optimizer --load "$WORK/resume" --metrics-file "$WORK/second.jsonl" \
    --dump-parameters "$WORK/resumed.bin"
status=$?
grep -q "loaded checkpoint .*iter_0000002.h5: iteration 2" "$WORK/out"
ok $(( status + $? )) "resume: DP2 loads the DP4 checkpoint of iteration 2 and trains to 4"
cat "$WORK/first.jsonl" "$WORK/second.jsonl" > "$WORK/resumed.jsonl"
json_field "$WORK/resumed.jsonl" train lm_loss > "$WORK/resumed.l"
json_field "$WORK/resumed.jsonl" train grad_norm > "$WORK/resumed.g"
paste -d ' ' "$WORK/resumed.l" "$WORK/resumed.g" > "$WORK/resumed.loss"
same dist4 resumed "resume: iterations 1-4 and the final parameters bitwise those of the unbroken DP4 run"

# ---- not a power of two ----
ITERATIONS=1 run dp3 3 --global-batch-size 12 --train-iters 1
grep -q "note: --deterministic-mode reproduces this run bitwise at data-parallel size 3 only: the data-parallel size is not a power of two" "$WORK/out"
ok $? "DP3: the start-up log says the bits hold at that size only"

done_testing
