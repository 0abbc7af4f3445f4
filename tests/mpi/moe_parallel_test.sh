#!/bin/sh
# moe_parallel_test.sh: mixture of experts (configs/mixtral-tiny.args: 4 SwiGLU experts, top-2,
# load-balancing and z losses) on the parallel layouts of parallel_test.sh: losses of 5
# iterations match one rank within 1e-6 relative and every parameter after 5 steps within 1e-5
# (as the dense tests: AdamW's first steps magnify rounding; fp32 CPU, dropout on), dropless and with a capacity that drops tokens; the expert tensors carry
# Megatron-Core's names and global shapes, and a TP2 x DP2 checkpoint reshards into one rank;
# the same for shared experts (gated) with the expert bias of aux-loss-free balancing, and
# --moe-shared-expert-overlap on EP2, EP2 x TP2 + SP and EP2 x PP2 bitwise the run without it;
# evaluate loads the checkpoint.
# --expert-tensor-parallel-size 1 with TP2 + SP (experts whole, Megatron's expert rank generator:
# EP1, EP2, EP4 x DP2, PP2, the distributed optimizer, capacity, probs on input, shared experts
# and their overlap) matches one rank likewise; its start-up lines name the expert groups, its
# checkpoints reshard into ETP2 and back and resume with the same losses, and what is not built
# (ETP that does not divide TP, ETP between 1 and TP without tp first in the order, ETP other
# than TP with local non-persistent checkpoints) is refused naming the flag (context parallelism
# with MoE is refused on its own).
# --expert-tensor-parallel-size 2 with TP4 + SP (each expert split over 2 of the 4 tensor-parallel
# ranks: EP1, EP2, DP2 x EP2 and PP2 x EP2 with the distributed optimizer, capacity) and ETP1 x
# TP4 x EP4 match one rank (4 query groups) likewise, --moe-shared-expert-overlap on ETP2 x TP4 x
# EP2 bitwise the run without it; their start-up lines name Megatron's expert groups, and an ETP2 x TP4
# checkpoint reshards into ETP4 (= TP4) and ETP1 and resumes on both with the same losses.
# --keep-mlp-activation (the experts' activation kept for the backward, not computed again)
# gives the reference's bits (EP2 with it: within the layouts' tolerance).
. "${top_srcdir:-.}/tests/lib.sh"
MOE_ARGS="$top_srcdir/configs/mixtral-tiny.args"
MODEL="--args-file $MOE_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16
       --moe-layer-freq ([1]*1+[0]*1)*2"
TOLERANCE=1e-6
. "$top_srcdir/tests/mpi/parallel_compare.sh"
same_tensors() {  # same_tensors A.h5 B.h5: every model and optimizer tensor equal
    h5diff -q "$1" "$2" /model /model && h5diff -q "$1" "$2" /optimizer /optimizer
}

# the tensors: a router [E, C] and each expert's fc1 [2 Fm, C] and fc2 [C, Fm] under its global
# index (Megatron-Core's SequentialMLP names) in MoE layers 0 and 2, dense MLPs in 1 and 3
run_app 1 $MODEL --train-iters 1 --dump-parameters "$WORK/names.bin"
index="$WORK/names.bin.index"
expect_tensor() {  # NAME ROWS COLS: the dump's index lists the tensor with this global shape
    grep -q "^$1 $2 $3 " "$index"
    ok $? "tensor $1 is [$2, $3]"
}
expect_tensor decoder.layers.0.mlp.router.weight 4 64
expect_tensor decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight 96 64
expect_tensor decoder.layers.0.mlp.experts.local_experts.3.linear_fc1.weight 96 64
expect_tensor decoder.layers.2.mlp.experts.local_experts.3.linear_fc2.weight 64 48
expect_tensor decoder.layers.0.pre_mlp_layernorm.weight 64 0
expect_tensor decoder.layers.1.mlp.linear_fc1.weight 192 64
expect_tensor decoder.layers.1.mlp.linear_fc1.layer_norm_weight 64 0
! grep -q -E 'layers\.[13]\.mlp\.(router|experts)|layers\.[02]\.mlp\.linear_fc' "$index"
ok $? "--moe-layer-freq \"([1]*1+[0]*1)*2\": experts in layers 0 and 2 only, dense MLPs in 1 and 3"

