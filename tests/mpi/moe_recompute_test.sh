#!/bin/sh
# moe_recompute_test.sh: Megatron's MoE recompute modules on configs/mixtral-tiny.args, on one
# rank, with expert parallelism over 2 ranks and with tensor parallelism 2 (sequence parallel). --recompute-modules moe_act (the experts'
# activation) with --keep-mlp-activation: the losses of 3 iterations and every parameter bitwise
# those of the run that keeps the activation (the CPU's recomputed activation is the forward's, bit
# for bit) and of the run without --keep-mlp-activation, with less peak memory than keeping it.
# --recompute-modules moe (the whole MoE layer run again in the backward from its input, the
# all-to-alls included) and its older spelling --moe-layer-recompute: bitwise the run without,
# with less peak memory than recomputing core_attn alone; also with shared experts and their gate, the router's input jitter, a
# capacity with token dropping and the expert bias (aux-loss-free balancing). --recompute-modules
# shared_experts (their forward again in the backward): bitwise, with less peak memory.
. "${top_srcdir:-.}/tests/lib.sh"
MIXTRAL="--args-file $top_srcdir/configs/mixtral-tiny.args --device cpu --train-iters 3 --lr-warmup-iters 1
         --eval-iters 0 --log-interval 1 --micro-batch-size 2 --global-batch-size 4 --num-layers 4"
MOE_ACT="--recompute-granularity selective --recompute-modules core_attn moe_act"

last() { json_field "$1" train "$2" | tail -1; }

# run_mode RANKS TAG FLAGS...: metrics in $WORK/TAG.jsonl, losses in TAG.loss, parameters in TAG.bin
run_mode() {
    ranks=$1; run=$2; shift 2
    run_app "$ranks" $MIXTRAL "$@" --metrics-file "$WORK/$run.jsonl" --dump-parameters "$WORK/$run.bin"
    status=$?
    [ $status -eq 0 ] || { diag "$run: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    json_field "$WORK/$run.jsonl" train lm_loss > "$WORK/$run.loss" 2>/dev/null
    return $status
}

same() {  # same A B: 3 losses and the parameters bitwise equal
    [ "$(wc -l < "$WORK/$1.loss")" -eq 3 ] && cmp -s "$WORK/$1.loss" "$WORK/$2.loss" && cmp -s "$WORK/$1.bin" "$WORK/$2.bin"
}

for layout in "1 one rank" "2 EP2" "2 TP2"; do
    ranks=${layout%% *}; name=${layout#* }
    case $name in EP2) extra="--expert-model-parallel-size 2" ;; TP2) extra="--tensor-model-parallel-size 2 --sequence-parallel" ;;
                  *) extra="" ;; esac
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_mode "$ranks" "$tag.keep" $extra --keep-mlp-activation || { ok 1 "$name: the run keeping the activation"; continue; }
    run_mode "$ranks" "$tag.moe_act" $extra --keep-mlp-activation $MOE_ACT || { ok 1 "$name: the moe_act run"; continue; }
    run_mode "$ranks" "$tag.plain" $extra || { ok 1 "$name: the run without --keep-mlp-activation"; continue; }
    same "$tag.keep" "$tag.moe_act"
    ok $? "$name: moe_act gives the losses of 3 iterations and every parameter bitwise those keeping the activation"
    same "$tag.plain" "$tag.moe_act"
    ok $? "$name: and those of the run without --keep-mlp-activation (whose experts recompute it anyway)"
    a=$(last "$WORK/$tag.moe_act.jsonl" peak_memory_gib); b=$(last "$WORK/$tag.keep.jsonl" peak_memory_gib)
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a + 0 > 0 && a + 0 < b + 0) }'
    ok $? "$name: peak memory with moe_act ($a GiB) below keeping the experts' activation ($b GiB)"
    # the memory baseline of moe: core_attn alone (--moe-layer-recompute recomputes core_attn and moe)
    run_mode "$ranks" "$tag.attn" $extra --recompute-granularity selective --recompute-modules core_attn ||
        { ok 1 "$name: the core_attn run"; continue; }
    for mode in moe layer_flag; do
        case $mode in moe) flags="--recompute-granularity selective --recompute-modules core_attn moe" ;;
                      layer_flag) flags="--moe-layer-recompute" ;; esac
        run_mode "$ranks" "$tag.$mode" $extra $flags || { ok 1 "$name, $flags: run failed"; continue; }
        same "$tag.plain" "$tag.$mode"
        ok $? "$name, $flags: the losses of 3 iterations and every parameter bitwise those without"
        a=$(last "$WORK/$tag.$mode.jsonl" peak_memory_gib); b=$(last "$WORK/$tag.attn.jsonl" peak_memory_gib)
        awk -v a="$a" -v b="$b" 'BEGIN { exit !(a + 0 > 0 && a + 0 < b + 0) }'
        ok $? "$name, $flags: peak memory ($a GiB) below recomputing core_attn alone ($b GiB)"
    done
done

# the rest of the layer's features under --recompute-modules moe, expert parallelism over 2 ranks
FEATURES="--expert-model-parallel-size 2 --moe-shared-expert-intermediate-size 32 --moe-shared-expert-gate
          --moe-input-jitter-eps 0.05 --moe-expert-capacity-factor 1.0 --moe-router-score-function sigmoid
          --moe-router-enable-expert-bias"
run_mode 2 features.plain $FEATURES && run_mode 2 features.moe $FEATURES --recompute-granularity selective --recompute-modules moe &&
    same features.plain features.moe
ok $? "EP2 with shared experts and gate, input jitter, capacity 1.0 and the expert bias: moe recompute bitwise the run without"
run_mode 2 features.shared $FEATURES --recompute-granularity selective --recompute-modules shared_experts &&
    same features.plain features.shared
ok $? "the same with --recompute-modules shared_experts (the shared experts' forward again in the backward): bitwise"
a=$(last "$WORK/features.shared.jsonl" peak_memory_gib); b=$(last "$WORK/features.plain.jsonl" peak_memory_gib)
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a + 0 > 0 && a + 0 < b + 0) }'
ok $? "shared_experts: peak memory ($a GiB) below the run without ($b GiB)"
run_mode 2 features.both $FEATURES --recompute-granularity selective --recompute-modules moe shared_experts core_attn &&
    same features.plain features.both
ok $? "moe and shared_experts together: bitwise"
done_testing
