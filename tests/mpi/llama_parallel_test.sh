#!/bin/sh
# llama_parallel_test.sh: the parallel-equivalence checks of parallel_test.sh for a tiny Llama
# (configs/llama-tiny.args: RoPE, RMSNorm, SwiGLU, grouped-query attention with 2 query groups,
# no linear biases, untied output layer), on every layout the GPT test covers, with the same
# tolerances: losses of 5 iterations within 1e-5 relative of one rank, every parameter after
# 5 steps within 1e-5, fp32 CPU, dropout on. TP4 needs 4 query groups (tensor parallelism
# splits whole groups), so it runs against a reference with 8 heads in 4 groups; the tied
# output layer (Llama 3.2's) is checked across pipeline stages too, and a TP2 x DP2 checkpoint
# reshards into one rank exactly.
. "${top_srcdir:-.}/tests/lib.sh"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
MODEL="--args-file $LLAMA_ARGS --num-layers 4 --train-iters 5 --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16"
. "$top_srcdir/tests/mpi/parallel_compare.sh"

# the parameters really are Megatron-Core's Llama tensors (no biases, RMSNorm weights fused
# into the following linear layer's name, [gate; up] fc1 of 2F rows, grouped qkv of (H+2G)*D rows)
run_app 1 $MODEL --train-iters 1 --dump-parameters "$WORK/names.bin"
index="$WORK/names.bin.index"
expect_tensor() {  # NAME ROWS COLS: the dump's index lists the tensor with this global shape
    grep -q "^$1 $2 $3 " "$index"
    ok $? "tensor $1 is [$2, $3]"
}
expect_tensor decoder.layers.0.self_attention.linear_qkv.layer_norm_weight 64 0
expect_tensor decoder.layers.0.self_attention.linear_qkv.weight 128 64
expect_tensor decoder.layers.0.self_attention.linear_proj.weight 64 64
expect_tensor decoder.layers.0.mlp.linear_fc1.layer_norm_weight 64 0
expect_tensor decoder.layers.0.mlp.linear_fc1.weight 192 64
expect_tensor decoder.layers.0.mlp.linear_fc2.weight 64 96
expect_tensor decoder.final_layernorm.weight 64 0
expect_tensor output_layer.weight 256 64
! grep -q -E 'bias|position_embeddings|input_layernorm|pre_mlp_layernorm' "$index"
ok $? "no biases, no position embedding table, no LayerNorm tensors ($(wc -l < "$index") tensors)"
grep -q "number of parameters: 156224" "$WORK/out"
ok $? "parameter count of 4 layers: qkv (4+2*2)*16 x 64, fc1 2*96 x 64, untied output ($(grep -o 'number of parameters: [0-9]*' "$WORK/out"))"

reference llama
layout "TP2" 2 --tensor-model-parallel-size 2
layout "PP2" 2 --pipeline-model-parallel-size 2
layout "PP4" 4 --pipeline-model-parallel-size 4
layout "PP2 interleaved x2 virtual" 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
layout "DP2 (overlapped bucketed reduction)" 2 --overlap-grad-reduce --ddp-bucket-size 20000
layout "DP4 distributed optimizer" 4 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000
layout "TP2 + sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
layout "TP2 PP2" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
layout "TP2xPP2xDP2 SP + distributed optimizer" 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 30000

reference groups4 --num-attention-heads 8 --num-query-groups 4
layout "TP4 (4 query groups)" 4 --num-attention-heads 8 --num-query-groups 4 --tensor-model-parallel-size 4

# checkpoints: saved with TP2 x DP2 and the distributed optimizer, the file holds the global
# tensors (SwiGLU's fc1 gate and up shards of each rank in their global rows), and loading into
# one rank and saving again gives the same tensors, optimizer state included
run_app 4 $MODEL --tensor-model-parallel-size 2 --use-distributed-optimizer --train-iters 3 \
    --save "$WORK/ckpt" --dump-parameters "$WORK/ckpt.bin"
ok $? "checkpoint: TP2 x DP2 (distributed optimizer) saves iteration 3"
SAVED="$WORK/ckpt/iter_0000003.h5"
result=$("$top_builddir/tests/tools/checkpoint_vs_dump" "$SAVED" "$WORK/ckpt.bin"); status=$?
diag "$result"
ok $status "checkpoint: its tensors are the run's global parameters, bit for bit"
run_app 1 $MODEL --train-iters 3 --load "$WORK/ckpt" --save "$WORK/resaved"
status=$?
h5diff -q "$SAVED" "$WORK/resaved/iter_0000003.h5" /model /model &&
    h5diff -q "$SAVED" "$WORK/resaved/iter_0000003.h5" /optimizer /optimizer