reference moe
run_app 1 $MODEL --keep-mlp-activation --metrics-file "$WORK/keep.jsonl" --dump-parameters "$WORK/keep.bin"
status=$?
losses "$WORK/keep.jsonl" > "$WORK/keep.loss"
[ $status -eq 0 ] && [ -s "$WORK/keep.loss" ] && cmp -s "$WORK/moe.loss" "$WORK/keep.loss" && cmp -s "$WORK/moe.bin" "$WORK/keep.bin"
ok $? "--keep-mlp-activation: the experts' kept activation gives the losses and parameters of computing it again, bit for bit"
layout "TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "PP2" 2 --pipeline-model-parallel-size 2
layout "PP2 interleaved x2 virtual" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
layout "DP2 (overlapped bucketed reduction)" 2 --overlap-grad-reduce --ddp-bucket-size 20000
layout "DP4 distributed optimizer" 4 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
layout "TP2xPP2xDP2 SP + distributed optimizer" 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
layout "DP2 full recompute" 2 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
EP="--expert-model-parallel-size"
layout "EP2" 2 $EP 2
layout "EP2 --keep-mlp-activation" 2 $EP 2 --keep-mlp-activation
layout "EP4 distributed optimizer" 4 $EP 4 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
layout "EP2 x expert-data-parallel 2 (DP4)" 4 $EP 2 --overlap-grad-reduce --ddp-bucket-size 20000
layout "EP2 x TP2 + sequence parallel" 4 $EP 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "EP2 x PP2" 4 $EP 2 --pipeline-model-parallel-size 2
layout "TP2xPP2xEP2 SP + distributed optimizer" 8 $EP 2 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000

# --expert-tensor-parallel-size 1 with TP2 + SP (Megatron's ETP 1: attention split over the
# tensor-parallel ranks, each expert whole; Megatron's expert rank generator lays the expert
# groups over the tp-dp ranks): the expert-data-parallel group is the TP group with EP1, the
# expert-parallel group with EP2; with DP2 EP4 spans all four ranks
ETP1="--expert-tensor-parallel-size 1 --tensor-model-parallel-size 2 --sequence-parallel"
layout "ETP1 x TP2 + SP (experts whole, expert-data-parallel over the TP ranks)" 2 $ETP1
grep -q "^> expert layout: expert-tensor-parallel 1 x expert-parallel 1 x expert-data-parallel 2 x pipeline-parallel 1" "$WORK/out" &&
    grep -q "^>   expert-data-parallel groups (ordered ranks): \[0,1\]$" "$WORK/out"
ok $? "ETP1 x TP2: the start-up lines name the expert groups (expert-data-parallel [0,1])"
layout "ETP1 x TP2 + SP x EP2 (expert-parallel over the TP ranks)" 2 $ETP1 $EP 2
grep -q "^>   expert-parallel groups (ordered ranks): \[0,1\]$" "$WORK/out" &&
    grep -q "^>   expert-data-parallel groups (ordered ranks): \[0\] \[1\]$" "$WORK/out"
ok $? "ETP1 x TP2 x EP2: expert-parallel group [0,1], expert-data-parallel [0] [1]"
layout "ETP1 x TP2 + SP x DP2 x EP2 distributed optimizer" 4 $ETP1 $EP 2 --use-distributed-optimizer --overlap-grad-reduce \
    --overlap-param-gather --ddp-bucket-size 30000
