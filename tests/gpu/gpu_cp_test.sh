#!/bin/sh
# gpu_cp_test.sh: context parallelism (--context-parallel-size) on the CUDA backend: the ring
# attention kernels (kernels/cuda/cuda_attention_block.cu) and NCCL's point-to-point ring
# (app/parallel/comm_nccl.c: irecv paired with the next send on the group's side stream).
# CP2 needs two ranks, and a GPU takes one rank (app/parallel/gpu_placement.h), so the test
# needs 2 GPUs and skips (TAP skip plan) with fewer. GPT tiny (learned positions) and Llama tiny
# (RoPE, grouped-query attention) at sequence 256 (pieces of 64 rows: several key tiles per
# block), hidden and attention dropout 0.1, 10 iterations: CP2 with the p2p ring, allgather and
# a2a on 2 GPUs give the one-GPU (CP1) losses within 1e-3 relative (bf16; the one-GPU run takes
# the fused flash attention, CP2 the block kernels, so the bits differ but not the model: the
# dropout masks are the same), and the p2p ring with --fp16 the one-GPU --fp16 losses. With a
# sliding window (--window-size 100,0: the windowed block kernels, whole blocks outside the
# window on the far ring steps) the same three layouts against one GPU with the window.
# a2a+p2p (hierarchical) is built on the CPU backend only: CUDA refuses it with one message.
# On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}

require_gpus 2

MODEL="--args-file $TINY_ARGS --num-layers 4 --seq-length 256 --max-position-embeddings 256 --train-iters 10
       --lr 1e-3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --hidden-dropout 0.1 --attention-dropout 0.1
       --micro-batch-size 2 --global-batch-size 8 --device cuda"
losses() { json_field "$1" train lm_loss; }

train() {  # train NAME NRANKS FLAGS...: one run, its losses in $WORK/NAME.loss
    name=$1; n=$2; shift 2
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$name.jsonl"
    status=$?
    cp "$WORK/out" "$WORK/$name.out"
    [ $status -eq 0 ] || { sed 's/^/#   /' "$WORK/err" | tail -8; }
    losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

layouts() {  # layouts PREFIX FLAGS...: the one-GPU reference, then CP2 p2p, allgather, a2a
    prefix=$1; shift
    train "${prefix}_ref" 1 "$@"
    ok $? "$prefix: one-GPU reference run"
    for kind in p2p allgather a2a; do
        train "${prefix}_$kind" 2 "$@" --context-parallel-size 2 --cp-comm-type $kind
        ok $? "$prefix: CP2 $kind on 2 GPUs runs"
        compare_losses "${prefix}_ref" "${prefix}_$kind" 1e-3 10 "$prefix: CP2 $kind losses within 1e-3 of one GPU"
    done
}

layouts gpt
layouts gpt_window --window-size 100,0
MODEL=$(echo "$MODEL" | sed "s|$TINY_ARGS|$top_srcdir/configs/llama-tiny.args|")
layouts llama

train fp16_ref 1 --fp16 --initial-loss-scale 1024
ok $? "--fp16: one-GPU reference run"
train fp16_p2p 2 --fp16 --initial-loss-scale 1024 --context-parallel-size 2
ok $? "--fp16: CP2 p2p on 2 GPUs runs"
compare_losses fp16_ref fp16_p2p 1e-3 10 "--fp16: CP2 p2p losses within 1e-3 of one GPU"

run_app 2 $MODEL --context-parallel-size 2 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 1 2
status=$?
[ $status -ne 0 ] && grep -q "\-\-cp-comm-type a2a+p2p (hierarchical context parallelism) is built on the CPU backend only" "$WORK/err"
ok $? "a2a+p2p refused on CUDA with one message (status $status)"
done_testing
