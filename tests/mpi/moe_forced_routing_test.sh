#!/bin/sh
# moe_forced_routing_test.sh: Megatron's benchmark routers on configs/mixtral-tiny.args (4
# experts, top-2; 3 iterations of 16 sequences of 64 tokens: 2048 choices per layer and
# iteration). --moe-router-force-load-balancing (random logits) gives every expert of every layer
# within 15% of the mean 512 (the binomial's sigma is about 22); --moe-router-force-biased -5 (one
# random expert bias per layer for the run) sends at least 95% of the choices to the same two
# experts of a layer in every iteration, and +5 (a new bias each iteration) changes that pair
# between iterations; the draws follow the samples, not the layout: expert parallelism over 2
# ranks gives the one-rank tokens per expert exactly and its losses within 1e-6 relative; and the
# router's weight still learns (straight-through): its parameters differ from the initial ones.
. "${top_srcdir:-.}/tests/lib.sh"
MIXTRAL="--args-file $top_srcdir/configs/mixtral-tiny.args --device cpu --train-iters 3 --lr-warmup-iters 0
         --eval-iters 0 --log-interval 1"

# run RANKS TAG FLAGS...: metrics in $WORK/TAG.jsonl
run() {
    ranks=$1; tag=$2; shift 2
    run_app "$ranks" $MIXTRAL "$@" --metrics-file "$WORK/$tag.jsonl"; status=$?
    [ $status -eq 0 ] || { diag "$tag: exit $status"; sed 's/^/#   /' "$WORK/err" | tail -3; }
    return $status
}

# counts TAG: one line per iteration and MoE layer, "iteration layer c0 c1 c2 c3"
counts() {
    python3 - "$WORK/$1.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    for layer in d.get("moe_layers", []):
        print(d["iteration"], layer["layer"], *layer["tokens_per_expert"])
PY
}

run 1 balanced --moe-router-force-load-balancing || ok 1 "force-load-balancing run"
counts balanced > "$WORK/balanced.counts"
[ "$(wc -l < "$WORK/balanced.counts")" -eq 6 ] &&
    awk '{ for (e = 3; e <= NF; e++) if ($e < 512 * 0.85 || $e > 512 * 1.15) bad = 1 } END { exit bad }' "$WORK/balanced.counts"
ok $? "--moe-router-force-load-balancing: every expert of each layer and iteration within 15% of 512 choices"
diag "$(tr '\n' ';' < "$WORK/balanced.counts")"

run 1 fixed_bias --moe-router-force-biased -5 || ok 1 "force-biased -5 run"
counts fixed_bias > "$WORK/fixed_bias.counts"
# the two largest counts of a layer: "layer a b" per iteration, with their share of the choices
top_two() {
    awk '{ best = -1; second = -1; for (e = 3; e <= NF; e++) { if ($e > (best < 0 ? -1 : $(best))) { second = best; best = e }
           else if (second < 0 || $e > $(second)) second = e }
           printf "%d %d %d %.4f\n", $2, (best < second ? best : second) - 3, (best < second ? second : best) - 3, ($(best) + $(second)) / 2048 }' "$1"
}
top_two "$WORK/fixed_bias.counts" > "$WORK/fixed_bias.top"
[ "$(wc -l < "$WORK/fixed_bias.top")" -eq 6 ] && awk '$4 < 0.95 { bad = 1 } END { exit bad }' "$WORK/fixed_bias.top" &&
    [ "$(cut -d' ' -f1-3 "$WORK/fixed_bias.top" | sort -u | wc -l)" -eq 2 ]
ok $? "--moe-router-force-biased -5: the same two experts of each layer take at least 95% of the choices in every iteration"
diag "$(tr '\n' ';' < "$WORK/fixed_bias.top")"

run 1 new_bias --moe-router-force-biased 5 || ok 1 "force-biased 5 run"
counts new_bias > "$WORK/new_bias.counts"
top_two "$WORK/new_bias.counts" > "$WORK/new_bias.top"
[ "$(wc -l < "$WORK/new_bias.top")" -eq 6 ] && [ "$(cut -d' ' -f1-3 "$WORK/new_bias.top" | sort -u | wc -l)" -gt 2 ]
ok $? "--moe-router-force-biased 5: a new bias each iteration moves the favoured experts of some layer"
diag "$(tr '\n' ';' < "$WORK/new_bias.top")"

run 2 balanced_ep2 --moe-router-force-load-balancing --expert-model-parallel-size 2 || ok 1 "EP2 run"
counts balanced_ep2 > "$WORK/balanced_ep2.counts"
cmp -s "$WORK/balanced.counts" "$WORK/balanced_ep2.counts"
ok $? "EP2 (2 ranks) draws the one-rank logits: the same tokens per expert"
json_field "$WORK/balanced.jsonl" train lm_loss > "$WORK/a.loss"
json_field "$WORK/balanced_ep2.jsonl" train lm_loss > "$WORK/b.loss"
[ "$(wc -l < "$WORK/a.loss")" -eq 3 ] &&
    paste "$WORK/a.loss" "$WORK/b.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $1) bad = 1 } END { exit bad }'
ok $? "EP2 losses within 1e-6 relative of one rank's"

# straight-through: the router's weight learns from the random logits' gradient (a step at lr 0 is
# the initial model; the router's weights of the trained one differ)
router_bytes() {  # router_bytes DUMP: the bytes of every router weight, in index order
    python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
for line in open(sys.argv[1] + ".index"):
    name, rows, cols, offset = line.split()[:4]
    if name.endswith("mlp.router.weight"):
        sys.stdout.write(data[4 * int(offset):4 * (int(offset) + int(rows) * int(cols))].hex() + "\n")
PY
}
run_app 1 $MIXTRAL --train-iters 1 --weight-decay 0 --moe-router-force-load-balancing --dump-parameters "$WORK/trained.bin" &&
    run_app 1 $MIXTRAL --train-iters 1 --weight-decay 0 --lr 0 --min-lr 0 --moe-router-force-load-balancing --dump-parameters "$WORK/frozen.bin" &&
    router_bytes "$WORK/trained.bin" > "$WORK/trained.router" && router_bytes "$WORK/frozen.bin" > "$WORK/frozen.router" &&
    [ "$(wc -l < "$WORK/trained.router")" -eq 2 ] && ! cmp -s "$WORK/trained.router" "$WORK/frozen.router"
ok $? "the routers' weights still train (straight-through gradient): after a step they differ from lr 0's"
done_testing