grep -q "^>   expert-parallel groups (ordered ranks): \[0,1\] \[2,3\]$" "$WORK/out" &&
    grep -q "^>   expert-data-parallel groups (ordered ranks): \[0,2\] \[1,3\]$" "$WORK/out"
ok $? "ETP1 x TP2 x DP2 x EP2: expert-parallel groups [0,1] [2,3], expert-data-parallel [0,2] [1,3] (Megatron's)"
layout "ETP1 x TP2 + SP x DP2 x EP4 (bucketed overlapped reduction)" 4 $ETP1 $EP 4 --overlap-grad-reduce --ddp-bucket-size 20000
layout "ETP1 x TP2 + SP x DP2 distributed optimizer (EP1: expert-data-parallel over 4)" 4 $ETP1 --use-distributed-optimizer \
    --ddp-bucket-size 30000
layout "ETP1 x TP2 + SP x PP2 x EP2" 4 $ETP1 --pipeline-model-parallel-size 2 $EP 2
layout "ETP1 x TP2 + SP x PP2 x DP2 x EP4 distributed optimizer" 8 $ETP1 --pipeline-model-parallel-size 2 $EP 4 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000

# --expert-tensor-parallel-size 2 with TP4 + SP (each expert's fc1 rows and fc2 columns split over
# an expert tensor-parallel pair of the four tensor-parallel ranks, which dispatch their joint
# sequence share; Megatron's expert rank generator with tp = 2): 4 query groups for TP4, one
# rank's reference of its own
QG4="--num-query-groups 4"
TP4="$QG4 --tensor-model-parallel-size 4 --sequence-parallel"
ETP2="$TP4 --expert-tensor-parallel-size 2"
reference qg4 $QG4
layout "ETP2 x TP4 + SP (EP1: experts split over pairs, expert-data-parallel over the pairs)" 4 $ETP2
grep -q "^> expert layout: expert-tensor-parallel 2 x expert-parallel 1 x expert-data-parallel 2 x pipeline-parallel 1" "$WORK/out" &&
    grep -q "^>   expert-tensor-parallel groups (ordered ranks): \[0,1\] \[2,3\]$" "$WORK/out" &&
    grep -q "^>   expert-data-parallel groups (ordered ranks): \[0,2\] \[1,3\]$" "$WORK/out"
ok $? "ETP2 x TP4: the start-up lines name the expert groups (expert-tensor-parallel [0,1] [2,3], expert-data-parallel [0,2] [1,3])"
layout "ETP2 x TP4 + SP x EP2 (expert-parallel across the pairs)" 4 $ETP2 $EP 2
layout "ETP2 x TP4 + SP x DP2 x EP2 distributed optimizer" 8 $ETP2 $EP 2 --use-distributed-optimizer --overlap-grad-reduce \
    --overlap-param-gather --ddp-bucket-size 30000
grep -q "^>   expert-tensor-parallel groups (ordered ranks): \[0,1\] \[2,3\] \[4,5\] \[6,7\]$" "$WORK/out" &&
    grep -q "^>   expert-parallel groups (ordered ranks): \[0,2\] \[1,3\] \[4,6\] \[5,7\]$" "$WORK/out" &&
    grep -q "^>   expert-data-parallel groups (ordered ranks): \[0,4\] \[1,5\] \[2,6\] \[3,7\]$" "$WORK/out"
ok $? "ETP2 x TP4 x DP2 x EP2: expert-tensor-parallel [0,1] [2,3] [4,5] [6,7], expert-parallel [0,2] [1,3] [4,6] [5,7], expert-data-parallel [0,4] [1,5] [2,6] [3,7] (Megatron's)"
layout "ETP1 x TP4 + SP x EP4" 4 $TP4 --expert-tensor-parallel-size 1 $EP 4
layout "ETP2 x TP4 + SP x PP2 x EP2 distributed optimizer" 8 $ETP2 --pipeline-model-parallel-size 2 $EP 2 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000

