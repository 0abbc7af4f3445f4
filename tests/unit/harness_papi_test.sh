#!/bin/sh
# harness_papi_test.sh: the harness's GPU-counter tables (issue 48) from the metrics file of a
# real run: GPT 1.3B on one H200 with --papi-events default --papi-sample-interval 0 at
# --log-interval 10 (perf/results/logs/papi-overhead-h200-2026-11-29/deferred-papi10.jsonl, its
# record perf/results/training/papi-overhead-h200-2026-11-29.md). No GPU is needed: the figures
# are computed from the recorded counts, through perf/papi/gpu_figures.py and perf/harness's
# read_metrics and report (no made-up numbers). Checked: the per-phase figures and the
# counted/model ratio the record states (1.018), the report's two tables with the H200's DRAM
# peak, a file without GPU counts giving no table, and gpu_figures.py's refusal of such a file.
. "${top_srcdir:-.}/tests/lib.sh"

METRICS="$top_srcdir/perf/results/logs/papi-overhead-h200-2026-11-29/deferred-papi10.jsonl"
FIGURES="$top_srcdir/perf/papi/gpu_figures.py"
python3 "$FIGURES" "$METRICS" --gpu H200 > "$WORK/figures.out" 2>&1
grep -q "^  forward  *48.33  *29.38  *46572.48 " "$WORK/figures.out" &&
    grep -q "^  backward  *135.71  *35.93  *94738.39 " "$WORK/figures.out" &&
    grep -q "1.154 TB/s = 24.0% of the 4.80 TB/s peak" "$WORK/figures.out" &&
    grep -q "counted / model = 1.018" "$WORK/figures.out"
ok $? "gpu_figures.py: the recorded run's per-phase counts, 1.154 TB/s (24.0% of the H200's 4.8), counted / model 1.018"

# a harness record built from the metrics file by the harness's own reader, as `harness run` does
python3 - "$top_srcdir/perf/harness" "$METRICS" "$WORK" > "$WORK/report.out" 2>&1 <<'PY'
import importlib.machinery, importlib.util, json, sys
loader = importlib.machinery.SourceFileLoader("harness", sys.argv[1])
spec = importlib.util.spec_from_loader("harness", loader)
harness = importlib.util.module_from_spec(spec)
loader.exec_module(harness)
stats, extra = harness.read_metrics(sys.argv[2], 10)
case = {"name": "gpt-1.3b", "ranks": 1, "stats": stats, "extra": extra}
result = {"cases": [case], "machine": {"gpu_model": "NVIDIA H200"}}
phases, step = harness.papi_gpu_tables(result)
print(phases)
print(step)
plain = {"cases": [{"name": "no-counts", "ranks": 1, "stats": stats, "extra": {}}], "machine": {}}
print("without counts:", harness.papi_gpu_tables(plain))
PY
status=$?
[ $status -eq 0 ] || sed 's/^/#   /' "$WORK/report.out" | tail -5
grep -q "^| gpt-1.3b | forward | 48.33 | 29.38 | 46,572 | 336.9 |$" "$WORK/report.out" &&
    grep -q "^| gpt-1.3b | optimizer | 26.32 | 18.41 | 0 | 0.0 |$" "$WORK/report.out" &&
    ! grep -q "| data |\|| grad_reduce |\|| checkpoint |" "$WORK/report.out"
ok $? "the harness's phase table: forward and optimizer rows from the counts, phases without GPU work left out"
grep -q "^| case | counted iterations | DRAM TB/s | of the peak (4.8 TB/s) |" "$WORK/report.out" &&
    grep -q "^| gpt-1.3b | 5 | 1.154 | 24.0% | 554.4 | 544.4 | 1.018 | 55.1% |$" "$WORK/report.out"
ok $? "the harness's step table: 5 counted iterations, DRAM 1.154 TB/s of the 4.8 peak, 554.4 counted against 544.4 model TFLOP/s, 1.018, the steady state's median MFU"
grep -q "^without counts: None$" "$WORK/report.out"
ok $? "a record without GPU counts has no GPU table"

grep -v '"papi"' "$METRICS" > "$WORK/plain.jsonl"
python3 "$FIGURES" "$WORK/plain.jsonl" > "$WORK/plain.out" 2>&1
[ $? -ne 0 ] && grep -q "no logged training iteration with PAPI counts" "$WORK/plain.out"
ok $? "gpu_figures.py on a file without counts: $(cat "$WORK/plain.out")"
done_testing