ok $((status + $?)) "checkpoint: loaded into one rank and saved again, every tensor (model and optimizer) is the same"

run_app 1 $MODEL --train-iters 3 --load "$WORK/ckpt" --num-query-groups 4
grep -q "linear_qkv.weight has shape \[128, 64\], but this model's is \[192, 64\]" "$WORK/err"
ok $? "checkpoint: loading into another number of query groups is refused, naming the tensor and both shapes"
"$top_builddir/app/convert_checkpoint" --to-hf --load "$WORK/ckpt" --output "$WORK/hf" > "$WORK/convert.out" 2>&1
grep -q "LlamaForCausalLM, 4 layers" "$WORK/convert.out" && [ -f "$WORK/hf/model.safetensors" ] && grep -q '"model_type": "llama"' "$WORK/hf/config.json"
ok $? "convert_checkpoint exports a Llama checkpoint as LlamaForCausalLM, not GPT-2 (tests/mpi/llama_hf_test.sh checks the layout)"

# tied output layer: the same model without --untie-embeddings-and-output-weights
grep -v untie-embeddings "$LLAMA_ARGS" > "$WORK/llama-tied.args"
MODEL=$(echo "$MODEL" | sed "s|$LLAMA_ARGS|$WORK/llama-tied.args|")
reference tied
layout "TP2 PP2 tied embeddings" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2

# the query groups must split over tensor parallelism, and the heads over the groups
expect_error() {
    desc=$1; pattern=$2; n=$3; shift 3
    run_app "$n" $MODEL "$@"; status=$?
    if [ "$status" -ne 0 ] && grep -q -- "$pattern" "$WORK/err"; then ok 0 "$desc"; else ok 1 "$desc"; sed 's/^/#   /' "$WORK/err" | head -3; fi
}
expect_error "query groups not divisible by TP" "\-\-num-query-groups 2 is not divisible by --tensor-model-parallel-size 4" 4 --tensor-model-parallel-size 4
expect_error "heads not divisible by query groups" "\-\-num-attention-heads 4 is not divisible by --num-query-groups 3" 1 --num-query-groups 3
expect_error "--no-position-embedding without rope" "\-\-no-position-embedding is deprecated" 1 --position-embedding-type learned_absolute

# the presets of Megatron's published Llama shapes load: every flag is known and the values pass
# the checks (a batch that cannot divide is the last check pretrain_gpt makes: reaching it proves
# the rest), and mkjob renders them with the query groups checked against TP
status=0
for preset in llama2-7b llama3-8b llama3.2-1b llama3-70b; do
    "$PRETRAIN_GPT" --args-file "$top_srcdir/configs/$preset.args" --micro-batch-size 3 --global-batch-size 4 > "$WORK/preset.out" 2>&1
    grep -q "error: --global-batch-size 4 is not a multiple of --micro-batch-size 3" "$WORK/preset.out" ||
        { status=1; diag "$preset: $(tail -1 "$WORK/preset.out")"; }
done
ok $status "the llama2-7b, llama3-8b, llama3.2-1b and llama3-70b presets parse and validate in pretrain_gpt"
"$top_srcdir/jobs/mkjob" --preset llama3-70b --nodes 8 --gpus-per-node 8 --tensor-model-parallel-size 4 \
    --pipeline-model-parallel-size 8 --dry-run > "$WORK/job.sh" 2>&1 &&
    grep -q -- "--num-query-groups 8" "$WORK/job.sh" && grep -q "TP 4 x PP 8 x DP 2" "$WORK/job.sh"
ok $? "mkjob renders the llama3-70b preset on 8 nodes (TP 4 x PP 8 x DP 2)"
"$top_srcdir/jobs/mkjob" --preset "$LLAMA_ARGS" --local --cpu-only --ntasks-per-node 4 --tensor-model-parallel-size 4 \
    --dry-run > "$WORK/job.sh" 2>&1
grep -q "num-query-groups 2 is not divisible by --tensor-model-parallel-size 4" "$WORK/job.sh"
ok $? "mkjob refuses a TP that does not divide the query groups"

done_testing
