#!/bin/sh
# papi_test.sh: --papi-events counts hardware events per phase. Where PAPI can count, every
# logged iteration's metrics line has a "papi" object with every phase, and forward, backward
# and optimizer executed instructions; where it cannot (no PMU, perf_event_paranoid, a
# container without perf events), one clear line says so and training still succeeds. A build
# without PAPI rejects the flag with one message. A bad event name is one clear error naming it.
. "${top_srcdir:-.}/tests/lib.sh"

SHORT="--args-file $TINY_ARGS --train-iters 6 --lr-warmup-iters 2 --log-interval 2 --eval-iters 0"
run_app 2 $SHORT --metrics-file "$WORK/papi.jsonl" --papi-events PAPI_TOT_INS; status=$?
cat "$WORK/out" "$WORK/err" > "$WORK/all"
cannot=$(grep -c "PAPI cannot count on this machine" "$WORK/all")
no_build=$(grep -c "this build has no PAPI" "$WORK/all")

python3 -c '
import json, sys
phases = ["data", "forward", "backward", "grad_reduce", "optimizer", "checkpoint"]
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [l for l in lines if l["split"] == "train"]
assert len(train) == 3, "3 logged iterations, got %d" % len(train)
for l in train:
    papi = l["papi"]
    assert sorted(papi) == sorted(phases), "phases %s" % sorted(papi)
    for p in ("forward", "backward", "optimizer"):
        assert papi[p]["PAPI_TOT_INS"] > 0, "%s: %s" % (p, papi[p])
print("forward instructions per interval: %s" % [l["papi"]["forward"]["PAPI_TOT_INS"] for l in train])
' "$WORK/papi.jsonl" > "$WORK/check" 2>&1
counted=$?

if [ $status -eq 0 ] && [ $counted -eq 0 ]; then
    diag "case: PAPI counted on this machine: $(cat "$WORK/check")"
    grep -q "PAPI counts per phase" "$WORK/out"
    ok $? "the run counted instructions per phase (JSON) and rank 0 printed the table at the end"
elif [ $status -eq 0 ] && [ "$cannot" -eq 1 ]; then
    diag "case: PAPI cannot count here: $(grep "PAPI cannot count" "$WORK/all")"
    python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len([l for l in lines if l["split"] == "train"]) == 3 and not any("papi" in l for l in lines)
' "$WORK/papi.jsonl"
    ok $? "one clear line, and the run went on without counters (3 metrics lines, no papi object)"
elif [ $status -ne 0 ] && [ "$no_build" -ge 1 ]; then
    diag "case: this build has no PAPI: $(grep -m1 "this build has no PAPI" "$WORK/all")"
    ok 0 "a build without PAPI rejects --papi-events with one clear message"
else
    diag "exit status $status; $(cat "$WORK/check"); $(tail -3 "$WORK/all")"
    ok 1 "neither counts nor one clear line saying PAPI cannot count"
fi

# a bad event name: one error naming it, before training
run_app 2 $SHORT --papi-events PAPI_TOT_INS,PAPI_NO_SUCH_EVENT; status=$?
cat "$WORK/out" "$WORK/err" > "$WORK/all"
if [ "$no_build" -ge 1 ]; then
    [ $status -ne 0 ] && grep -q "this build has no PAPI" "$WORK/all"
    ok $? "without PAPI, any --papi-events is the one clear message"
else
    [ $status -ne 0 ] && [ "$(grep -c "error: .*'PAPI_NO_SUCH_EVENT'" "$WORK/all")" -eq 1 ] && ! grep -q " iteration " "$WORK/out"
    ok $? "a bad event name is one error naming it, before training: $(grep "error: .*PAPI_NO_SUCH_EVENT" "$WORK/all")"
fi

