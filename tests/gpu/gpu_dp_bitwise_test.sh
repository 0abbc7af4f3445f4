#!/bin/sh
# gpu_dp_bitwise_test.sh: --deterministic-mode on the CUDA backend gives the same bits at every
# data-parallel size (app/optim/fixed_tree_reduce.h: one summation tree over the global batch's
# micro-batches; kernels/cuda/cuda_fixed_tree.cu; NCCL sends and receives between the ranks), as
# tests/mpi/dp_bitwise_test.sh checks on the CPU. The same global batch (16 samples, 2 per
# micro-batch), 6 iterations, dropout on, validation every 2. Skipped where no GPU is visible.
#  - one GPU: the start-up log says the fixed tree is used (no fallback note); two runs give
#    bitwise-identical training and validation losses, grad norms and parameters
#    (--dump-parameters); the distributed optimizer gives the same bits; a run saved at
#    iteration 2 and resumed continues bit for bit;
#  - two GPUs (when present): DP2 bitwise DP1, and its final checkpoint's model and optimizer
#    tensors DP1's (h5diff, where installed); DP2 with the distributed optimizer, and with
#    --overlap-grad-reduce --overlap-param-gather, bitwise DP1; a run saved at DP2 and resumed at
#    DP1, and one saved at DP1 and resumed at DP2, continue with the unbroken run's losses and end
#    with its parameters, bit for bit;
#  - four GPUs (when present): DP4 and DP4 with the distributed optimizer bitwise DP1, TP2 x DP2
#    bitwise TP2 x DP1, PP2 x DP2 (tied embeddings across the stages) bitwise PP2 x DP1, saved at
#    DP4 and resumed at DP2 bitwise.
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt with top_srcdir holding
# tests/ and configs/.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 1

ITERATIONS=6
# hidden 128, 128 tokens: each norm block holds two chunks of the tree (4096 elements)
MODEL="--args-file $TINY_ARGS --device cuda --num-layers 2 --hidden-size 128 --num-attention-heads 4
       --seq-length 128 --max-position-embeddings 128 --train-iters $ITERATIONS --lr 1e-3 --lr-warmup-iters 1
       --log-interval 1 --eval-interval 2 --eval-iters 1 --micro-batch-size 2 --global-batch-size 16
       --deterministic-mode --hidden-dropout 0.1 --attention-dropout 0.1"

# losses_of TAG: TAG.jsonl's training losses and grad norms, then its validation losses, in TAG.loss
losses_of() {
    json_field "$WORK/$1.jsonl" train lm_loss > "$WORK/$1.l"
    json_field "$WORK/$1.jsonl" train grad_norm > "$WORK/$1.g"
    paste -d ' ' "$WORK/$1.l" "$WORK/$1.g" > "$WORK/$1.loss"
    json_field "$WORK/$1.jsonl" validation lm_loss | sed 's/^/validation /' >> "$WORK/$1.loss"
}
# run TAG NRANKS FLAGS...: losses in TAG.loss, parameters in TAG.bin, the log in TAG.out
run() {
    run_tag=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$run_tag.jsonl" --dump-parameters "$WORK/$run_tag.bin"
    status=$?
    cp "$WORK/out" "$WORK/$run_tag.out"
    [ $status -eq 0 ] || { diag "$run_tag failed ($status):"; sed 's/^/#   /' "$WORK/err" | tail -8; return $status; }
    losses_of "$run_tag"
    [ "$(wc -l < "$WORK/$run_tag.l")" -eq $ITERATIONS ]
}
# same A B DESCRIPTION: losses, grad norms and parameters of runs A and B bitwise equal (and
# logged: every iteration)
same() {
    [ "$(cat "$WORK/$1.l" 2>/dev/null | wc -l)" -eq $ITERATIONS ] && [ -s "$WORK/$1.bin" ] &&
        cmp -s "$WORK/$1.loss" "$WORK/$2.loss" && cmp -s "$WORK/$1.bin" "$WORK/$2.bin"
    status=$?
    [ $status -eq 0 ] || paste "$WORK/$1.loss" "$WORK/$2.loss" 2>/dev/null | sed 's/^/#   /'
    ok $status "$3"
}
# tree_used TAG: the start-up log names the fixed tree and has no fallback note
tree_used() {
    grep -q "^> --deterministic-mode: gradients, loss and gradient norm summed by one fixed tree .*(cuda backend)" \
        "$WORK/$1.out" && ! grep -q "note: --deterministic-mode reproduces this run bitwise at data-parallel size" \
        "$WORK/$1.out"
}
# resumed FROM_TAG SAVE_RANKS LOAD_RANKS FLAGS...: saved at iteration 2 with SAVE_RANKS, resumed
# with LOAD_RANKS to the end; the joined losses in resumed_FROM_TAG.loss, parameters in its .bin
resumed() {
    tag=resumed_$1; save_ranks=$2; load_ranks=$3; shift 3
    run_app "$save_ranks" $MODEL "$@" --save "$WORK/$tag.ckpt" --save-interval 2 --exit-interval 2 \
        --metrics-file "$WORK/$tag.first.jsonl"
    first=$?
    [ $first -eq 0 ] || { diag "$tag: the first part failed:"; sed 's/^/#   /' "$WORK/err" | tail -8; }
    run_app "$load_ranks" $MODEL "$@" --load "$WORK/$tag.ckpt" --metrics-file "$WORK/$tag.second.jsonl" \
        --dump-parameters "$WORK/$tag.bin"
    second=$?
    [ $second -eq 0 ] || { diag "$tag: the resumed part failed:"; sed 's/^/#   /' "$WORK/err" | tail -8; }
    grep -q "loaded checkpoint .*iter_0000002.h5: iteration 2" "$WORK/out"
    loaded=$?
    cat "$WORK/$tag.first.jsonl" "$WORK/$tag.second.jsonl" > "$WORK/$tag.jsonl" 2>/dev/null
    losses_of "$tag"
    return $(( first + second + loaded ))
}

