#!/bin/sh
# grad_first_write_test.sh: a step's weight matrices are written over by their first weight
# gradient instead of being cleared (app/model/grad_first_write.c). On the CPU that must give
# the bits of clearing every gradient (MEGATRON_C_CLEAR_ALL_GRADS=1): losses and every parameter
# after 3 iterations identical, for each place the first write differs: several micro-batches
# (the later ones accumulate), the chunked loss (the output layer's later chunks accumulate),
# tied embeddings on one stage (the output layer writes them first, the embedding's scatter-add
# then accumulates), PP2 (the first stage's embeddings are cleared, the last stage's copy is
# written over), untied embeddings, TP2 with sequence parallelism and --tp-comm-overlap (weight
# gradients by blocks), DP2 with the distributed optimizer and gradient buckets reduced during
# the backward, a kept MLP activation (fc2's weight gradient before its input gradient), and
# Llama (SwiGLU, RMSNorm, no biases). The start-up log names how many matrices are written over.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --device cpu"

run() {  # TAG NRANKS FLAGS...: metrics in TAG.jsonl, parameters in TAG.bin, the log in TAG.out
    run_tag=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$run_tag.jsonl" --dump-parameters "$WORK/$run_tag.bin"
    status=$?
    cp "$WORK/out" "$WORK/$run_tag.out"
    [ $status -eq 0 ] || { diag "$run_tag: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    json_field "$WORK/$run_tag.jsonl" train lm_loss > "$WORK/$run_tag.loss"
    return $status
}

check() {  # NAME NRANKS FLAGS...
    name=$1; n=$2; shift 2
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run "$tag.over" "$n" "$@" && MEGATRON_C_CLEAR_ALL_GRADS=1 run "$tag.clear" "$n" "$@" ||
        { ok 1 "$name: runs"; return; }
    cmp -s "$WORK/$tag.over.bin" "$WORK/$tag.clear.bin" && [ -s "$WORK/$tag.over.bin" ] &&
        cmp -s "$WORK/$tag.over.loss" "$WORK/$tag.clear.loss" && [ "$(wc -l < "$WORK/$tag.over.loss")" -eq 3 ]
    ok $? "$name: losses and parameters after 3 iterations bitwise those of clearing every gradient"
}

check "one rank, 4 micro-batches, chunked loss, tied" 1 --global-batch-size 8 --micro-batch-size 2 \
    --cross-entropy-chunk-rows 100
first="$WORK/one_rank__4_micro_batches__chunked_loss__tied"  # that check's tag
matrices=$(sed -n 's/^> gradients: \([0-9]*\) weight matrices.*/\1/p' "$first.over.out")
layers=$(sed -n 's/.*--num-layers[ =]\([0-9]*\).*/\1/p' "$TINY_ARGS" | head -1)
[ -n "$matrices" ] && [ "$matrices" -eq $((4 * ${layers:-0} + 1)) ]
ok $? "the start-up log names 4 matrices per layer and the tied embeddings as written over ($matrices, $layers layers)"
clear_line=$(grep "^> gradients:" "$first.clear.out")
echo "$clear_line" | grep -q "^> gradients: 0 weight matrices"
ok $? "MEGATRON_C_CLEAR_ALL_GRADS=1 writes none over ($clear_line)"
check "untied" 1 --untie-embeddings-and-output-weights
check "PP2 tied" 2 --pipeline-model-parallel-size 2 --global-batch-size 8 --micro-batch-size 2
check "TP2 sequence parallel, --tp-comm-overlap" 2 --tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap
check "DP2 distributed optimizer, overlapped buckets" 2 --use-distributed-optimizer --overlap-grad-reduce \
    --ddp-bucket-size 5000
check "kept MLP activation" 1 --keep-mlp-activation
MODEL=$(echo "$MODEL" | sed "s|$TINY_ARGS|$top_srcdir/configs/llama-tiny.args|")
check "Llama TP2 sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel

done_testing
