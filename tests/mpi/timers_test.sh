#!/bin/sh
# timers_test.sh: Megatron's --timing-log-level 1/2 phase timers in 2-rank runs of the tiny GPT.
# PP2 at level 2 (--timing-log-option all): every rank's times in the text and the metrics
# JSON, the pipeline's send/recv timers (1F1B's combined forward-send-backward-recv), and per
# rank forward-backward >= forward-compute + backward-compute. DP2 with the distributed
# optimizer at level 1 (minmax): the level-1 names only, params-all-gather, Megatron's
# "(min, max)" lines parse with min <= max; at level 2 (max) the compute timers join and no
# send/recv timer (no pipeline). Level 0: no timer block after the set-up one, no timers_ms.
# --log-timers-to-tensorboard writes NAME-time and iteration-time. Bad values: one line each.
. "${top_srcdir:-.}/tests/lib.sh"

SHORT="--args-file $TINY_ARGS --train-iters 4 --lr-warmup-iters 1 --log-interval 2 --eval-iters 0"
LEVEL1="forward-backward layernorm-grads-all-reduce embedding-grads-all-reduce all-grads-sync optimizer-clip-main-grad optimizer-inner-step optimizer"

# check_run OUT JSONL LEVEL OPTION REQUIRED ABSENT: the timer blocks printed after each logged
# iteration line and the metrics lines' timers_ms (both 2 logged iterations), the names they must
# and must not hold, the format of OPTION, and the nesting of the timers
check_run() {
    python3 - "$@" <<'EOF'
import json, re, sys
out, jsonl, level, option, required, absent = sys.argv[1:7]
required, absent = required.split(), absent.split()
lines = open(out).read().split("\n")
headers = {"minmax": "(min, max) time across ranks (ms):", "max": "max time across ranks (ms):",
           "all": "times across ranks (ms):"}
blocks = []   # per logged iteration: {name: [values]}
for i, line in enumerate(lines):
    if " iteration " not in line or "consumed samples" not in line:
        continue
    assert lines[i + 1] == headers[option], "after %r: %r" % (line[:40], lines[i + 1])
    timers, name, j = {}, None, i + 2
    while j < len(lines) and lines[j].startswith("  "):
        l = lines[j]
        if option == "all":
            m = re.fullmatch(r"  (\S+):", l) or re.fullmatch(r"     rank ([ \d]\d): (\d+\.\d\d)", l)
            assert m, "bad line %r" % l
            if l.startswith("     rank"):
                timers[name].append(float(m.group(2)))
            else:
                name = m.group(1)
                timers[name] = []
        else:
            pattern = r"    (\S+) \.+: \((\d+\.\d\d), (\d+\.\d\d)\)" if option == "minmax" else r"    (\S+) \.+: (\d+\.\d\d)"
            m = re.fullmatch(pattern, l)
            assert m, "bad line %r" % l
            assert len(l.split(":")[0]) == 4 + 48 or len(m.group(1)) >= 47, "label not 48 wide: %r" % l
            timers[m.group(1)] = [float(v) for v in m.groups()[1:]]
            if option == "minmax":
                assert timers[m.group(1)][0] <= timers[m.group(1)][1], l
        j += 1
    blocks.append(timers)
assert len(blocks) == 2, "%d timer blocks" % len(blocks)
train = [json.loads(l) for l in open(jsonl) if '"train"' in l]
assert len(train) == 2, "%d metrics lines" % len(train)
for block, metrics in zip(blocks, train):
    t = metrics["timers_ms"]
    assert sorted(t) == sorted(block), "JSON %s vs text %s" % (sorted(t), sorted(block))
    for name in required:
        assert name in t, "%s missing: %s" % (name, sorted(t))
    for name in absent:
        assert name not in t, "%s should not be there" % name
    for name, v in t.items():
        assert 0 <= v["min"] <= v["max"], (name, v)
    if "forward-compute" in t:
        assert t["forward-backward"]["max"] >= t["forward-compute"]["max"], t
        assert t["forward-backward"]["min"] >= t["forward-compute"]["min"], t
    if option == "all" and "forward-compute" in t:
        for r, fb in enumerate(t["forward-backward"]["ranks"]):
            inner = t["forward-compute"]["ranks"][r] + t["backward-compute"]["ranks"][r]
            assert fb >= inner, "rank %d: forward-backward %.3f < forward + backward compute %.3f" % (r, fb, inner)
print(" ".join(sorted(blocks[-1])))
EOF
}