# a GPU event where the cuda component cannot count it: one line with PAPI's reason, no counts
GPU_EVENT="cuda:::dram__bytes_read:stat=sum"
run_app 2 $SHORT --metrics-file "$WORK/gpu.jsonl" --papi-events "PAPI_TOT_INS,$GPU_EVENT"; status=$?
cat "$WORK/out" "$WORK/err" > "$WORK/all"
if [ "$no_build" -ge 1 ]; then
    [ $status -ne 0 ] && grep -q "this build has no PAPI" "$WORK/all"
    ok $? "without PAPI, a GPU event is the same one clear message"
else
    reason_lines=$(grep -c "^> PAPI.*$GPU_EVENT: \(this PAPI has no cuda component\|PAPI's cuda component is disabled: .\)" "$WORK/out")
    gpu_lines=$(grep -c "$GPU_EVENT" "$WORK/all")
    python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [l for l in lines if l["split"] == "train"]
assert len(train) == 3, "3 logged iterations, got %d" % len(train)
counted = [l for l in train if sys.argv[2] in l.get("papi", {}).get("forward", {})]
print("counted" if counted else "not counted")
' "$WORK/gpu.jsonl" "$GPU_EVENT" > "$WORK/gpu_check" 2>&1
    checked=$?
    diag "GPU event: $(grep "^> PAPI.*cuda" "$WORK/out" | head -2) [$(cat "$WORK/gpu_check")]"
    if grep -q "^not counted" "$WORK/gpu_check"; then
        # the echoed arguments name the event once more; besides them only the one line
        [ $status -eq 0 ] && [ $checked -eq 0 ] && [ "$reason_lines" -eq 1 ] && [ "$gpu_lines" -eq 2 ]
        ok $? "a GPU event the cuda component cannot count: one line with its reason, and the run completes without it"
    else
        [ $status -eq 0 ] && [ $checked -eq 0 ]
        ok $? "a GPU event counted by the cuda component (a GPU and its profiling permission here)"
    fi
fi

# --papi-sample-interval: perf::TASK-CLOCK (a software event of perf_event, countable in a VM
# without a PMU) on one iteration in 3 of 6, logged every 2 (so the lines cover 0, 1 and 1
# counted iterations), against counting every iteration; and 0 (the log interval: 1 of 2)
SAMPLE="--args-file $TINY_ARGS --train-iters 6 --lr-warmup-iters 2 --log-interval 2 --eval-iters 0 --papi-events perf::TASK-CLOCK"
run_app 1 $SAMPLE --metrics-file "$WORK/every.jsonl"; every_status=$?
run_app 1 $SAMPLE --metrics-file "$WORK/sampled.jsonl" --papi-sample-interval 3; sampled_status=$?
cp "$WORK/out" "$WORK/sampled.out"
run_app 1 $SAMPLE --metrics-file "$WORK/logged.jsonl" --papi-sample-interval 0; logged_status=$?
python3 -c '
import json, sys
def lines(path):
    return [json.loads(l) for l in open(path) if l.strip() and json.loads(l)["split"] == "train"]
every, sampled, logged = (lines(p) for p in sys.argv[1:4])
if not all("papi" in l for l in every):
    print("not counted"); sys.exit(0)
assert [l["papi_iterations"] for l in every] == [2, 2, 2], [l["papi_iterations"] for l in every]
assert [l["papi_iterations"] for l in sampled] == [0, 1, 1], [l["papi_iterations"] for l in sampled]
assert [l["papi_iterations"] for l in logged] == [1, 1, 1], [l["papi_iterations"] for l in logged]
clock = lambda l: l["papi"]["forward"]["perf::TASK-CLOCK"]
assert clock(sampled[0]) == 0, "nothing counted in the first 2 iterations: %s" % sampled[0]["papi"]
assert all(clock(l) > 0 for l in every + sampled[1:] + logged), "forward task clock counted"
print("counted: forward task-clock ns per line, every iteration %s, 1 in 3 %s, the logged ones %s" %
      ([clock(l) for l in every], [clock(l) for l in sampled], [clock(l) for l in logged]))