CAPACITY="--moe-expert-capacity-factor 0.5 --moe-token-drop-policy probs --moe-router-pre-softmax"
reference capacity $CAPACITY
layout "capacity 0.5: TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel $CAPACITY
layout "capacity 0.5: PP2 x DP2 distributed optimizer" 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer $CAPACITY
layout "capacity 0.5: EP4" 4 $EP 4 $CAPACITY
layout "capacity 0.5: ETP1 x TP2 + SP x EP2" 2 $ETP1 $EP 2 $CAPACITY
reference capacity_qg4 $QG4 $CAPACITY
layout "capacity 0.5: ETP2 x TP4 + SP x EP2" 4 $ETP2 $EP 2 $CAPACITY
# --moe-apply-probs-on-input (top-1): each rank scales and sends its own tokens' rows
PROBS="--moe-router-topk 1 --moe-apply-probs-on-input"
reference probs $PROBS
layout "probs on input: ETP1 x TP2 + SP x EP2" 2 $ETP1 $EP 2 $PROBS
layout "probs on input: ETP1 x TP2 + SP (EP1)" 2 $ETP1 $PROBS

# shared experts (Megatron-Core's SharedExpertMLP, with its sigmoid gate) and the expert bias of
# aux-loss-free balancing (sigmoid scores): their tensors under Megatron's names, the same
# losses and parameters on TP2 + SP, EP2 and PP2 (the bias in the parameter dumps: the counts
# summed over the data-parallel ranks), and checkpoints that reshard and carry the shape
SHARED="--moe-shared-expert-intermediate-size 32 --moe-shared-expert-gate --moe-router-score-function sigmoid
        --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2"
reference shared $SHARED
index="$WORK/shared.bin.index"
expect_tensor decoder.layers.0.mlp.shared_experts.linear_fc1.weight 64 64
expect_tensor decoder.layers.2.mlp.shared_experts.linear_fc2.weight 64 32
expect_tensor decoder.layers.2.mlp.shared_experts.gate_weight 1 64
expect_tensor decoder.layers.0.mlp.router.expert_bias 4 0
! grep -q -E 'layers\.[13]\.mlp\.(shared_experts|router)' "$index"
ok $? "shared experts and expert biases in the MoE layers (0 and 2) only"
layout "shared experts + expert bias: TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel $SHARED
layout "shared experts + expert bias: EP2" 2 $EP 2 $SHARED
layout "shared experts + expert bias: PP2" 2 --pipeline-model-parallel-size 2 $SHARED
layout "shared experts + expert bias: ETP1 x TP2 + SP x EP2" 2 $ETP1 $EP 2 $SHARED
# --moe-shared-expert-overlap: the shared experts compute while the expert-parallel all-to-alls
# are in flight (comm ialltoallv): the losses, gradient norms and parameters of the run without
# it, bit for bit, and the start-up line says that the layers overlap (with EP 1: that there is
# nothing to overlap)
OVERLAPS="the shared experts' fc1 and activation compute while the dispatch all-to-all is in flight"
NOTHING="expert-parallel size 1, no all-to-all for the shared experts to overlap"
overlap_same() {  # overlap_same NAME NRANKS LINE FLAGS...: with and without the overlap, LINE in its output
    name=$1; n=$2; line=$3; shift 3
    rm -f "$WORK/in_order.jsonl" "$WORK/overlap.jsonl"  # a metrics file is appended to
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/in_order.jsonl" --dump-parameters "$WORK/in_order.bin"
    status=$?
    run_app "$n" $MODEL "$@" --moe-shared-expert-overlap --metrics-file "$WORK/overlap.jsonl" \
        --dump-parameters "$WORK/overlap.bin"
    status=$((status + $?))
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/err" | tail -5
    for run in in_order overlap; do
        { losses "$WORK/$run.jsonl"; json_field "$WORK/$run.jsonl" train grad_norm; } > "$WORK/$run.values"
    done
    [ $status -eq 0 ] && [ "$(wc -l < "$WORK/overlap.values")" -eq 10 ] && cmp -s "$WORK/in_order.values" "$WORK/overlap.values" &&
        cmp -s "$WORK/in_order.bin" "$WORK/overlap.bin" && grep -q "$line" "$WORK/out"
    ok $? "--moe-shared-expert-overlap, $name: the losses, gradient norms and parameters without it, bit for bit ($(grep -c . "$WORK/overlap.values") values), and its start-up line"
}
overlap_same "EP2" 2 "$OVERLAPS" $EP 2 $SHARED
overlap_same "EP2, ungated, --recompute-modules moe" 2 "$OVERLAPS" $EP 2 --moe-shared-expert-intermediate-size 32 \
    --recompute-granularity selective --recompute-modules moe
