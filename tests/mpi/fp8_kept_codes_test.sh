#!/bin/sh
# fp8_kept_codes_test.sh: the fp8 GEMMs keep linear_qkv's and linear_fc1's inputs (the norms'
# outputs) for the backward as fp8 codes (app/model/fp8_linear.h, fp8_keeps_input_codes), run on
# the CPU backend's reference fp8 GEMMs (MTC_FP8_NATIVE=1), against the same runs with
# MTC_FP8_KEEP_CODES=0 (the norms' outputs kept in the compute dtype and quantized again in the
# backward with the same scale):
#  - the same codes, so bitwise the same losses and final parameters: one rank (LayerNorm + GeLU,
#    RMSNorm + SwiGLU), TP2 with sequence parallelism (the gathered rows quantized whole), PP2
#    (two micro-batches in flight: each slot its own codes), full recompute (the recomputed
#    layers' shared buffers);
#  - less memory: the peak lower by at least half of what the codes save (the norms' outputs, 2
#    bytes an element, become 1 byte: [N, C] bytes twice per layer, less one shared output);
#  - tensorwise scaling (whose scale is made again in the backward) and --no-fp8-wgrad keep the
#    compute dtype: their peaks equal the runs with MTC_FP8_KEEP_CODES=0.
. "${top_srcdir:-.}/tests/lib.sh"

BASE="--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128
      --micro-batch-size 4 --global-batch-size 8 --lr 3e-3 --lr-warmup-iters 2 --seed 1234 --log-interval 1
      --eval-iters 0 --mock-data --vocab-size 256 --device cpu --train-iters 3 --bf16 --hidden-dropout 0
      --attention-dropout 0 --fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max"
export MTC_FP8_NATIVE=1
# run NAME NRANKS FLAGS... : the losses and final hash into $WORK/NAME, the peak GiB into $WORK/NAME.peak
run() {
    rname=$1; rn=$2; shift 2
    run_app "$rn" $BASE --metrics-file "$WORK/$rname.jsonl" "$@"
    rc=$?
    { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out"; grep 'final parameter hash' "$WORK/out"; } > "$WORK/$rname"
    tail -1 "$WORK/$rname.jsonl" | sed 's/.*"peak_memory_gib": \([0-9.]*\).*/\1/' > "$WORK/$rname.peak"
    return $rc
}
# pair NAME NRANKS FLAGS... : the run with codes kept and without
pair() {
    name=$1; n=$2; shift 2
    run "$name" "$n" "$@" && MTC_FP8_KEEP_CODES=0 run "$name.0" "$n" "$@"
    ok $? "$name: runs with the codes kept and without"
    [ -s "$WORK/$name" ] && [ "$(grep -c 'lm loss' "$WORK/$name")" -eq 3 ] && cmp -s "$WORK/$name" "$WORK/$name.0"
    ok $? "$name: bitwise the same losses and final parameters ($(tail -1 "$WORK/$name" | cut -c1-60))"
}
# saved NAME MIN_GIB : the peak of NAME.0 less NAME's at least MIN_GIB
saved() {
    diag "$1: peak $(cat "$WORK/$1.peak") GiB with the codes kept, $(cat "$WORK/$1.0.peak") without"
    awk -v a="$(cat "$WORK/$1.peak")" -v b="$(cat "$WORK/$1.0.peak")" -v m="$2" 'BEGIN { exit !(b - a >= m) }'
}

# 4 layers x 2 norms x [512 x 256] bytes = 1 MiB of codes in place of 2 MiB, less the shared
# output's 0.25 MiB: 0.75 MiB (0.0007 GiB) saved; half of it asked
pair layernorm 1
saved layernorm 0.00035
ok $? "layernorm: the peak is lower with the codes kept"
pair swiglu 1 --swiglu --normalization RMSNorm --disable-bias-linear
saved swiglu 0.00035
ok $? "swiglu: the peak is lower with the codes kept"
pair tp2-sp 2 --tensor-model-parallel-size 2 --sequence-parallel
pair pp2 2 --pipeline-model-parallel-size 2
pair recompute 1 --recompute-granularity full --recompute-method uniform --recompute-num-layers 2
pair tensorwise 1 --fp8-recipe tensorwise
awk -v a="$(cat "$WORK/tensorwise.peak")" -v b="$(cat "$WORK/tensorwise.0.peak")" 'BEGIN { exit !(a == b) }'
ok $? "tensorwise: nothing kept as codes (peak $(cat "$WORK/tensorwise.peak") GiB both ways)"
pair no-wgrad 1 --no-fp8-wgrad
awk -v a="$(cat "$WORK/no-wgrad.peak")" -v b="$(cat "$WORK/no-wgrad.0.peak")" 'BEGIN { exit !(a == b) }'
ok $? "--no-fp8-wgrad: nothing kept as codes (peak $(cat "$WORK/no-wgrad.peak") GiB both ways)"
done_testing