' "$WORK/every.jsonl" "$WORK/sampled.jsonl" "$WORK/logged.jsonl" > "$WORK/sample_check" 2>&1
checked=$?
diag "$(cat "$WORK/sample_check")"
if [ "$no_build" -ge 1 ]; then
    [ $every_status -ne 0 ]
    ok $? "without PAPI, --papi-sample-interval with --papi-events is the one clear message"
elif grep -q "^not counted" "$WORK/sample_check"; then
    [ $every_status -eq 0 ] && [ $sampled_status -eq 0 ] && [ $logged_status -eq 0 ] && [ $checked -eq 0 ]
    ok $? "--papi-sample-interval where perf::TASK-CLOCK cannot be counted: the runs go on"
else
    [ $every_status -eq 0 ] && [ $sampled_status -eq 0 ] && [ $logged_status -eq 0 ] && [ $checked -eq 0 ] &&
        grep -q "PAPI counts per phase (whole run: 2 counted iterations" "$WORK/sampled.out"
    ok $? "--papi-sample-interval 3 counts iterations 3 and 6 only (papi_iterations 0, 1, 1; none before), 0 the logged ones, and the table says how many"
fi

# the derived figures: 2 ranks, 2 iterations of 0.5 s per line; the first line is the warm-up
cat > "$WORK/gpu_counts.jsonl" <<'JSONL'
{"split": "startup", "time_to_initialize_s": 0.2}
{"split": "train", "iteration": 2, "elapsed_ms_per_iteration": 900.0, "tflops_per_gpu": 1.0, "papi": {"forward": {"cuda:::dram__bytes_read:stat=sum": 1}}, "papi_ranks": 2}
{"split": "train", "iteration": 4, "elapsed_ms_per_iteration": 500.0, "tflops_per_gpu": 400.0, "papi": {"forward": {"PAPI_TOT_INS": 5, "cuda:::dram__bytes_read:stat=sum": 2.0e12, "cuda:::dram__bytes_write:stat=sum": 1.0e12, "cuda:::sm__cycles_active:stat=sum": 1000, "cuda:::sm__pipe_tensor_cycles_active:stat=sum": 600, "cuda:::sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32:stat=sum": 3.0e14, "cuda:::sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32:stat=sum": 1.0e14}, "backward": {"cuda:::dram__bytes_read:stat=sum": 1.0e12, "cuda:::sm__ops_path_tensor_src_bf16_dst_fp32:stat=sum": 3.2e14}}, "papi_ranks": 2}
JSONL
python3 "${top_srcdir:-.}/perf/papi/gpu_figures.py" "$WORK/gpu_counts.jsonl" --gpu H200 > "$WORK/figures" 2>&1
status=$?
diag "$(cat "$WORK/figures")"
[ $status -eq 0 ] && grep -q "^  forward  *500.00  *250.00  *100000.00  *60.0$" "$WORK/figures" &&
    grep -q "2.000 TB/s = 41.7% of the 4.80 TB/s peak" "$WORK/figures" &&
    grep -q "counters: 360.0; the model's (tflops_per_gpu): 400.0 (counted / model = 0.900)" "$WORK/figures"
ok $? "gpu_figures.py: per-GPU bytes and operations per iteration, DRAM bandwidth against the peak, counted against model FLOP/s"
printf '{"split": "train", "iteration": 2, "elapsed_ms_per_iteration": 5.0, "tflops_per_gpu": 1.0}\n' > "$WORK/no_counts.jsonl"
python3 "${top_srcdir:-.}/perf/papi/gpu_figures.py" "$WORK/no_counts.jsonl" --skip 0 > "$WORK/figures" 2>&1
[ $? -ne 0 ] && grep -q "gpu_figures.py: error: .*no_counts.jsonl: no logged training iteration with PAPI counts" "$WORK/figures"
ok $? "gpu_figures.py: a metrics file without counts is one error naming it"

done_testing