run_app 2 $SHORT --pipeline-model-parallel-size 2 --timing-log-level 2 --timing-log-option all \
    --metrics-file "$WORK/pp.jsonl" --tensorboard-dir "$WORK/tb" --log-timers-to-tensorboard; status=$?
names=$(check_run "$WORK/out" "$WORK/pp.jsonl" 2 all \
    "$LEVEL1 forward-compute backward-compute batch-generator forward-send-backward-recv backward-send-forward-recv" \
    "optimizer-copy-to-main-grad optimizer-count-zeros params-all-gather" 2>&1); checked=$?
[ $status -eq 0 ] && [ $checked -eq 0 ]
ok $? "PP2, level 2, all: every rank's time of each timer, in the JSON too, forward-backward >= forward + backward compute: $names"
grep -q "forward-backward-time" "$WORK"/tb/events.out.tfevents.* && grep -q "iteration-time" "$WORK"/tb/events.out.tfevents.* &&
    grep -q "forward-send-backward-recv-time" "$WORK"/tb/events.out.tfevents.*
ok $? "--log-timers-to-tensorboard: forward-backward-time, forward-send-backward-recv-time and iteration-time scalars"

run_app 2 $SHORT --use-distributed-optimizer --timing-log-level 1 --metrics-file "$WORK/dp1.jsonl"; status=$?
names1=$(check_run "$WORK/out" "$WORK/dp1.jsonl" 1 minmax "$LEVEL1 params-all-gather" \
    "forward-compute backward-compute batch-generator forward-recv forward-send" 2>&1); checked=$?
[ $status -eq 0 ] && [ $checked -eq 0 ]
ok $? "DP2 (distributed optimizer), level 1, minmax: Megatron's (min, max) lines, the level-1 names: $names1"

run_app 2 $SHORT --use-distributed-optimizer --timing-log-level 2 --timing-log-option max --metrics-file "$WORK/dp2.jsonl"; status=$?
names2=$(check_run "$WORK/out" "$WORK/dp2.jsonl" 2 max "$names1 forward-compute backward-compute batch-generator" \
    "forward-recv forward-send backward-recv backward-send forward-send-backward-recv" 2>&1); checked=$?
[ $status -eq 0 ] && [ $checked -eq 0 ]
ok $? "DP2, level 2, max: level 2 adds forward-compute, backward-compute, batch-generator and no send/recv timer: $names2"

run_app 2 $SHORT --metrics-file "$WORK/level0.jsonl"; status=$?
[ $status -eq 0 ] && [ "$(grep -c "time across ranks" "$WORK/out")" -eq 1 ] && grep -q "model-and-optimizer-setup" "$WORK/out" &&
    [ "$(grep -c '"train"' "$WORK/level0.jsonl")" -eq 2 ] && ! grep -q timers_ms "$WORK/level0.jsonl"
ok $? "level 0 (the default): only the set-up timers, no timers_ms"

for case in "--timing-log-level 3|pretrain_gpt: error: --timing-log-level must be in [0, 2], got 3" \
    "--timing-log-option foo|pretrain_gpt: error: --timing-log-option must be one of max|minmax|all, got 'foo'"; do
    run_app 2 $SHORT ${case%%|*}; status=$?
    cat "$WORK/out" "$WORK/err" > "$WORK/all"
    [ $status -ne 0 ] && [ "$(grep -c . "$WORK/all")" -eq 1 ] && grep -qxF -- "${case#*|}" "$WORK/all"
    ok $? "${case%%|*}: one line: $(head -c 200 "$WORK/all")"
done

done_testing
