#!/bin/sh
# harness_plots_test.sh: perf/harness draws each kind of study in its own kind of plot (no MPI, no
# training: records are made up here). The default plot of every study in perf/studies (a peer
# comparison gets peer bars, weak/strong over several GPU counts scaling lines, the rest bars per
# case); the `plot` setting and its refusals; then `perf/harness replot` on one record of each
# kind, through a gnuplot that keeps the scripts it is given: peer bars carry the ratio ours/peer
# and no ideal line, scaling lines carry the ideal line, bars per case their ratio to the first,
# a time series one curve per case; every PNG is a PNG, titled with study, machine and date.
. "${top_srcdir:-.}/tests/lib.sh"

HARNESS="python3 $top_srcdir/perf/harness"
command -v gnuplot >/dev/null 2>&1 || diag "no gnuplot: the plot checks fail (apt-get install gnuplot-nox)"
is_png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }

# --- which plot each study of the tree gets by default ---
$HARNESS show "$top_srcdir"/perf/studies/*.study > "$WORK/show.out" 2>&1
ok $? "perf/harness show reads every study in perf/studies"
status=0
for expect in gpt-vs-peer:peer llama-vs-peer:peer strong-cpu:scaling weak-cpu:scaling weak-gpt3:scaling \
    strong-tp-gpt-1.3b-overlap:scaling deterministic-cost:bars recompute-1.3b:bars gpt-tuned:bars \
    strong-tp4-gpt-1.3b-overlap:bars tp2-combos-gpt-1.3b-overlap:bars; do
    grep -q "^${expect%%:*}: kind [a-z]*, plot ${expect#*:} (default)," "$WORK/show.out" ||
        { status=1; diag "${expect%%:*}: expected plot ${expect#*:}: $(grep "^${expect%%:*}:" "$WORK/show.out")"; }
done
ok $status "default plots: peer studies get peer bars, weak/strong over 2+ GPU counts scaling lines, one GPU count or throughput bars"

# --- the plot setting ---
printf 'kind = throughput\nbase = gpt-tiny\nplot = series\ncase ranks=1\n' > "$WORK/series.study"
$HARNESS show "$WORK/series.study" > "$WORK/out" 2>&1 && grep -q "^series: kind throughput, plot series (given)," "$WORK/out"
ok $? "plot = series is taken as given ($(cat "$WORK/out"))"
printf 'kind = throughput\nbase = gpt-tiny\nplot = peer\ncase ranks=1\n' > "$WORK/bad-peer.study"
$HARNESS show "$WORK/bad-peer.study" > "$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "bad-peer.study:3: plot = peer needs a 'peer = ...' line" "$WORK/out"
ok $? "plot = peer without a peer is refused naming file:line ($(cat "$WORK/out"))"
printf 'kind = strong\nbase = gpt-tiny\nplot = scaling\ncase ranks=2 name=a\ncase ranks=2 name=b\n' > "$WORK/bad-scaling.study"
$HARNESS show "$WORK/bad-scaling.study" > "$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "bad-scaling.study:3: plot = scaling needs cases at two or more rank counts" "$WORK/out"
ok $? "plot = scaling over one GPU count is refused ($(cat "$WORK/out"))"
printf 'kind = strong\nbase = gpt-tiny\nplot = lines\ncase ranks=1\n' > "$WORK/bad-kind.study"
$HARNESS show "$WORK/bad-kind.study" > "$WORK/out" 2>&1
[ $? -eq 2 ] && grep -q "bad-kind.study:3: plot must be one of scaling, peer, bars, series, got 'lines'" "$WORK/out"
ok $? "an unknown plot kind is refused ($(cat "$WORK/out"))"

# --- records of each kind, as the harness writes them ---
mkdir -p "$WORK/rec" "$WORK/scripts"
python3 - "$WORK/rec" <<'EOF'
import json, sys
out = sys.argv[1]
def stats(v):
    return {"median": v, "min": v * 0.9, "max": v * 1.05, "q1": v, "q3": v, "iqr": 0.0, "n": 10}
def case(name, ranks, tps, layers=2, hidden=64, mfu=0.4, mem=1.5, peer=None, iterations=12):
    c = {"name": name, "ranks": ranks, "tp": 1, "pp": 1, "dp": ranks, "micro": 2, "global_batch": 2 * ranks, "seq": 64,
         "layers": layers, "hidden": hidden, "heads": 4, "ffn": 4 * hidden, "vocab": 256, "padded_vocab": 256,
         "parameters": 1000000 * layers, "query_groups": 4, "status": "ok", "command_line": "-",
         "stats": {"tokens_per_second": stats(tps), "elapsed_ms_per_iteration": stats(128000.0 / tps),
                   "mfu": stats(mfu), "model_tflops_per_gpu": stats(mfu * 100), "tflops_per_gpu": stats(mfu * 100),
                   "peak_memory_gib": stats(mem)},
         "series": {"iteration": list(range(1, iterations + 1)),
                    "lm_loss": [5.5 - 0.1 * i - 0.01 * ranks for i in range(iterations)],
                    "tokens_per_second": [tps * (0.5 if i < 2 else 1.0) for i in range(iterations)]}}
    if peer:
        c["peer"] = {"status": "ok", "tokens_per_second": peer, "elapsed_ms_per_iteration": 128000.0 / peer,
                     "mfu": mfu * peer / tps, "peak_memory_gib": mem * 1.2, "command_line": "-", "line": "torch-peer"}
    return c
def record(study, kind, cases, title, **more):
    r = {"study": study, "study_file": f"perf/studies/{study}.study", "study_text": "", "kind": kind, "title": title,
         "description": "", "base": "gpt-tiny", "iterations": 12, "warmup": 4, "date": "2026-11-28T10:00:00+00:00",
         "commit": "abc1234", "mode": "local", "peer": None, "cases": cases,
         "machine": {"hostname": "node", "cpu_model": "Test CPU", "cores": 2, "os": "Linux",
                     "gpus": ["NVIDIA H200, 143771 MiB, 580"], "gpu_model": "NVIDIA H200"}}
    r.update(more)
    with open(f"{out}/{study}-2026-11-28.json", "w") as f:
        json.dump(r, f)
# a peer comparison as records were written before the plot kind existed (no "plot": the default)
record("peers", "throughput", [case("small", 1, 1130.0, peer=1000.0), case("large", 1, 212.0, layers=8, hidden=256, peer=200.0)],
       "Ours next to the peer", peer="torch_gpt")
record("scaling", "strong", [case("one", 1, 1000.0), case("two", 2, 1900.0), case("four", 4, 3600.0)], "Strong scaling", plot="scaling")
record("variants", "throughput", [case("plain", 1, 1000.0), case("switch", 1, 950.0), case("other", 1, 500.0, layers=4)],
       "Variants at one size")
record("curves", "throughput", [case("first", 1, 1000.0), case("second", 1, 900.0)], "Two runs over time", plot="series")
EOF
# the old plots of the peer record, and its .md, as the old harness left them
for p in throughput efficiency mfu; do printf 'old' > "$WORK/rec/peers-2026-11-28-$p.png"; done
printf '# peers\n\n## Plots\n\n![peers-2026-11-28-efficiency.png](peers-2026-11-28-efficiency.png)\n\n## Commands\n\n- small\n' \
    > "$WORK/rec/peers-2026-11-28.md"
# a gnuplot that keeps each script it reads (one per PNG) before drawing it
cat > "$WORK/gnuplot" <<EOF
#!/bin/sh
[ \$# -gt 0 ] && exec gnuplot "\$@"
n=\$(ls "$WORK/scripts" | wc -l)
cat > "$WORK/scripts/\$n.gp"
exec gnuplot "$WORK/scripts/\$n.gp"
EOF
chmod +x "$WORK/gnuplot"
GNUPLOT="$WORK/gnuplot" $HARNESS replot "$WORK"/rec/*.json > "$WORK/replot.out" 2>&1
status=$?
ok $status "perf/harness replot draws the four records (exit $status)"
[ $status -eq 0 ] || sed 's/^/# /' "$WORK/replot.out"
# script STEM-NAME: the gnuplot script that drew $WORK/rec/STEM-NAME.png
script() { grep -l "set output \"$WORK/rec/$1.png\"" "$WORK"/scripts/*.gp 2>/dev/null | head -1; }
for png in peers-2026-11-28-throughput peers-2026-11-28-mfu peers-2026-11-28-memory \
    scaling-2026-11-28-throughput scaling-2026-11-28-efficiency scaling-2026-11-28-mfu \
    variants-2026-11-28-throughput variants-2026-11-28-mfu variants-2026-11-28-memory \
    curves-2026-11-28-loss curves-2026-11-28-throughput; do
    is_png "$WORK/rec/$png.png" && [ -n "$(script "$png")" ]
    ok $? "$png.png is a PNG drawn by gnuplot"
done

# peer: bars, the ratio over each pair, tokens/s on the y axis, no ideal line
s=$(script peers-2026-11-28-throughput)
grep -q "with boxes" "$s" && grep -q '"ours/peer = 1.13x"' "$s" && grep -q '"ours/peer = 1.06x"' "$s" &&
    grep -q 'set ylabel "throughput (tokens/s)"' "$s" && ! grep -qi "ideal\|yerrorlines\|logscale" "$s"
ok $? "peer comparison: grouped bars of ours and the peer with the ratio ours/peer (1.13x, 1.06x), tokens/s, no ideal line"
grep -q '"ours (median over steady-state iterations)"' "$s" && grep -q '"PyTorch peer torch_gpt (median step)"' "$s"
ok $? "peer comparison: the key names ours and the peer"
[ ! -e "$WORK/rec/peers-2026-11-28-efficiency.png" ] && grep -q "wrote $WORK/rec/peers-2026-11-28-throughput.png (peer)" "$WORK/replot.out"
ok $? "peer comparison: the old efficiency plot is removed, the record without a plot kind gets peer bars"
grep -q "^!\[peers-2026-11-28-memory.png\](peers-2026-11-28-memory.png)$" "$WORK/rec/peers-2026-11-28.md" &&
    ! grep -q "efficiency.png" "$WORK/rec/peers-2026-11-28.md" && grep -q "^## Commands$" "$WORK/rec/peers-2026-11-28.md"
ok $? "peer comparison: the record's .md lists the new plots and keeps the rest"
s=$(script peers-2026-11-28-mfu)
grep -q "with boxes" "$s" && grep -q "ours at the peer's FLOPs per token" "$s" && grep -q 'set ylabel "MFU (% of peak FLOP/s)"' "$s"
ok $? "peer comparison: MFU as grouped bars, ours in both FLOP counts and the peer's"

# scaling: lines against ideal, efficiency against 100%
s=$(script scaling-2026-11-28-throughput)
grep -q "with yerrorlines" "$s" && grep -q '"ideal (linear from one)"' "$s" && grep -q 'set xlabel "GPUs (ranks)"' "$s" &&
    grep -q 'set ylabel "throughput (tokens/s)"' "$s" && grep -q "logscale x 2" "$s" && ! grep -q "ours/peer" "$s"
ok $? "scaling study: measured lines against the ideal line over the GPU count"
s=$(script scaling-2026-11-28-efficiency)
grep -q '"ideal (100%)"' "$s" && grep -q "with linespoints" "$s" && grep -q 'efficiency (% of ideal)' "$s"
ok $? "scaling study: efficiency against 100%"

# bars per case: one panel per model, the ratio to the first case of the model
s=$(script variants-2026-11-28-throughput)
grep -q "with boxes" "$s" && grep -q "set multiplot layout 1,2" "$s" && grep -q '"0.95x"' "$s" &&
    grep -q 'set ylabel "throughput per GPU (tokens/s)"' "$s" && ! grep -qi "ideal\|yerrorlines" "$s"
ok $? "variants at a fixed size: bars per case, a panel per model, the ratio to the first case (0.95x), no ideal line"

# time series: one curve per case over the iterations, the warm-up marked
s=$(script curves-2026-11-28-loss)
[ "$(grep -c "with linespoints" "$s")" -eq 2 ] && grep -q 'title "first"' "$s" && grep -q 'title "second"' "$s" &&
    grep -q 'set xlabel "iteration"' "$s" && grep -q 'warm-up (first 4)' "$s" && ! grep -q "with boxes" "$s"
ok $? "time series: the loss per iteration, one curve per case, the warm-up marked"

# every plot: study, machine and date in the title, a key
status=0
for s in "$WORK"/scripts/*.gp; do
    grep -q "^set title .*study [a-z]* | NVIDIA H200 | 2026-11-28" "$s" || grep -q "^set multiplot .*title .*study [a-z]* | NVIDIA H200 | 2026-11-28" "$s" ||
        { status=1; diag "$s: no study | machine | date title"; }
    grep -q "noenhanced" "$s" || { status=1; diag "$s: enhanced text (an underscore in a name becomes a subscript)"; }
    grep -q " title \"" "$s" || { status=1; diag "$s: nothing in the key"; }
done
ok $status "every plot is titled with the study, the machine and the date, and has a key"

# replot --plot overrides the record's kind
GNUPLOT="$WORK/gnuplot" $HARNESS replot --plot bars "$WORK/rec/scaling-2026-11-28.json" > "$WORK/out" 2>&1 &&
    grep -q "wrote $WORK/rec/scaling-2026-11-28-throughput.png (bars)" "$WORK/out" && [ ! -e "$WORK/rec/scaling-2026-11-28-efficiency.png" ]
ok $? "replot --plot bars redraws a scaling record as bars"

done_testing