# ---- one GPU ----
run dp1 1 --save "$WORK/ckpt1"
ok $? "DP1: $ITERATIONS iterations on one GPU"
diag "DP1 losses and grad norms: $(head -3 "$WORK/dp1.loss" | tr '\n' ' ')"
tree_used dp1
ok $? "DP1: the start-up log says the fixed tree sums the gradients on the cuda backend, no fallback note"
run dp1_again 1
same dp1 dp1_again "DP1 twice: losses, grad norms and final parameters bitwise equal"
run dp1_dist 1 --use-distributed-optimizer
same dp1 dp1_dist "DP1 with the distributed optimizer (the norm's ranges cut otherwise): bitwise DP1"
resumed dp1 1 1
ok $? "resume: DP1 saves iteration 2, DP1 loads it and trains to $ITERATIONS"
same dp1 resumed_dp1 "resume DP1 -> DP1: iterations 1-$ITERATIONS, the validation losses and the final parameters bitwise the unbroken run's"

# ---- two GPUs ----
if [ "$gpus" -ge 2 ]; then
    run dp2 2 --save "$WORK/ckpt2"
    ok $? "DP2: $ITERATIONS iterations on two GPUs"
    tree_used dp2
    ok $? "DP2: the fixed tree, no fallback note"
    same dp1 dp2 "DP2: losses, grad norms and final parameters bitwise those of DP1"
    if command -v h5diff > /dev/null; then
        last=$(printf 'iter_%07d.h5' $ITERATIONS)
        h5diff -q "$WORK/ckpt1/$last" "$WORK/ckpt2/$last" /model /model &&
            h5diff -q "$WORK/ckpt1/$last" "$WORK/ckpt2/$last" /optimizer /optimizer
        ok $? "DP2: the final checkpoint's model and optimizer tensors are DP1's (h5diff)"
    else
        diag "no h5diff: the checkpoints' tensors are not compared"
    fi
    run dist2 2 --use-distributed-optimizer
    same dp1 dist2 "DP2 with the distributed optimizer: bitwise DP1"
    run dist2_overlap 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
    same dp1 dist2_overlap "DP2 with the distributed optimizer, --overlap-grad-reduce --overlap-param-gather: bitwise DP1"
    resumed dp2_to_dp1 2 1 --use-distributed-optimizer
    ok $? "resume: DP2 (distributed optimizer) saves iteration 2, DP1 loads it and trains to $ITERATIONS"
    same dp1 resumed_dp2_to_dp1 "resume DP2 -> DP1: every loss, grad norm and the final parameters bitwise the unbroken run's"
    resumed dp1_to_dp2 1 2 --use-distributed-optimizer
    ok $? "resume: DP1 (distributed optimizer) saves iteration 2, DP2 loads it and trains to $ITERATIONS"
    same dp1 resumed_dp1_to_dp2 "resume DP1 -> DP2: every loss, grad norm and the final parameters bitwise the unbroken run's"
else
    diag "one GPU: DP2, DP2 with the distributed optimizer and the resumes at another DP size are not run"
fi

# ---- four GPUs ----
if [ "$gpus" -ge 4 ]; then
    run dp4 4
    same dp1 dp4 "DP4: bitwise DP1"
    run dist4 4 --use-distributed-optimizer
    same dp1 dist4 "DP4 with the distributed optimizer: bitwise DP1"
    run tp2 2 --tensor-model-parallel-size 2
    ok $? "TP2 x DP1: $ITERATIONS iterations"
    run tp2dp2 4 --tensor-model-parallel-size 2 --use-distributed-optimizer
    same tp2 tp2dp2 "TP2 x DP2 with the distributed optimizer: bitwise TP2 x DP1"
    run pp2 2 --pipeline-model-parallel-size 2
    ok $? "PP2 x DP1: $ITERATIONS iterations"
    run pp2dp2 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer
    same pp2 pp2dp2 "PP2 x DP2 (tied embeddings across the stages, distributed optimizer): bitwise PP2 x DP1"
    resumed dp4_to_dp2 4 2 --use-distributed-optimizer
    ok $? "resume: DP4 (distributed optimizer) saves iteration 2, DP2 loads it and trains to $ITERATIONS"
    same dp1 resumed_dp4_to_dp2 "resume DP4 -> DP2: bitwise the unbroken run's"
fi
done_testing
