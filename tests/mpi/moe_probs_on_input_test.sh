#!/bin/sh
# moe_probs_on_input_test.sh: --moe-apply-probs-on-input (top-1: the routing weight scales the
# token's row before its expert, whose output adds with weight 1) on configs/mixtral-tiny.args
# with sigmoid scores, 3 iterations: the losses differ from the weight on the output (the flag
# changes the model), expert parallelism over 2 ranks and tensor parallelism 2 give the one-rank
# losses within 1e-6 relative, and --recompute-modules moe gives them bitwise. The gradients
# themselves are checked against finite differences in tests/unit/gpt_model_test.
. "${top_srcdir:-.}/tests/lib.sh"
MIXTRAL="--args-file $top_srcdir/configs/mixtral-tiny.args --device cpu --train-iters 3 --lr-warmup-iters 0
         --eval-iters 0 --log-interval 1 --moe-router-topk 1 --moe-router-score-function sigmoid"

# run RANKS TAG FLAGS...: losses in $WORK/TAG.loss
run() {
    ranks=$1; tag=$2; shift 2
    run_app "$ranks" $MIXTRAL "$@" --metrics-file "$WORK/$tag.jsonl"; status=$?
    [ $status -eq 0 ] || { diag "$tag: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    json_field "$WORK/$tag.jsonl" train lm_loss > "$WORK/$tag.loss" 2>/dev/null
    return $status
}
close() {  # close A B: 3 losses within 1e-6 relative
    [ "$(wc -l < "$WORK/$1.loss")" -eq 3 ] &&
        paste "$WORK/$1.loss" "$WORK/$2.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $1) bad = 1 } END { exit bad }'
}

run 1 output
run 1 input --moe-apply-probs-on-input
[ "$(wc -l < "$WORK/input.loss")" -eq 3 ] && ! cmp -s "$WORK/output.loss" "$WORK/input.loss"
ok $? "the weight on the input gives other losses than on the output"
diag "output: $(tr '\n' ' ' < "$WORK/output.loss"); input: $(tr '\n' ' ' < "$WORK/input.loss")"
run 2 input_ep2 --moe-apply-probs-on-input --expert-model-parallel-size 2
close input input_ep2
ok $? "EP2: the one-rank losses within 1e-6 relative"
run 2 input_tp2 --moe-apply-probs-on-input --tensor-model-parallel-size 2 --sequence-parallel
close input input_tp2
ok $? "TP2 with sequence parallelism: the one-rank losses within 1e-6 relative"
run 1 input_recompute --moe-apply-probs-on-input --recompute-granularity selective --recompute-modules moe
cmp -s "$WORK/input.loss" "$WORK/input_recompute.loss"
ok $? "--recompute-modules moe: the losses bitwise"
done_testing
