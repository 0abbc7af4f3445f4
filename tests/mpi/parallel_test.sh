#!/bin/sh
# parallel_test.sh: every parallel layout trains exactly like one rank. For each layout, the
# losses of 5 iterations equal the single-rank run's within 1e-5 relative and every parameter
# after 5 steps equals it within 1e-5 (max |difference| / max |value| per tensor), fp32 CPU,
# dropout on. Also: pretended multi-node layouts keep tensor-parallel groups inside a node,
# and layout errors stop before any work.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"
. "$top_srcdir/tests/mpi/parallel_compare.sh"

reference tied
layout "TP2" 2 --tensor-model-parallel-size 2
layout "TP4" 4 --tensor-model-parallel-size 4
layout "PP2" 2 --pipeline-model-parallel-size 2
layout "PP4" 4 --pipeline-model-parallel-size 4
layout "PP2 interleaved x2 virtual" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
layout "DP2 (overlapped bucketed reduction)" 2 --overlap-grad-reduce --ddp-bucket-size 20000
layout "DP4 distributed optimizer" 4 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
layout "TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
grep -q "reductions started during the backward: 0" "$WORK/out"
ok $? "without --overlap-grad-reduce nothing starts before the backward ends"
reference untied --untie-embeddings-and-output-weights
layout "TP2 PP2 untied embeddings" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --untie-embeddings-and-output-weights
base=tied
layout "TP2xPP2xDP2 SP + distributed optimizer" 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000

# the overlapped reduction really starts buckets during the backward (rank 0 is a first stage)
grep -q "reductions started during the backward: [1-9]" "$WORK/out"
ok $? "--overlap-grad-reduce starts bucket reductions during the backward ($(grep -o 'gradient buckets: .*' "$WORK/out"))"

# memory per parameter follows Megatron's table
grep -q "memory per parameter (fp32): 12.00 bytes" "$WORK/out"
ok $? "distributed optimizer with d = 2 keeps 8 + 8/d = 12 bytes per parameter"

# pretended nodes: 2 nodes x 4 ranks launched round-robin; TP4 groups must stay on one node
MTC_PRETEND_RANKS_PER_NODE=4:cyclic run_app 8 $MODEL --train-iters 1 --tensor-model-parallel-size 4
status=$?
awk '/^ +[0-9]+ / { node[$1] = $3; tp[$1] = $6; pp[$1] = $7; dp[$1] = $8 }
     END { for (r in node) { key = pp[r] "/" dp[r]; if (key in seen && seen[key] != node[r]) exit 1; seen[key] = node[r] } exit 0 }' "$WORK/out"
ok $((status + $?)) "2 pretended nodes x 4 ranks (cyclic launch): each TP4 group sits inside one node"
! grep -q "spans nodes" "$WORK/out"
ok $? "no cross-node warning when TP fits in a node"
MTC_PRETEND_RANKS_PER_NODE=2 run_app 8 $MODEL --train-iters 1 --tensor-model-parallel-size 4
grep -q "WARNING: a tensor-parallel group of 4 ranks spans nodes (2 ranks per node)" "$WORK/out"
ok $? "a TP group larger than a node gets a warning"

# layout errors: one message from rank 0, every rank exits non-zero, nothing runs
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
expect_error "world size not divisible by TP x PP" "world size 3 is not divisible by --tensor-model-parallel-size 2 x --pipeline-model-parallel-size 1 (= 2)" 3 --tensor-model-parallel-size 2
expect_error "heads not divisible by TP" "\-\-num-attention-heads 4 is not divisible by --tensor-model-parallel-size 8" 8 --tensor-model-parallel-size 8
expect_error "layers not divisible by PP" "\-\-num-layers 4 is not divisible by --pipeline-model-parallel-size 3" 3 --pipeline-model-parallel-size 3
expect_error "layers per stage not divisible by virtual stage size" "\-\-num-layers-per-virtual-pipeline-stage 3 does not divide the 2 layers" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3
expect_error "micro-batch count the interleaved schedule cannot take" "the interleaved schedule needs the number of micro-batches (3" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --global-batch-size 6
expect_error "sequence parallel needs the sequence divisible by TP" "\-\-seq-length 63 is not divisible by --tensor-model-parallel-size 2" 2 --tensor-model-parallel-size 2 --sequence-parallel --seq-length 63
expect_error "overlap-param-gather needs the distributed optimizer" "\-\-overlap-param-gather needs --use-distributed-optimizer" 2 --overlap-param-gather
expect_error "interleaving needs several stages" "needs --pipeline-model-parallel-size > 1" 1 --virtual-pipeline-model-parallel-size 2

done_testing
