#!/bin/sh
# recompute_test.sh: activation recomputation (--recompute-activations, --recompute-granularity
# selective|full, --recompute-method uniform|block, --recompute-num-layers) on 2 ranks of the tiny
# presets, dropout on, for each layout (DP2 with the distributed optimizer, TP2 with sequence
# parallelism, PP2, and the tiny Llama on TP2 and interleaved PP2): the losses and the parameters
# after 3 steps are bitwise those of the run without recomputation (dropout masks come back from
# the same Philox counters); peak backend memory (peak_memory_gib of the metrics JSON) is lower
# with selective and with full recompute; HFU counts the recomputed forward work (hardware /
# model TFLOP/s of the JSON against figures computed by hand) and the log line shows it; and
# Megatron's validation rules refuse the inconsistent combinations. --keep-mlp-activation (the MLP's
# activation kept for the backward instead of computed again), alone, in the first 2 layers of a
# stage (--keep-mlp-activation-num-layers) and with full recompute, gives
# the same bits too (the CPU's recomputed activation is the forward's, bit for bit), with more
# peak memory where a stage has more layers than the two scratch buffers it frees.
# --recompute-granularity selective --recompute-modules layernorm (the two norm outputs of each
# layer run again in the backward from the kept input and statistics), alone, with core_attn and
# with --keep-mlp-activation, gives the same bits with less peak memory.
. "${top_srcdir:-.}/tests/lib.sh"
COMMON="--num-layers 4 --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
        --hidden-dropout 0.1 --attention-dropout 0.1 --device cpu --peak-tflops 1"
GPT="--args-file $TINY_ARGS $COMMON"
LLAMA="--args-file $top_srcdir/configs/llama-tiny.args $COMMON"
SELECTIVE="--recompute-activations"
UNIFORM="--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"
BLOCK="--recompute-granularity full --recompute-method block --recompute-num-layers 2"
KEEP="--keep-mlp-activation"
KEEP_PART="--keep-mlp-activation-num-layers 2"
NORMS="--recompute-granularity selective --recompute-modules layernorm"

last() { json_field "$1" train "$2" | tail -1; }

# run_mode TAG MODE_FLAGS... (after MODEL and LAYOUT): metrics in $WORK/TAG.jsonl, parameters in TAG.bin
run_mode() {
    run=$1; shift
    run_app 2 $MODEL $LAYOUT "$@" --metrics-file "$WORK/$run.jsonl" --dump-parameters "$WORK/$run.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    cp "$WORK/out" "$WORK/$run.out"
    return $status
}

# lower A B: peak memory of run A is below run B's
lower() {
    awk -v a="$(last "$WORK/$1.jsonl" peak_memory_gib)" -v b="$(last "$WORK/$2.jsonl" peak_memory_gib)" \
        'BEGIN { exit !(a + 0 < b + 0 && a + 0 > 0) }'
}

# check_layout NAME MODEL LAYOUT...: the four modes on one layout
check_layout() {
    name=$1; MODEL=$2; shift 2; LAYOUT="$*"
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_mode "$tag.none" || { ok 1 "$name: run without recomputation"; return; }
    json_field "$WORK/$tag.none.jsonl" train lm_loss > "$WORK/$tag.none.loss"
    mem="none $(last "$WORK/$tag.none.jsonl" peak_memory_gib)"
    for mode in selective uniform block keep keep_uniform keep_part norms norms_attn norms_keep; do
        case $mode in selective) flags=$SELECTIVE ;; uniform) flags=$UNIFORM ;; block) flags=$BLOCK ;;
                      keep) flags=$KEEP ;; keep_uniform) flags="$KEEP $UNIFORM" ;; keep_part) flags=$KEEP_PART ;;
                      norms) flags=$NORMS ;; norms_attn) flags="$NORMS core_attn" ;; norms_keep) flags="$NORMS $KEEP" ;; esac
        run_mode "$tag.$mode" $flags || { ok 1 "$name, $mode: run failed"; continue; }
        json_field "$WORK/$tag.$mode.jsonl" train lm_loss > "$WORK/$tag.$mode.loss"
        [ "$(wc -l < "$WORK/$tag.$mode.loss")" -eq 3 ] && cmp -s "$WORK/$tag.none.loss" "$WORK/$tag.$mode.loss" &&
            cmp -s "$WORK/$tag.none.bin" "$WORK/$tag.$mode.bin"
        ok $? "$name, $mode: losses of 3 iterations and every parameter bitwise those without recomputation"
        case $mode in
        keep) if [ "$KEEP_GROWS" = 1 ]; then lower "$tag.none" "$tag.keep"
                  ok $? "$name, keep: peak memory higher than recomputing the activation"; fi ;;
        keep_uniform|norms_keep) ;;
        keep_part) if [ "$KEEP_GROWS" = 1 ]; then lower "$tag.none" "$tag.keep_part"
                       ok $? "$name, keep in the first 2 layers: peak memory higher than recomputing the activation"; fi ;;
        *) lower "$tag.$mode" "$tag.none"
           ok $? "$name, $mode: peak memory lower than without recomputation" ;;
        esac
        mem="$mem, $mode $(last "$WORK/$tag.$mode.jsonl" peak_memory_gib)"
    done
    diag "$name: peak GiB: $mem"
}