overlap_same "EP2 x TP2 + sequence parallel" 4 "$OVERLAPS" $EP 2 --tensor-model-parallel-size 2 --sequence-parallel $SHARED
overlap_same "EP2 x PP2" 4 "$OVERLAPS" $EP 2 --pipeline-model-parallel-size 2 $SHARED
overlap_same "one rank" 1 "$NOTHING" $SHARED
overlap_same "ETP1 x TP2 + SP x EP2" 2 "$OVERLAPS" $ETP1 $EP 2 $SHARED
overlap_same "ETP2 x TP4 + SP x EP2" 4 "$OVERLAPS" $ETP2 $EP 2 $SHARED
run_app 2 $MODEL $SHARED --tensor-model-parallel-size 2 --sequence-parallel --train-iters 3 --save "$WORK/shared_tp2" \
    --dump-parameters "$WORK/shared_tp2.bin"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$WORK/shared_tp2/iter_0000003.h5" "$WORK/shared_tp2.bin"); status=$?
diag "$result"
ok $status "checkpoint: a TP2 file holds the shared experts' and the expert biases' global tensors, bit for bit"
run_app 1 $MODEL $SHARED --train-iters 3 --load "$WORK/shared_tp2" --save "$WORK/shared_tp1"
status=$?
same_tensors "$WORK/shared_tp2/iter_0000003.h5" "$WORK/shared_tp1/iter_0000003.h5"
ok $((status + $?)) "checkpoint: shared experts saved with TP2, loaded into one rank and saved again: the same tensors"
run_app 1 $MODEL --train-iters 4 --load "$WORK/shared_tp2" --use-checkpoint-args --override-opt-param-scheduler
status=$?
grep -q "moe_shared_expert_intermediate_size 32" "$WORK/out" && grep -q "moe_shared_expert_gate 1" "$WORK/out" &&
    grep -q "moe_router_enable_expert_bias 1" "$WORK/out" && grep -q "moe_router_score_function sigmoid" "$WORK/out"
ok $((status + $?)) "--use-checkpoint-args takes the shared experts (size, gate) and the expert bias (with its score function) from the checkpoint"
run_app 1 $MODEL --train-iters 4 --load "$WORK/shared_tp2" --override-opt-param-scheduler --moe-router-score-function sigmoid \
    --moe-router-enable-expert-bias
grep -q -e "--moe-shared-expert-intermediate-size = 32 (this run: 0), --moe-shared-expert-gate = 1 (this run: 0)" "$WORK/err"
ok $? "checkpoint: loading shared experts into a model without them is refused, naming the flags"

# checkpoints: saved with TP2 x DP2 and the distributed optimizer, loaded into one rank and
# saved again: the same tensors, the experts' included
run_app 4 $MODEL --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --train-iters 3 \
    --save "$WORK/ckpt" --dump-parameters "$WORK/ckpt.bin"
