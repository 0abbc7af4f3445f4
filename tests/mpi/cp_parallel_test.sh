#!/bin/sh
# cp_parallel_test.sh: context parallelism (--context-parallel-size, Megatron's; ring attention)
# trains like one rank. Each layout's losses over 5 iterations equal the single-rank run's within
# 1e-6 relative and every parameter after 5 steps within 1e-5 (max |difference| / max |value|
# per tensor), fp32 CPU, hidden and attention dropout on (the masks are drawn at the rows' global
# positions, so they are one rank's): CP2 and CP4 alone (p2p ring, allgather, a2a, per-layer
# mixes with full recompute), CP2 with TP2 (+SP), PP2, DP2 and the distributed optimizer; the GPT (learned
# positions) and Llama (RoPE, grouped-query attention) models. A checkpoint saved with CP2 resumes
# with CP1 on the same losses; CP sits in Megatron's rank order (tp fastest, then cp); bad flags
# stop before any work with one message. a2a+p2p (hierarchical): cp_hierarchical_test.sh.
. "${top_srcdir:-.}/tests/lib.sh"
MODEL="--args-file $TINY_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"
TOLERANCE=1e-6
. "$top_srcdir/tests/mpi/parallel_compare.sh"

reference gpt
layout "CP2 (p2p ring)" 2 --context-parallel-size 2
layout "CP4 (p2p ring)" 4 --context-parallel-size 4
layout "CP4 allgather" 4 --context-parallel-size 4 --cp-comm-type allgather
layout "CP2 p2p, allgather and a2a by layer, full recompute" 2 --context-parallel-size 2 --cp-comm-type p2p allgather a2a p2p \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 2
layout "CP2 x TP2 + sequence parallel" 4 --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "CP2 a2a x TP2 + sequence parallel" 4 --context-parallel-size 2 --cp-comm-type a2a --tensor-model-parallel-size 2 --sequence-parallel
layout "CP2 x PP2" 4 --context-parallel-size 2 --pipeline-model-parallel-size 2
layout "CP2 x DP2 distributed optimizer (overlapped)" 4 --context-parallel-size 2 --use-distributed-optimizer \
    --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
grep -q "memory per parameter (fp32): 10.00 bytes" "$WORK/out"
ok $? "CP2 x DP2: the distributed optimizer shards over data x context parallel (8 + 8/4 = 10 bytes per parameter)"

# the rank order: tensor-parallel fastest, then context-parallel (Megatron's tp-cp-ep-dp-pp)
run_app 4 $MODEL --train-iters 1 --context-parallel-size 2 --tensor-model-parallel-size 2
awk '/^ +[0-9]+ / { n++; if ($6 != $1 % 2 || $9 != int($1 / 2) || $8 != 0) bad = 1 } END { exit bad || n != 4 }' "$WORK/out"
ok $? "TP2 x CP2 layout: rank r has tp r % 2 and cp r / 2 ($(grep -c '^ *[0-9]' "$WORK/out") rows)"

# checkpoints are independent of the CP size: saved by CP2 x DP2 (distributed optimizer) at
# iteration 3, resumed on one rank, iterations 4 and 5 give the reference's losses
run_app 4 $MODEL --context-parallel-size 2 --use-distributed-optimizer --exit-interval 3 --save "$WORK/ckpt"
ok $? "checkpoint: CP2 x DP2 saves iteration 3"
run_app 1 $MODEL --load "$WORK/ckpt" --metrics-file "$WORK/resumed.jsonl"
ok $? "checkpoint: one rank loads it"
losses "$WORK/resumed.jsonl" > "$WORK/resumed.loss"
tail -2 "$WORK/gpt.loss" | paste - "$WORK/resumed.loss" | awk 'BEGIN { worst = 0; n = 0 }
    { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > worst) worst = d }
    END { printf "# resumed losses: worst relative difference %g over %d iterations\n", worst, n; exit !(n == 2 && worst < 1e-6) }'
ok $? "checkpoint: CP1 resumed from CP2 gives the reference's losses of iterations 4 and 5 within 1e-6"

# Llama: RoPE angles at the pieces' global positions, grouped-query attention's packed keys and values
MODEL=$(echo "$MODEL" | sed "s|$TINY_ARGS|$top_srcdir/configs/llama-tiny.args|")
reference llama
layout "Llama CP2" 2 --context-parallel-size 2
layout "Llama CP4" 4 --context-parallel-size 4
layout "Llama CP2 a2a" 2 --context-parallel-size 2 --cp-comm-type a2a
layout "Llama CP2 x TP2 + sequence parallel" 4 --context-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel

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
expect_error "sequence not divisible into 2 x CP pieces" \
    "\-\-seq-length 64 is not a multiple of 2 x --context-parallel-size 3 (= 6)" 3 --context-parallel-size 3
expect_error "world size not divisible by TP x PP x CP" \
    "world size 2 is not divisible by --tensor-model-parallel-size 1 x --pipeline-model-parallel-size 1 x --context-parallel-size 4 (= 4)" 2 --context-parallel-size 4
expect_error "a2a needs the heads and query groups divisible by CP" \
    "\-\-cp-comm-type a2a splits each tensor-parallel rank's heads over the context-parallel ranks: --num-attention-heads 4 and the query groups 2 divided by --tensor-model-parallel-size 1 must be multiples of --context-parallel-size 4" \
    4 --context-parallel-size 4 --cp-comm-type a2a
expect_error "unknown comm type" "\-\-cp-comm-type 'ring' is not a context-parallel communication type" 2 --context-parallel-size 2 --cp-comm-type ring
expect_error "per-layer types must cover every layer" "\-\-cp-comm-type gives 3 types: give one for all layers or one per layer (--num-layers 4)" \
    2 --context-parallel-size 2 --cp-comm-type p2p p2p allgather
expect_error "mixture of experts with CP refused" "\-\-context-parallel-size 2 with --num-experts is not supported here yet" \
    2 --context-parallel-size 2 --num-experts 2

done_testing
