#!/bin/sh
# loss_chunk_test.sh: --cross-entropy-chunk-rows (the output layer, the cross entropy and their
# backward in chunks of token rows, so one chunk's logits exist at a time) on 2 ranks of the tiny
# GPT (256 rows per micro-batch, chunks of 100, 100 and 56) for each layout the loss meets: DP2 with
# the distributed optimizer, TP2 with and without sequence parallelism (the vocab-parallel
# statistics all-reduced per chunk), PP2 interleaved (the loss on one stage, the weight gradient
# made in the forward, reduced in the backward). Against one pass: training and validation
# losses over 4 iterations within 1e-5 (relative; the weight gradient's sum over rows is grouped
# differently: about 1e-9 seen), parameters within 1e-3 (AdamW's m / sqrt(v) turns the last-bit
# differences of near-zero gradients into relative ones: about 1e-4 seen; a wrong or missing
# chunk is far larger). (That forward-only passes leave the gradients alone is checked by
# tests/unit/gpt_model_test's finite differences of the chunked loss.) A negative chunk size is refused.
. "${top_srcdir:-.}/tests/lib.sh"
COMPARE="$top_builddir/tests/tools/compare_params"
MODEL="--args-file $TINY_ARGS --train-iters 4 --lr-warmup-iters 1 --log-interval 1 --eval-interval 2 --eval-iters 1
       --hidden-dropout 0.1 --attention-dropout 0.1 --device cpu"

run() {  # TAG FLAGS...: metrics in TAG.jsonl, parameters in TAG.bin
    run_tag=$1; shift
    run_app 2 $MODEL "$@" --metrics-file "$WORK/$run_tag.jsonl" --dump-parameters "$WORK/$run_tag.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run_tag: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    json_field "$WORK/$run_tag.jsonl" train lm_loss > "$WORK/$run_tag.loss"
    json_field "$WORK/$run_tag.jsonl" validation lm_loss >> "$WORK/$run_tag.loss"
    return $status
}

check_layout() {  # NAME LAYOUT...
    name=$1; shift
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run "$tag.one" "$@" && run "$tag.chunked" "$@" --cross-entropy-chunk-rows 100 ||
        { ok 1 "$name: runs"; ok 1 "$name: parameters"; return; }
    compare_losses "$tag.one" "$tag.chunked" 1e-5 7 "$name: 4 training and 3 validation losses of the chunked loss within 1e-5 of one pass"
    "$COMPARE" "$WORK/$tag.one.bin" "$WORK/$tag.chunked.bin" 1e-3 > "$WORK/cmp" 2>&1
    status=$?
    sed 's/^/# /' "$WORK/cmp" | tail -1
    ok $status "$name: parameters after 4 iterations within 1e-3 of one pass"
}

check_layout "DP2 distributed optimizer" --use-distributed-optimizer --overlap-grad-reduce
check_layout "TP2 sequence parallel" --tensor-model-parallel-size 2 --sequence-parallel
check_layout "TP2" --tensor-model-parallel-size 2
check_layout "PP2 interleaved" --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1

run_app 1 --args-file "$TINY_ARGS" --train-iters 1 --cross-entropy-chunk-rows -5
[ $? -ne 0 ] && grep -q "cross-entropy-chunk-rows" "$WORK/err"
ok $? "a negative --cross-entropy-chunk-rows is refused, naming the flag"

done_testing