ok $? "checkpoint: TP2 x DP2 (distributed optimizer) saves iteration 3"
SAVED="$WORK/ckpt/iter_0000003.h5"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$SAVED" "$WORK/ckpt.bin"); status=$?
diag "$result"
ok $status "checkpoint: its tensors (experts and router included) are the run's global parameters, bit for bit"
run_app 1 $MODEL --train-iters 3 --load "$WORK/ckpt" --save "$WORK/resaved"
status=$?
same_tensors "$SAVED" "$WORK/resaved/iter_0000003.h5"
ok $((status + $?)) "checkpoint: loaded into one rank and saved again, every tensor (model and optimizer) is the same"
# across expert-parallel sizes: saved with EP2 x TP2, loaded into one rank; saved with one rank,
# loaded into EP4: the same tensors again
run_app 4 $MODEL $EP 2 --tensor-model-parallel-size 2 --sequence-parallel --train-iters 3 --save "$WORK/ep2" \
    --dump-parameters "$WORK/ep2.bin"
ok $? "checkpoint: EP2 x TP2 saves iteration 3"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$WORK/ep2/iter_0000003.h5" "$WORK/ep2.bin"); status=$?
diag "$result"
ok $status "checkpoint: an EP2 x TP2 file holds every expert's global tensor, bit for bit"
run_app 1 $MODEL --train-iters 3 --load "$WORK/ep2" --save "$WORK/ep1"
status=$?
same_tensors "$WORK/ep2/iter_0000003.h5" "$WORK/ep1/iter_0000003.h5"
ok $((status + $?)) "checkpoint: EP2 x TP2 loaded into one rank and saved again: the same tensors"
run_app 4 $MODEL $EP 4 --train-iters 3 --load "$WORK/ep1" --save "$WORK/ep4"
status=$?
same_tensors "$WORK/ep1/iter_0000003.h5" "$WORK/ep4/iter_0000003.h5"
ok $((status + $?)) "checkpoint: one rank's loaded into EP4 and saved again: the same tensors"
run_app 4 $MODEL $EP 4 --train-iters 5 --load "$WORK/ep1" --override-opt-param-scheduler --metrics-file "$WORK/ep4_resumed.jsonl"
run_app 1 $MODEL --train-iters 5 --load "$WORK/ep1" --override-opt-param-scheduler --metrics-file "$WORK/ep1_resumed.jsonl"
paste "$(losses "$WORK/ep1_resumed.jsonl" > "$WORK/a.loss"; echo "$WORK/a.loss")" \
      "$(losses "$WORK/ep4_resumed.jsonl" > "$WORK/b.loss"; echo "$WORK/b.loss")" |
    awk '{ n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > w) w = d } END { printf "# resumed losses: worst relative difference %g over %d iterations\n", w, n; exit !(n == 2 && w < 1e-6) }'
ok $? "checkpoint: resumed on EP4 and on one rank, iterations 4 and 5 give the same losses within 1e-6"
# across expert tensor-parallel sizes: saved with ETP1 x TP2 x EP2, its file the global tensors;
# loaded with ETP2 (= TP2, experts split) and saved again, then back into ETP1: the same
# tensors; resumed on ETP1 and ETP2, iterations 4 and 5 give the same losses
run_app 2 $MODEL $ETP1 $EP 2 --train-iters 3 --save "$WORK/etp1" --dump-parameters "$WORK/etp1.bin"
ok $? "checkpoint: ETP1 x TP2 x EP2 saves iteration 3"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$WORK/etp1/iter_0000003.h5" "$WORK/etp1.bin"); status=$?
diag "$result"
ok $status "checkpoint: an ETP1 x TP2 x EP2 file holds every expert's global tensor, bit for bit"
run_app 2 $MODEL --tensor-model-parallel-size 2 --sequence-parallel --train-iters 3 --load "$WORK/etp1" --save "$WORK/etp2"
status=$?
same_tensors "$WORK/etp1/iter_0000003.h5" "$WORK/etp2/iter_0000003.h5"
ok $((status + $?)) "checkpoint: ETP1 loaded into ETP2 (= TP2, experts split) and saved again: the same tensors"
run_app 4 $MODEL $ETP1 --use-distributed-optimizer --train-iters 3 --load "$WORK/etp2" --save "$WORK/etp1_again"
status=$?
same_tensors "$WORK/etp2/iter_0000003.h5" "$WORK/etp1_again/iter_0000003.h5"
ok $((status + $?)) "checkpoint: ETP2 loaded back into ETP1 (x DP2, distributed optimizer) and saved again: the same tensors"
run_app 2 $MODEL $ETP1 $EP 2 --train-iters 5 --load "$WORK/etp2" --override-opt-param-scheduler --metrics-file "$WORK/etp1_resumed.jsonl"
run_app 2 $MODEL --tensor-model-parallel-size 2 --sequence-parallel --train-iters 5 --load "$WORK/etp1" --override-opt-param-scheduler \
    --metrics-file "$WORK/etp2_resumed.jsonl"
