#!/bin/sh
# dp_bitwise_test.sh: --deterministic-mode gives the same bits at every data-parallel size
# (app/optim/fixed_tree_reduce.h: one summation tree over the global batch's micro-batches, split
# into per-rank subtrees and pairwise exchanges). With the same global batch (16 samples, 2 per
# micro-batch), 4 iterations:
#  - DP 1, 2, 4: the training and validation losses, the grad norms and the final parameters
#    (--dump-parameters) bitwise equal, and the final checkpoints' model and optimizer tensors
#    identical (h5diff);
#  - the distributed optimizer at DP 2, 4 and 8 equal to DP 1 likewise (its reduce-scatter by
#    recursive halving, the norm by fixed blocks);
#  - TP2 x DP2 equal to TP2 x DP1, with the distributed optimizer too; PP2 x DP2 (tied embeddings
#    summed across the stages after the tree) equal to PP2 x DP1;
#  - a run saved at DP4 and resumed at DP2 continues with the DP4 run's losses and ends with its
#    parameters, bit for bit;
#  - a batch-size ramp (the number of micro-batches changes) at DP1 and DP2;
#  - a data-parallel size that is not a power of two says that the bits hold at that size only.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --num-layers 2 --train-iters 4 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1
       --eval-interval 2 --eval-iters 1 --micro-batch-size 2 --global-batch-size 16 --deterministic-mode
       --hidden-dropout 0.1 --attention-dropout 0.1"

# losses_of TAG: TAG.jsonl's training losses and grad norms, then its validation losses, in TAG.loss
losses_of() {
    json_field "$WORK/$1.jsonl" train lm_loss > "$WORK/$1.l"
    json_field "$WORK/$1.jsonl" train grad_norm > "$WORK/$1.g"
    paste -d ' ' "$WORK/$1.l" "$WORK/$1.g" > "$WORK/$1.loss"
    json_field "$WORK/$1.jsonl" validation lm_loss | sed 's/^/validation /' >> "$WORK/$1.loss"
}
# run TAG NRANKS FLAGS...: losses in TAG.loss, parameters in TAG.bin
run() {
    run_tag=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$run_tag.jsonl" --dump-parameters "$WORK/$run_tag.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run_tag failed ($status): $(tail -1 "$WORK/err")"; return $status; }
    losses_of "$run_tag"
    [ "$(wc -l < "$WORK/$run_tag.l")" -eq "${ITERATIONS:-4}" ]
}
# same A B DESCRIPTION: losses, grad norms and parameters of runs A and B bitwise equal (and
# logged: at least 4 iterations)
same() {
    [ "$(cat "$WORK/$1.l" 2>/dev/null | wc -l)" -ge 4 ] &&
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
losses_of resumed
same dist4 resumed "resume: iterations 1-4, the validation losses and the final parameters bitwise those of the unbroken DP4 run"

# ---- a batch-size ramp: global batches of 4, 4, 8, 12, 16, 16 samples (DP1: 2, 2, 4, 6, 8, 8
# micro-batches, the tree rebuilt for each count; 6 is no power of two) ----
RAMP="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
      --vocab-size 256 --mock-data --lr 1e-3 --log-interval 1 --eval-iters 0 --micro-batch-size 2
      --global-batch-size 16 --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1
      --rampup-batch-size 4 4 24 --train-samples 64 --lr-warmup-samples 4"
for n in 1 2; do
    [ $n -eq 2 ] && RAMP="$RAMP --use-distributed-optimizer"
    run_app $n $RAMP --metrics-file "$WORK/ramp$n.jsonl" --dump-parameters "$WORK/ramp$n.bin" ||
        diag "ramp at DP$n failed: $(tail -1 "$WORK/err")"
    losses_of ramp$n
done
same ramp1 ramp2 "--rampup-batch-size: DP2 (distributed optimizer) bitwise DP1 over 6 iterations of 2 to 8 micro-batches"

# ---- not a power of two ----
ITERATIONS=1 run dp3 3 --global-batch-size 12 --train-iters 1
grep -q "note: --deterministic-mode reproduces this run bitwise at data-parallel size 3 only: the data-parallel size is not a power of two" "$WORK/out"
ok $? "DP3: the start-up log says the bits hold at that size only"

done_testing
