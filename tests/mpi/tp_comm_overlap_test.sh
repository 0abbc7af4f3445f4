#!/bin/sh
# tests/mpi/tp_comm_overlap_test.sh: --tp-comm-overlap on the CPU backend (the MPI path of the
# one-sided windows: post = MPI_Isend, fetch = MPI_Irecv; app/parallel/tp_overlap.h). The
# overlapped schedule splits the GEMMs by token-row blocks and sums the reduce-scatter's partials
# in rank order; OpenBLAS computes each output row the same whatever the row count, and at TP2
# a + b is what MPI's reduce-scatter adds too, so TP2 trains the same bits as without the flag
# (GPT with dropout, with full and layer-norm recompute, with the MLP activation kept; Llama, also
# with it kept;
# TP2 x DP2; TP2 x PP2, also interleaved; with --disable-tp-comm-overlap-ag or -rs). At TP4 MPI's reduction order differs from rank order: losses within 1e-5 relative
# and every parameter within 1e-5. Then the refusals, each with its message.
# The premise holds for OpenBLAS's Sandybridge kernels but not for its Haswell ones, which it
# also picks on AMD Zen (the first loss of GPT TP2 SP differs in the 9th digit on an EPYC): the
# test pins the Sandybridge kernels (AVX, on every x86-64 CPU this suite runs on) through
# OpenBLAS's runtime kernel choice.
. "${top_srcdir:-.}/tests/lib.sh"
case $(uname -m) in x86_64) export OPENBLAS_CORETYPE=Sandybridge ;; esac
COMPARE="$top_builddir/tests/tools/compare_params"
GPT="--args-file $TINY_ARGS --train-iters 4 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
     --hidden-dropout 0.1 --attention-dropout 0.1"
LLAMA="--args-file $top_srcdir/configs/llama-tiny.args --train-iters 4 --lr-warmup-iters 1 --log-interval 1
       --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1"

losses() { json_field "$1" train lm_loss; }

# run NAME NRANKS FLAGS...: with the flag and without; $WORK/NAME.{on,off}.{jsonl,bin}
run_pair() {
    name=$1; n=$2; shift 2
    run_app "$n" "$@" --tp-comm-overlap --metrics-file "$WORK/$name.on.jsonl" --dump-parameters "$WORK/$name.on.bin"
    s1=$?
    [ $s1 -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -5
    run_app "$n" "$@" --metrics-file "$WORK/$name.off.jsonl" --dump-parameters "$WORK/$name.off.bin"
    s0=$?
    [ $s1 -eq 0 ] && [ $s0 -eq 0 ]
}

# bitwise NAME NRANKS FLAGS...: same losses and parameters, bit for bit
bitwise() {
    name=$1; n=$2
    run_pair "$@"
    status=$?
    [ $status -eq 0 ] && cmp -s "$WORK/$name.on.bin" "$WORK/$name.off.bin" &&
        [ "$(losses "$WORK/$name.on.jsonl")" = "$(losses "$WORK/$name.off.jsonl")" ] &&
        [ -n "$(losses "$WORK/$name.on.jsonl")" ]
    ok $? "$name: --tp-comm-overlap trains the same losses and parameters, bit for bit"
}

bitwise "GPT TP2 SP" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel
bitwise "GPT TP2 SP full recompute" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
bitwise "GPT TP2 SP layernorm recompute" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel \
    --recompute-granularity selective --recompute-modules core_attn layernorm
bitwise "GPT TP2 SP kept MLP activation" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel --keep-mlp-activation
bitwise "Llama TP2 SP" 2 $LLAMA --tensor-model-parallel-size 2 --sequence-parallel
bitwise "Llama TP2 SP kept MLP activation" 2 $LLAMA --tensor-model-parallel-size 2 --sequence-parallel \
    --keep-mlp-activation
bitwise "GPT TP2 x DP2 SP" 4 $GPT --tensor-model-parallel-size 2 --sequence-parallel
bitwise "GPT TP2 x PP2 SP" 4 $GPT --tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2
# interleaved: a stage runs backward passes back to back, where the output layer's reduce-scatter
# follows the first layer's and runs as a collective (gpt_model.c rs_by_blocks)
bitwise "GPT TP2 x PP2 interleaved SP" 4 $GPT --tensor-model-parallel-size 2 --sequence-parallel \
    --pipeline-model-parallel-size 2 --num-layers 4 --num-layers-per-virtual-pipeline-stage 1
bitwise "GPT TP2 SP, all-gathers not overlapped" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel \
    --disable-tp-comm-overlap-ag
bitwise "GPT TP2 SP, reduce-scatters not overlapped" 2 $GPT --tensor-model-parallel-size 2 --sequence-parallel \
    --disable-tp-comm-overlap-rs

run_pair tp4 4 $GPT --tensor-model-parallel-size 4 --sequence-parallel
ok $? "GPT TP4 SP: trains with and without --tp-comm-overlap"
losses "$WORK/tp4.on.jsonl" > "$WORK/tp4.on.loss"
losses "$WORK/tp4.off.jsonl" > "$WORK/tp4.off.loss"
compare_losses tp4.off tp4.on 1e-5 4 "GPT TP4 SP: losses with --tp-comm-overlap within 1e-5 of without"
# relative to at least 1e-2, the scale 4 Adam steps at lr 3e-3 move a parameter (as
# parallel_compare.sh): a norm bias still near its zero initialization is not judged by its own
# tiny values (with the hidden dropout's 16-bit draws its rounding noise at TP4 came to 1.19e-5 of
# its largest value, 6.8e-6 of 1e-2)
result=$(COMPARE_PARAMS_FLOOR=1e-2 "$COMPARE" "$WORK/tp4.off.bin" "$WORK/tp4.on.bin" 1e-5 4 16); status=$?
diag "$result"
ok $status "GPT TP4 SP: every parameter with --tp-comm-overlap within 1e-5 of without"

# refused: one clear message each, before training starts
refused() {  # WHAT EXPECTED-MESSAGE NRANKS FLAGS...
    what=$1; message=$2; n=$3; shift 3
    run_app "$n" $GPT "$@" --tp-comm-overlap
    status=$?
    [ $status -ne 0 ] && grep -q -- "$message" "$WORK/out" "$WORK/err"
    ok $? "refused $what: '$message'"
}
refused "without --sequence-parallel" "--tp-comm-overlap needs --sequence-parallel" 2 --tensor-model-parallel-size 2
refused "at TP1 (nothing to overlap)" "--tp-comm-overlap needs --sequence-parallel" 1 --sequence-parallel
done_testing
