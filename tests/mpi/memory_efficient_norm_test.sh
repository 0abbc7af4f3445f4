#!/bin/sh
# memory_efficient_norm_test.sh: --memory-efficient-layer-norm (the norms' backward from their
# outputs, as Apex's memory-efficient kernels; the residual stream's values are no longer kept per
# layer) on 2 ranks of the tiny presets, dropout on, for each layout (DP2 with the distributed
# optimizer, TP2 with sequence parallelism, PP2, and the tiny Llama, RMSNorm, on TP2 and
# interleaved PP2): the losses of 3 steps and the gradient norms are within 1e-5 of the run that
# keeps the norms' inputs (the normalized values come back from the outputs up to fp32
# rounding), and peak backend memory is lower; with full recompute (uniform) and with
# --keep-mlp-activation and selective recompute as well, the same. The combination with
# --recompute-modules layernorm is refused by name.
. "${top_srcdir:-.}/tests/lib.sh"
COMMON="--num-layers 4 --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0
        --hidden-dropout 0.1 --attention-dropout 0.1 --device cpu"
GPT="--args-file $TINY_ARGS $COMMON"
LLAMA="--args-file $top_srcdir/configs/llama-tiny.args $COMMON"
MEMEFF="--memory-efficient-layer-norm"

last() { json_field "$1" train "$2" | tail -1; }

run_mode() {  # TAG FLAGS... (after MODEL and LAYOUT): metrics in $WORK/TAG.jsonl, losses in TAG.loss
    run=$1; shift
    run_app 2 $MODEL $LAYOUT "$@" --metrics-file "$WORK/$run.jsonl"
    status=$?
    [ $status -eq 0 ] || { diag "$run: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; return $status; }
    json_field "$WORK/$run.jsonl" train lm_loss > "$WORK/$run.loss"
    json_field "$WORK/$run.jsonl" train grad_norm > "$WORK/$run.gnorm"
}

# close A B WHAT: losses and gradient norms of B within 1e-5 of A's (3 of each)
close() {
    paste "$WORK/$1.loss" "$WORK/$2.loss" "$WORK/$1.gnorm" "$WORK/$2.gnorm" | awk '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        { n++; if (rel($1, $2) > worst) worst = rel($1, $2); if (rel($3, $4) > worst) worst = rel($3, $4) }
        END { printf "# worst relative difference of losses and gradient norms: %g\n", worst; exit !(n == 3 && worst < 1e-5) }'
    ok $? "$3"
}

lower() {  # lower A B: peak memory of run A is below run B's
    awk -v a="$(last "$WORK/$1.jsonl" peak_memory_gib)" -v b="$(last "$WORK/$2.jsonl" peak_memory_gib)" \
        'BEGIN { printf "# peak GiB: %s %s, %s %s\n", "'"$1"'", a, "'"$2"'", b; exit !(a + 0 < b + 0 && a + 0 > 0) }'
}

check_layout() {  # NAME MODEL LAYOUT...
    name=$1; MODEL=$2; shift 2; LAYOUT="$*"
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_mode "$tag.base" && run_mode "$tag.memeff" $MEMEFF || { ok 1 "$name: runs"; return; }
    close "$tag.base" "$tag.memeff" "$name: losses and gradient norms from the norms' outputs within 1e-5 of from their inputs"
    lower "$tag.memeff" "$tag.base"
    ok $? "$name: peak memory lower without the residual stream's values per layer"
    full="--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"
    run_mode "$tag.full" $full && run_mode "$tag.full_memeff" $full $MEMEFF &&
        close "$tag.full" "$tag.full_memeff" "$name: with full recompute too" || ok 1 "$name: full recompute runs"
    keep="--keep-mlp-activation --recompute-activations"
    run_mode "$tag.keep" $keep && run_mode "$tag.keep_memeff" $keep $MEMEFF &&
        close "$tag.keep" "$tag.keep_memeff" "$name: with --keep-mlp-activation and selective recompute too" ||
        ok 1 "$name: --keep-mlp-activation runs"
}

check_layout "GPT DP2 distributed optimizer" "$GPT" --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 20000
check_layout "GPT TP2 sequence parallel" "$GPT" --tensor-model-parallel-size 2 --sequence-parallel
check_layout "Llama TP2 sequence parallel" "$LLAMA" --tensor-model-parallel-size 2 --sequence-parallel
check_layout "GPT PP2" "$GPT" --pipeline-model-parallel-size 2
check_layout "Llama PP2 interleaved" "$LLAMA" --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1

run_app 1 $GPT $MEMEFF --recompute-granularity selective --recompute-modules layernorm; status=$?
[ $status -ne 0 ] && grep -q "memory-efficient-layer-norm computes the norms' backward from their kept outputs, which --recompute-modules layernorm drops" "$WORK/err"
ok $? "--memory-efficient-layer-norm with --recompute-modules layernorm is refused, naming both"
done_testing
