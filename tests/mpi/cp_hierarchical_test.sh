#!/bin/sh
# cp_hierarchical_test.sh: hierarchical context parallelism (--cp-comm-type a2a+p2p with
# --hierarchical-context-parallel-sizes, Megatron's): the heads are exchanged for the sequence by
# all-to-all among N1 consecutive CP ranks, then the keys and values go around a p2p ring of the
# N2 ranks N1 apart. Each layout's losses over 5 iterations equal the single-rank run's within
# 1e-6 relative and every parameter after 5 steps within 1e-5 (fp32 CPU, dropout on): CP4 = 2 x 2
# alone, with DP2 (8 ranks) and mixed per layer with p2p and allgather, and 1 x 4 (the ring alone)
# on GPT, and CP4 = 2 x 2 on Llama (RoPE, grouped-query attention).
# Bad flags (Megatron's checks) stop before any work with one message.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"
TOLERANCE=1e-6
. "$top_srcdir/tests/mpi/parallel_compare.sh"
H="--context-parallel-size 4 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes"

reference gpt
layout "CP4 a2a+p2p 2 x 2" 4 $H 2 2
layout "CP4 a2a+p2p 2 x 2 x DP2" 8 $H 2 2
layout "CP4 a2a+p2p 1 x 4 (the ring alone)" 4 $H 1 4
layout "CP4 by layer: a2a+p2p 2 x 2, p2p, allgather, a2a+p2p; full recompute" 4 --context-parallel-size 4 \
    --cp-comm-type a2a+p2p p2p allgather a2a+p2p --hierarchical-context-parallel-sizes 2 2 \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 2

MODEL=$(echo "$MODEL" | sed "s|$TINY_ARGS|$top_srcdir/configs/llama-tiny.args|")
reference llama
layout "Llama CP4 a2a+p2p 2 x 2" 4 $H 2 2

# bad flags: one message, nothing runs
expect_error() {
    desc=$1; pattern=$2; n=$3; shift 3
    run_app "$n" $MODEL "$@"; status=$?
    lines=$(grep -c "error:" "$WORK/err")
    if [ "$status" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q -- "$pattern" "$WORK/err" && ! grep -q "layout:" "$WORK/out"; then
        ok 0 "$desc"
    else
        ok 1 "$desc"; diag "status $status, $lines error lines:"; sed 's/^/#   /' "$WORK/err" | head -5
    fi
}
expect_error "a2a+p2p needs the hierarchical sizes" \
    "\-\-cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes" 4 --context-parallel-size 4 --cp-comm-type a2a+p2p
expect_error "the sizes' product must be the CP size" \
    "\-\-hierarchical-context-parallel-sizes 2 x 1 = 2 is not --context-parallel-size 4" 4 $H 2 1
expect_error "two sizes" "\-\-hierarchical-context-parallel-sizes gives 3 sizes: give two" 4 $H 2 2 1
expect_error "sizes are positive integers" "\-\-hierarchical-context-parallel-sizes: 'x' is not a positive integer" 4 $H 2 x
expect_error "the sizes are for a2a+p2p only" \
    "\-\-hierarchical-context-parallel-sizes is used by --cp-comm-type a2a+p2p only (here: p2p)" \
    4 --context-parallel-size 4 --hierarchical-context-parallel-sizes 2 2
expect_error "the a2a group must divide the heads and query groups" \
    "\-\-cp-comm-type a2a+p2p splits each tensor-parallel rank's heads over the a2a group: --num-attention-heads 4 and the query groups 2 divided by --tensor-model-parallel-size 2 must be multiples of --hierarchical-context-parallel-sizes' first size 2" \
    8 $H 2 2 --tensor-model-parallel-size 2

done_testing