# KEEP_GROWS: keeping 4 layers' activations outgrows the scratch freed (GeLU: 2 buffers, SwiGLU: 1)
KEEP_GROWS=1
check_layout "GPT DP2 distributed optimizer" "$GPT" --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 20000
check_layout "GPT TP2 sequence parallel" "$GPT" --tensor-model-parallel-size 2 --sequence-parallel
check_layout "Llama TP2 sequence parallel" "$LLAMA" --tensor-model-parallel-size 2 --sequence-parallel
KEEP_GROWS=0
check_layout "GPT PP2" "$GPT" --pipeline-model-parallel-size 2
check_layout "Llama PP2 interleaved" "$LLAMA" --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1

# HFU: hardware / model FLOPs of the GPT (l 4, h 64, s 64, V 256, causal). Per token forward:
# layer 8h^2 (attention projections) + 2hs (core, causal) + 16h^2 (MLP) = 106496, logits
# 2hV = 32768; model = 3 (4 x 106496 + 32768) = 1376256. Selective adds the core of 4 layers
# (32768), uniform every layer's forward (425984), block 2 of the 4 layers on one stage
# (212992), while on PP2 block 2 is every layer of both stages (425984).
hfu_ratio() {  # TAG EXPECTED_EXTRA: hardware/model TFLOP/s of the last iteration = 1 + EXTRA/1376256
    awk -v hw="$(last "$WORK/$1.jsonl" hardware_tflops_per_gpu)" -v model="$(last "$WORK/$1.jsonl" model_tflops_per_gpu)" \
        -v want="$2" 'BEGIN { r = model > 0 ? hw / model : 0; e = 1 + want / 1376256;
                              printf "# hardware/model %.9f, by hand %.9f\n", r, e; d = r - e; if (d < 0) d = -d; exit !(d < 1e-7) }'
}
for case in "none 0" "selective 32768" "uniform 425984" "block 212992" "norms 0" "norms_attn 32768"; do
    set -- $case
    hfu_ratio "GPT_DP2_distributed_optimizer.$1" "$2"
    ok $? "HFU, $1 (DP2): hardware FLOPs = model + $2 per token, by hand"
done
hfu_ratio "GPT_PP2.block" 425984
ok $? "HFU, block 2 on PP2: every layer of both stages recomputed"
grep -q "| MFU: [0-9.]*% | HFU: [0-9.]*% |" "$WORK/GPT_DP2_distributed_optimizer.uniform.out" &&
    awk -v m="$(last "$WORK/GPT_DP2_distributed_optimizer.uniform.jsonl" mfu)" \
        -v h="$(last "$WORK/GPT_DP2_distributed_optimizer.uniform.jsonl" hfu)" 'BEGIN { exit !(h > m && m > 0) }'
ok $? "the log line shows MFU and HFU, and the JSON's hfu exceeds its mfu with full recompute"

# Megatron's rules (arguments.py, TransformerConfig.__post_init__)
MODEL=$GPT; LAYOUT=
expect_error() {  # DESCRIPTION PATTERN FLAGS...
    desc=$1; pattern=$2; shift 2
    run_app 1 $MODEL "$@"; status=$?
    if [ "$status" -ne 0 ] && grep -q -- "$pattern" "$WORK/err"; then ok 0 "$desc"; else ok 1 "$desc"; sed 's/^/#   /' "$WORK/err" | head -3; fi
}
expect_error "full without a method is refused" "recompute-granularity full needs --recompute-method uniform or block" \
    --recompute-granularity full --recompute-num-layers 1
expect_error "full without a layer count is refused" "needs --recompute-num-layers between 1 and the layers per pipeline stage (4)" \
    --recompute-granularity full --recompute-method block
expect_error "selective with a method is refused" "recompute-method uniform is not supported with --recompute-granularity selective" \
    --recompute-granularity selective --recompute-method uniform
expect_error "--recompute-activations (selective) with a layer count is refused" "recompute-num-layers must not be given with --recompute-granularity selective (which --recompute-activations sets)" \
    --recompute-activations --recompute-num-layers 2
expect_error "an unknown granularity is refused" "recompute-granularity" --recompute-granularity partial
expect_error "--recompute-modules without selective is refused" "recompute-modules layernorm needs --recompute-granularity selective" \
    --recompute-modules layernorm
expect_error "--recompute-modules with full is refused" "recompute-modules core_attn needs --recompute-granularity selective" \
    --recompute-granularity full --recompute-method block --recompute-num-layers 1 --recompute-modules core_attn
expect_error "an unknown module is refused by name" "unknown module 'layer_norm'" \
    --recompute-granularity selective --recompute-modules core_attn layer_norm
expect_error "a mixture-of-experts module needs an MoE model" "recompute-modules moe_act needs --num-experts" \
    --recompute-granularity selective --recompute-modules moe_act
expect_error "the dense MLP module is refused" "recompute-modules mlp (the whole dense MLP) is not supported" \
    --recompute-activations --recompute-modules mlp

done_testing