losses "$WORK/etp1_resumed.jsonl" > "$WORK/etp1_resumed.loss"
losses "$WORK/etp2_resumed.jsonl" > "$WORK/etp2_resumed.loss"
losses_match "$WORK/etp2_resumed.loss" "$WORK/etp1_resumed.loss" 2 1e-6
ok $? "checkpoint: resumed on ETP1 x EP2 and on ETP2, iterations 4 and 5 give the same losses within 1e-6"
# between: saved with ETP2 x TP4 x EP2 (experts split over pairs), its file the global tensors;
# loaded into ETP4 (= TP4) and into ETP1 x TP4 x EP2 and saved again: the same tensors; resumed
# on ETP2, ETP4 and ETP1, iterations 4 and 5 give the same losses
run_app 4 $MODEL $ETP2 $EP 2 --train-iters 3 --save "$WORK/etp2of4" --dump-parameters "$WORK/etp2of4.bin"
ok $? "checkpoint: ETP2 x TP4 x EP2 saves iteration 3"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$WORK/etp2of4/iter_0000003.h5" "$WORK/etp2of4.bin"); status=$?
diag "$result"
ok $status "checkpoint: an ETP2 x TP4 x EP2 file holds every expert's global tensor, bit for bit"
run_app 4 $MODEL $TP4 --train-iters 3 --load "$WORK/etp2of4" --save "$WORK/etp4of4"
status=$?
same_tensors "$WORK/etp2of4/iter_0000003.h5" "$WORK/etp4of4/iter_0000003.h5"
ok $((status + $?)) "checkpoint: ETP2 x TP4 loaded into ETP4 (= TP4) and saved again: the same tensors"
run_app 4 $MODEL $TP4 --expert-tensor-parallel-size 1 $EP 2 --train-iters 3 --load "$WORK/etp2of4" --save "$WORK/etp1of4"
status=$?
same_tensors "$WORK/etp2of4/iter_0000003.h5" "$WORK/etp1of4/iter_0000003.h5"
ok $((status + $?)) "checkpoint: ETP2 x TP4 loaded into ETP1 x TP4 x EP2 and saved again: the same tensors"
for etp in 2 4 1; do
    run_app 4 $MODEL $TP4 --expert-tensor-parallel-size $etp --train-iters 5 --load "$WORK/etp2of4" --override-opt-param-scheduler \
        --metrics-file "$WORK/etp${etp}of4_resumed.jsonl"
    losses "$WORK/etp${etp}of4_resumed.jsonl" > "$WORK/etp${etp}of4_resumed.loss"
done
losses_match "$WORK/etp2of4_resumed.loss" "$WORK/etp4of4_resumed.loss" 2 1e-6 &&
    losses_match "$WORK/etp2of4_resumed.loss" "$WORK/etp1of4_resumed.loss" 2 1e-6
ok $? "checkpoint: the ETP2 x TP4 file resumed on ETP2, ETP4 and ETP1, iterations 4 and 5 give the same losses within 1e-6"
# what is not built is refused, naming the flag
expect_etp_refused() {  # expect_etp_refused NAME NRANKS PATTERN FLAGS...
    name=$1; n=$2; pattern=$3; shift 3
    run_app "$n" $MODEL --train-iters 1 "$@"; status=$?
    [ $status -ne 0 ] && grep -q -- "$pattern" "$WORK/err" && ! grep -q "iteration" "$WORK/out"
    ok $? "refused: $name ($(grep -o 'error: .*' "$WORK/err" | head -1 | cut -c 1-110))"
}
expect_etp_refused "ETP3 with TP2" 2 "--expert-tensor-parallel-size 3 does not divide --tensor-model-parallel-size 2" \
    --expert-tensor-parallel-size 3 --tensor-model-parallel-size 2 --sequence-parallel
expect_etp_refused "ETP3 with TP4" 4 "--expert-tensor-parallel-size 3 does not divide --tensor-model-parallel-size 4" \
    $TP4 --expert-tensor-parallel-size 3
expect_etp_refused "ETP2 x TP4 with dp before tp in the order" 4 "needs tp first in --parallel-order" \
    $ETP2 --parallel-order dp-tp-cp-ep-pp
expect_etp_refused "ETP1 with local non-persistent checkpoints" 2 "is not built with --non-persistent-ckpt-type local" \
    $ETP1 --non-persistent-ckpt-type local --non-persistent-local-ckpt-dir "$WORK/local" --non-persistent-save-interval 1
expect_etp_refused "ETP1 x TP2 without SP" 2 "needs --sequence-parallel" --expert-tensor-parallel-size 1 --tensor-model-parallel-size 2
expect_etp_refused "EP3 on ETP1 x TP2 x DP2" 4 "--expert-model-parallel-size 3 does not divide --tensor-model-parallel-size 2 / --expert-tensor-parallel-size 1 x the data-parallel size 2" \
    $ETP1 $EP 3 --num-experts 3 --moe-router-topk 2
run_app 1 $MODEL --train-iters 3 --load "$WORK/ckpt" --num-experts 8
grep -q -e "--num-experts = 4 (this run: 8)" -e "router.weight has shape \[4, 64\], but this model's is \[8, 64\]" "$WORK/err"
ok $? "checkpoint: loading into another number of experts is refused, naming both ($(grep -o 'error: .*' "$WORK/err" | cut -c 1-120))"
run_app 1 $MODEL --train-iters 4 --load "$WORK/ckpt" --use-checkpoint-args --args-file "$top_srcdir/configs/gpt-tiny.args" --override-opt-param-scheduler \
    --metrics-file "$WORK/ckargs.jsonl"
grep -q "num_experts 4" "$WORK/out" && grep -q '"moe_layers"' "$WORK/ckargs.jsonl"
ok $? "--use-checkpoint-args takes the MoE shape (num_experts, moe_ffn_hidden_size, topk, moe_layer_freq) from the checkpoint"
python3 -c "print(' '.join(str(10 + i % 200) for i in range(100)))" > "$WORK/wiki.test.tokens"
timeout 60 "$MPIEXEC" -n 1 "$top_builddir/app/evaluate" --task WIKITEXT103 --valid-data "$WORK/wiki.test.tokens" --load "$WORK/ckpt" \
    --device cpu --seq-length 32 --overlapping-eval 32 --metrics-file "$WORK/eval.jsonl" > "$WORK/gen.out" 2>&1 &&
    grep -q "mixture of experts: 4 experts of ffn 48, top-2, in 2 of 4 layers" "$WORK/gen.out" && grep -q '"avg_loss"' "$WORK/eval.jsonl"
ok $? "evaluate runs the MoE checkpoint (MoE and dense layers; generation and evaluation: tests/mpi/moe_generation_test.sh)"
done_testing
