#!/bin/sh
# harness_test.sh: the scaling-study driver perf/harness on the CPU backend: runs the small
# strong- and weak-scaling studies (tiny GPT, 1, 2 and 4 ranks) and checks the report (one table
# row per case with numbers, the JSON record with date/commit/commands, PNG plots, 100%
# efficiency for the 1-rank case, each case's start-up), that a malformed study is refused naming file:line, that
# `render` writes one sbatch script per case through jobs/mkjob with the case's layout flags,
# that `collect` and `report` rebuild the report, and that the GPT-3 presets load in pretrain_gpt.
# The BERT and T5 rows: perf/studies/bert-cpu.study and t5-cpu.study (program = pretrain_bert /
# pretrain_t5 over the harness's synthetic WordPiece corpus, 1 and 2 ranks) give a row per case
# whose TFLOP/s and MFU are BERT's and T5's FLOP counts (by hand below), whose parameters are the
# program's own count, a T5 row its encoder+decoder layers and lengths; the vocabulary is
# Megatron-Core's BertTokenizer's (the corpus's tokens; + 100 extra ids for BertWordPieceCase, a
# cased BERT study's too); a BERT study with peer = torch_bert hands the peer its shape; BERT/T5
# settings in the wrong study are refused.
. "${top_srcdir:-.}/tests/lib.sh"

HARNESS="python3 $top_srcdir/perf/harness"
export MPIEXEC PRETRAIN_GPT
command -v gnuplot >/dev/null 2>&1 || diag "no gnuplot: the PNG checks fail (apt-get install gnuplot-nox)"

is_png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }

# check_report STUDY KIND: the .md/.json/.png of a finished run in $WORK/results
check_report() {
    study=$1
    md=$(ls "$WORK"/results/"$study"-*.md 2>/dev/null | head -1)
    json=${md%.md}.json
    # the main table: rows after the header whose ms/iteration column (10th for weak, 8th otherwise) is a number
    rows=$(awk -F'|' -v col="$([ "$2" = weak ] && echo 11 || echo 9)" '
        /^\| case \|/ { in_table = 1; next } in_table && /^\| ---/ { next }
        in_table && /^\|/ { if ($col ~ /^ *[0-9][0-9,.]* *$/ && $4 ~ /[0-9]/) n++; next }
        in_table { exit } END { print n + 0 }' "$md")
    [ "$rows" -eq 3 ]
    ok $? "$study: the table has one row with numbers per case ($rows of 3)"
    python3 - "$json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["date"] and r["commit"] and r["machine"]["hostname"] and r["machine"]["cores"] and r["study_text"]
assert len(r["cases"]) == 3 and all(c["status"] == "ok" and "-n" in c["command"] and "--metrics-file" in c["command_line"]
                                    for c in r["cases"])
assert all(c["stats"]["tokens_per_second"]["median"] > 0 and c["stats"]["elapsed_ms_per_iteration"]["iqr"] >= 0
           for c in r["cases"])
EOF
    ok $? "$study: the JSON record parses and carries date, commit, machine, the study and each case's command and statistics"
    for plot in throughput efficiency mfu; do
        is_png "${md%.md}-$plot.png"
        ok $? "$study: $(basename "${md%.md}")-$plot.png is a PNG file"
    done
}

# --- strong scaling: the same model and batch on 1, 2 and 4 ranks ---
$HARNESS run "$top_srcdir/perf/studies/strong-cpu.study" --out "$WORK/results" --logs "$WORK/strong" \
    > "$WORK/strong.out" 2>&1
status=$?
ok $status "perf/harness run strong-cpu.study (exit $status)"
[ $status -eq 0 ] || tail -20 "$WORK/strong.out" | sed 's/^/# /'
check_report strong-cpu strong
python3 - "$WORK"/results/strong-cpu-*.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
one = [c for c in r["cases"] if c["ranks"] == 1][0]
print(f"# efficiencies: {[round(c['efficiency'], 3) for c in r['cases']]}")
sys.exit(0 if abs(one["efficiency"] - 1.0) < 1e-12 else 1)
EOF
ok $? "strong scaling: the 1-rank case has 100% efficiency in the JSON"
python3 - "$WORK"/results/strong-cpu-*.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["plot"] == "scaling", r["plot"]
for c in r["cases"]:
    s = c["series"]
    assert s["iteration"] == list(range(1, 31)) and len(s["lm_loss"]) == 30 and len(s["tokens_per_second"]) == 30, s
EOF
ok $? "the record keeps its plot kind (scaling) and each case's per-iteration loss and tokens/s"
python3 - "$WORK"/results/strong-cpu-*.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cases"]:
    s = c["extra"]["startup"]
    assert 0 < s["time_to_initialize_s"] <= s["time_to_training_start_s"] <= s["time_to_first_iteration_s"] < 120, s
EOF
ok $? "each case's start-up (process start to the first step) is in the JSON, its stages in order"
[ "$(grep -c '^| [124]r-tp1-pp1-dp[124] | [124] | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* |$' "$WORK"/results/strong-cpu-*.md)" -eq 3 ] &&
    grep -q "^## Start-up$" "$WORK"/results/strong-cpu-*.md
ok $? "the report has a start-up table, one row per case"
grep -q "^| 1r-tp1-pp1-dp1 | 1 | .* | 100.0% |$" "$WORK"/results/strong-cpu-*.md
ok $? "strong scaling: the 1-rank row shows 100.0% efficiency"

# --- weak scaling: the model grows with the ranks (PP 2, then TP 2 x PP 2) ---
$HARNESS run "$top_srcdir/perf/studies/weak-cpu.study" --out "$WORK/results" --logs "$WORK/weak" > "$WORK/weak.out" 2>&1
status=$?
ok $status "perf/harness run weak-cpu.study (exit $status)"
[ $status -eq 0 ] || tail -20 "$WORK/weak.out" | sed 's/^/# /'
check_report weak-cpu weak
grep -q "^| 4r-tp2-pp2-dp1-l4-h96 | .* | 4 | 96 | 4 | 2 | 2 | 4 | 16 | [0-9.,]* | [0-9.]* | \([0-9.]*%\) | \1 |" "$WORK"/results/weak-cpu-*.md ||
    { grep "^| 4r" "$WORK"/results/weak-cpu-*.md | sed 's/^/# /'; false; }
ok $? "weak scaling: the Megatron-style row (heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s, MFU, HFU = MFU without recomputation)"

# --- a malformed study is refused with file:line ---
printf 'kind = strong\nbase = gpt-tiny\ncase ranks=1\ncase ranks=3 tp=2\n' > "$WORK/bad-layout.study"
$HARNESS run "$WORK/bad-layout.study" --out "$WORK/bad" > "$WORK/bad.out" 2>&1
status=$?
[ $status -eq 2 ] && grep -q "^harness: error: $WORK/bad-layout.study:4: ranks 3 is not divisible by TP x PP" "$WORK/bad.out"
ok $? "a case whose ranks do not fit TP x PP is refused naming file:line ($(cat "$WORK/bad.out"))"
printf 'kind = strong\nbase = gpt-tiny\n\ncase ranks=1 micro=four\n' > "$WORK/bad-value.study"
$HARNESS run "$WORK/bad-value.study" > "$WORK/bad.out" 2>&1
[ $? -eq 2 ] && grep -q "bad-value.study:4: micro must be a positive integer" "$WORK/bad.out"
ok $? "a non-numeric case value is refused naming file:line ($(cat "$WORK/bad.out"))"
printf 'kind = strong\nbase = gpt-tiny\nwarmpu = 3\ncase ranks=1\n' > "$WORK/bad-key.study"
$HARNESS run "$WORK/bad-key.study" > "$WORK/bad.out" 2>&1
[ $? -eq 2 ] && grep -q "bad-key.study:3: unknown setting 'warmpu'" "$WORK/bad.out"
ok $? "a misspelt setting is refused naming file:line ($(cat "$WORK/bad.out"))"
[ ! -d "$WORK/bad" ]
ok $? "nothing is run or written for a malformed study"

# --- render: one sbatch per case through jobs/mkjob, with the case's layout ---
$HARNESS render "$top_srcdir/perf/studies/weak-cpu.study" --cpu-only --ntasks-per-node 4 --out "$WORK/render" \
    --mkjob-args "--partition debug --time 00:10:00" > "$WORK/render.out" 2>&1
status=$?
ok $status "perf/harness render weak-cpu.study (exit $status)"
[ "$(ls "$WORK"/render/*.sbatch 2>/dev/null | wc -l)" -eq 3 ] && [ "$(grep -c '^sbatch ' "$WORK/render.out")" -eq 3 ]
ok $? "render writes one sbatch script per case and prints the sbatch commands"
s="$WORK/render/4r-tp2-pp2-dp1-l4-h96.sbatch"
grep -q "Rendered by jobs/mkjob" "$s" && grep -q -- "^    --tensor-model-parallel-size 2$" "$s" &&
    grep -q -- "^    --pipeline-model-parallel-size 2$" "$s" && grep -q -- "--hidden-size 96" "$s" &&
    grep -q -- "--metrics-file $WORK/render/metrics/4r-tp2-pp2-dp1-l4-h96.jsonl" "$s" &&
    grep -q "^#SBATCH --partition=debug" "$s" && grep -q "^#SBATCH --ntasks-per-node=4" "$s" && bash -n "$s"
ok $? "the TP2 x PP2 case's script comes from mkjob with its layout, model, metrics file and Slurm options"
! grep -q -- "--tensor-model-parallel-size\|--pipeline-model-parallel-size" "$WORK/render/1r-tp1-pp1-dp1-l2-h64.sbatch"
ok $? "the 1-rank case's script has no TP/PP flags"
$HARNESS render "$top_srcdir/perf/studies/weak-gpt3.study" --gpus-per-node 8 --nodes 16 --out "$WORK/render-gpt3" \
    > "$WORK/render-gpt3.out" 2>&1
[ $? -eq 0 ] && [ "$(ls "$WORK"/render-gpt3/*.sbatch | wc -l)" -eq 3 ] &&
    grep -q "^#SBATCH --nodes=16" "$WORK/render-gpt3/gpt3-7.5b.sbatch" &&
    grep -q -- "^    --tensor-model-parallel-size 4$" "$WORK/render-gpt3/gpt3-7.5b.sbatch"
ok $? "weak-gpt3 renders the cases that fit in 16 nodes of 8 GPUs (7.5B: 16 nodes, TP 4)"

# --- collect reads the metrics files where the jobs write them; report re-renders ---
for case in 1r-tp1-pp1-dp1-l2-h64 2r-tp1-pp2-dp1-l4-h64 4r-tp2-pp2-dp1-l4-h96; do
    cp "$WORK/weak/$case.jsonl" "$WORK/render/metrics/$case.jsonl"
done
$HARNESS collect "$top_srcdir/perf/studies/weak-cpu.study" "$WORK/render" > "$WORK/collect.out" 2>&1 &&
    grep -q "^| 4r-tp2-pp2-dp1-l4-h96 | .* | \([0-9.]*%\) | \1 |" "$WORK"/render/weak-cpu-*.md &&
    grep -q "sbatch .*4r-tp2-pp2-dp1-l4-h96.sbatch" "$WORK"/render/weak-cpu-*.md
ok $? "collect builds the report from the jobs' metrics files, with the sbatch commands"
# metrics with HFU and a PAPI object (the FLOP-accounting module's keys), and a requeued job that
# appended a second run to its file: the report takes the last run and fills the HFU column
mkdir -p "$WORK/hfu/metrics"
python3 - "$WORK/hfu/metrics" <<'EOF'
import json, sys
for name, ranks in (("1r-tp1-pp1-dp1", 1), ("2r-tp1-pp1-dp2", 2), ("4r-tp1-pp1-dp4", 4)):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for run in (0, 1):
            for i in range(1, 31):
                f.write(json.dumps({"split": "train", "iteration": i, "elapsed_ms_per_iteration": 100.0 / ranks,
                                    "tokens_per_second": (500.0 if run == 0 else 1000.0) * ranks, "tflops_per_gpu": 300.0,
                                    "mfu": 0.42, "hfu": 0.55, "model_tflops_per_gpu": 300.0,
                                    "hardware_tflops_per_gpu": 390.0, "papi": {"PAPI_TOT_INS": 1}}) + "\n")
EOF
$HARNESS collect "$top_srcdir/perf/studies/strong-cpu.study" "$WORK/hfu" > "$WORK/hfu.out" 2>&1 &&
    [ "$(grep -c '^| [124]r-tp1-pp1-dp[124] | .* | 1,000 | 300.0 | 42.0% | 55.0% | 100.0% |$' "$WORK"/hfu/strong-cpu-*.md)" -eq 3 ]
ok $? "HFU from the metrics fills its column; a requeued job's last run is the one measured"
json=$(ls "$WORK"/results/strong-cpu-*.json)
rm -f "${json%.json}.md" "${json%.json}"-*.png
$HARNESS report "$json" > "$WORK/report.out" 2>&1 && [ -s "${json%.json}.md" ] && is_png "${json%.json}-efficiency.png"
ok $? "report re-renders the .md and plots from the .json"

# --- a peer study: after each 1-rank case the harness runs the peer on the same shape and reports both ---
# The stand-in follows the peer scripts' contract (shape on the command line, one torch-peer line);
# it echoes the shape it was given so the test sees what the harness passed.
mkdir -p "$WORK/peers"
cat > "$WORK/peers/torch_gpt.py" <<'EOF'
import sys
l, h, heads, B, T, V, steps = (int(v) for v in sys.argv[1:8])
print(f"torch-peer layers={l} hidden={h} heads={heads} B={B} T={T} V={V} steps={steps} params=1M "
      f"step_ms=50.0 tok/s={B * T / 0.05:.0f} TFLOP/s=1 MFU=12.5% peak_mem_GiB=0.5")
EOF
cat > "$WORK/peer.study" <<EOF
kind = throughput
base = gpt-tiny
flags = --device cpu --peak-tflops 0.16 --lr-warmup-iters 2
iterations = 12
warmup = 4
peer = torch_gpt
case ranks=1 micro=2 global=2 name=small
case ranks=2 micro=2 global=4 name=two-ranks
EOF
PEER_DIR="$WORK/peers" $HARNESS run "$WORK/peer.study" --out "$WORK/peer" --logs "$WORK/peer-logs" > "$WORK/peer.out" 2>&1
ok $? "perf/harness run with peer = torch_gpt"
python3 - "$WORK"/peer/peer-*.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
small, two = r["cases"]
p = small["peer"]
assert r["peer"] == "torch_gpt" and "two-ranks" == two["name"] and "peer" not in two, "the peer runs on 1-rank cases only"
assert p["status"] == "ok" and p["command"][-7:] == ["2", "64", "4", "2", "64", "256", "12"], p["command"]
assert "layers=2 hidden=64 heads=4 B=2 T=64 V=256 steps=12" in p["line"], p["line"]
assert p["tokens_per_second"] == 2560 and abs(p["mfu"] - 0.125) < 1e-12 and p["peak_memory_gib"] == 0.5
# ours: at least fp32 weights, gradients and the two Adam moments (16 bytes per parameter)
assert small["stats"]["peak_memory_gib"]["median"] >= 16 * small["parameters"] / 2**30, small["stats"]["peak_memory_gib"]
EOF
ok $? "the peer got the case's shape (layers hidden heads micro seq padded-vocab steps) and its figures are in the JSON; our peak memory holds weights, gradients and Adam moments"
ratio=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%.2f" % (r["cases"][0]["stats"]["tokens_per_second"]["median"] / 2560))' "$WORK"/peer/peer-*.json)
grep -q "^| small | 2x64x4 | 2x64 | .* | 2,560 | 12.5% | 0.50 | $ratio |$" "$WORK"/peer/peer-*.md
ok $? "the report's peer table shows ours / peer tokens/s ($ratio)"
stem=$(ls "$WORK"/peer/peer-*.json); stem=${stem%.json}
is_png "$stem-throughput.png" && is_png "$stem-mfu.png" && is_png "$stem-memory.png" && [ ! -e "$stem-efficiency.png" ] &&
    grep -q '"plot": "peer"' "$stem.json" && grep -q "^!\\[$(basename "$stem")-memory.png\\]" "$stem.md"
ok $? "a peer study is drawn as peer bars (tokens/s, MFU, memory; no efficiency plot)"
peer_count=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%.1f%%" % (r["cases"][0]["stats"]["tokens_per_second"]["median"] * 12.5 / 2560))' "$WORK"/peer/peer-*.json)
grep -q "^| small | 2x64x4 | 2x64 | [^|]* | [^|]* | [^|]* | $peer_count | " "$WORK"/peer/peer-*.md
ok $? "the peer table gives our MFU in the peer's count ($peer_count: our tokens/s at its FLOPs per token)"
printf 'kind = throughput\nbase = gpt-tiny\niterations = 11\npeer = torch_gpt\ncase ranks=1\n' > "$WORK/bad-peer.study"
$HARNESS run "$WORK/bad-peer.study" --out "$WORK/bad" > "$WORK/bad-peer.out" 2>&1
[ $? -eq 2 ] && grep -q "bad-peer.study:1: with a peer, iterations must exceed 11" "$WORK/bad-peer.out"
ok $? "a peer study too short for the peer's 10 warm-up steps is refused"

# --- the BERT and T5 rows: their programs over a synthetic corpus, their own FLOP counts ---
# check_encoder_row STUDY CASE RANKS FLOPS_PER_TOKEN: the record's case ran, its model FLOPs per
# (encoder) token (median TFLOP/s x ranks / median tokens/s) are FLOPS_PER_TOKEN, its MFU is those
# TFLOP/s over --peak-tflops 0.16, and its parameters are what the program printed
check_encoder_row() {
    python3 - "$WORK"/results/"$1"-*.json "$2" "$3" "$4" "$WORK/$1/$2.out" <<'PY'
import json, re, sys
record, name, ranks, per_token, out = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
c = [c for c in record["cases"] if c["name"] == name][0]
st = c["stats"]
got = st["model_tflops_per_gpu"]["median"] * 1e12 * ranks / st["tokens_per_second"]["median"]
printed = int(re.search(r"> number of parameters: ([0-9]+)", open(out).read()).group(1))
print(f"# {name}: {got:.1f} FLOPs per token (by hand {per_token:.0f}), MFU {st['mfu']['median']}, "
      f"parameters {c['parameters']} (printed {printed})")
assert c["status"] == "ok" and c["ranks"] == ranks and abs(got / per_token - 1) < 1e-5
assert abs(st["mfu"]["median"] - st["tflops_per_gpu"]["median"] / 0.16) < 1e-5
assert c["parameters"] == printed and c["program"] == record["program"]
PY
}
# BERT, l 2, h 64 (q = kv = 64), ffn 256, s 64, padded V 512 (the corpus's 512 tokens, to 64: the
# lower-case BertTokenizer of Megatron-Core has no [BOS]/[EOS], which made it 514 -> 576 before).
# Per token forward: layer 8 h^2 = 32768 + 4 q s = 16384 (bidirectional) + 16 h^2 = 65536 =
# 114688, x 2 = 229376; LM head 2 h^2 = 8192 and logits 2 h V = 65536: 303104; per sample the
# pooler 2 h^2 + the binary head 4 h = 8448, 132 per token; x 3: 909708 per token.
$HARNESS run "$top_srcdir/perf/studies/bert-cpu.study" --out "$WORK/results" --logs "$WORK/bert-cpu" \
    > "$WORK/bert-cpu.out" 2>&1
status=$?
ok $status "perf/harness run bert-cpu.study: pretrain_bert over the harness's corpus (exit $status)"
[ $status -eq 0 ] || tail -20 "$WORK/bert-cpu.out" | sed 's/^/# /'
for case in "bert-1r 1" "bert-2r 2"; do
    set -- $case
    check_encoder_row bert-cpu "$1" "$2" 909708
    ok $? "BERT row $1: BERT's FLOPs (909708 per token by hand), MFU over the peak, the program's parameter count"
done
grep -q "^| bert-2r | 146K | 2 | 1 | 1 | 2 | 4 | 8 | 64 | [0-9.,]* | [0-9.,]* | [0-9.]* | [0-9.]*% | [0-9.]*% |" \
    "$WORK"/results/bert-cpu-*.md && grep -q "^- program: pretrain_bert (TFLOP/s, MFU and HFU count BERT's FLOPs" \
    "$WORK"/results/bert-cpu-*.md && grep -q "^- corpus: synthetic, 200 documents over a WordPiece vocabulary of 512" \
    "$WORK"/results/bert-cpu-*.md
ok $? "the BERT report: a Megatron-style row per case, the program and the corpus named"
# a cased BERT study (--tokenizer-type BertWordPieceCase): the vocabulary is the corpus's 512 + the
# 100 <extra_id_i> of Megatron-Core's BertTokenizer, padded V 640 (was 514 -> 576). Per token
# forward 229376 + 8192 + logits 2 h V = 81920: 319488, + 132: x 3 = 958860 per token.
printf '%s\n' "kind = throughput" "program = pretrain_bert" "base = bert-large" "corpus = wordpiece 512 60" \
    "flags = --device cpu --peak-tflops 0.16 --make-vocab-size-divisible-by 64 --tokenizer-type BertWordPieceCase" \
    "iterations = 8" "warmup = 4" "case name=cased-1r ranks=1 layers=2 hidden=64 heads=4 seq=64 micro=2 global=2" \
    > "$WORK/bert-cased.study"
$HARNESS run "$WORK/bert-cased.study" --out "$WORK/results" --logs "$WORK/bert-cased" > "$WORK/bert-cased.out" 2>&1
status=$?
[ $status -eq 0 ] || tail -5 "$WORK/bert-cased.out" | sed 's/^/# /'
check_encoder_row bert-cased cased-1r 1 958860 &&
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["cases"][0]; assert (c["vocab"], c["padded_vocab"]) == (612, 640), c' \
        "$WORK"/results/bert-cased-*.json &&
    grep -q '^ > padded vocab (size: 612) with 28 dummy tokens (new size: 640)$' "$WORK/bert-cased/cased-1r.out"
ok $? "a cased BERT study: vocabulary 512 + 100 extra ids = 612, padded 640 as pretrain_bert's; 958860 FLOPs per token"
# T5, encoder 2 layers over Te 64, decoder 2 over Td 16, h 64, ffn 256, padded V 640 (512 + the
# 100 sentinels, to 64). Encoder per sample 64 x (32768 + 4 q Te = 16384 + 65536) = 7340032;
# decoder per sample 16 x (32768 + causal 2 q Td = 2048 + 65536 + cross query/output 4 h q = 16384
# + cross core 4 q Te = 16384) + the cross keys/values of the encoder's 64 tokens 64 x 4 h kv =
# 1048576: 3178496; logits 16 x 2 h V = 1310720. 3 x (2 x 7340032 + 2 x 3178496 + 1310720) / 64
# encoder tokens = 1047552 per token.
$HARNESS run "$top_srcdir/perf/studies/t5-cpu.study" --out "$WORK/results" --logs "$WORK/t5-cpu" \
    > "$WORK/t5-cpu.out" 2>&1
status=$?
ok $status "perf/harness run t5-cpu.study: pretrain_t5 over the harness's corpus (exit $status)"
[ $status -eq 0 ] || tail -20 "$WORK/t5-cpu.out" | sed 's/^/# /'
for case in "t5-1r 1" "t5-2r 2"; do
    set -- $case
    check_encoder_row t5-cpu "$1" "$2" 1047552
    ok $? "T5 row $1: T5's FLOPs (1047552 per encoder token by hand), MFU over the peak, the program's parameter count"
done
grep -q "^| t5-1r | 279K | 1 | 1 | 1 | 1 | 4 | 8 | 64/16 | [0-9.,]* |" "$WORK"/results/t5-cpu-*.md &&
    grep -q -- "--encoder-num-layers 2 .*--decoder-num-layers 2 --decoder-seq-length 16 --max-position-embeddings 64" \
        "$WORK"/results/t5-cpu-*.md
ok $? "the T5 report: encoder/decoder sequence in the row; the command carries the decoder's layers and length"
# a BERT study with the peer: the stand-in torch_bert echoes the shape it was given
cat > "$WORK/peers/torch_bert.py" <<'PY'
import sys
l, h, heads, B, T, V, steps = (int(v) for v in sys.argv[1:8])
print(f"torch-peer bert layers={l} hidden={h} heads={heads} B={B} T={T} V={V} steps={steps} params=1M "
      f"step_ms=50.0 tok/s={B * T / 0.05:.0f} TFLOP/s=1 MFU=12.5% peak_mem_GiB=0.5")
PY
printf '%s\n' "kind = throughput" "program = pretrain_bert" "base = bert-large" "corpus = wordpiece 512 60" \
    "flags = --device cpu --peak-tflops 0.16 --make-vocab-size-divisible-by 64" "iterations = 12" "warmup = 4" \
    "peer = torch_bert" "case name=bert-peer ranks=1 layers=2 hidden=64 heads=4 seq=64 micro=2 global=2" \
    > "$WORK/bert-peer.study"
PEER_DIR="$WORK/peers" $HARNESS run "$WORK/bert-peer.study" --out "$WORK/bert-peer" --logs "$WORK/bert-peer-logs" \
    > "$WORK/bert-peer.out" 2>&1 &&
python3 - "$WORK"/bert-peer/bert-peer-*.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["cases"][0]["peer"]
assert p["status"] == "ok" and p["command"][-7:] == ["2", "64", "4", "2", "64", "512", "12"], p
PY
ok $? "peer = torch_bert runs after the 1-rank BERT case on its shape (layers hidden heads micro seq padded-vocab steps)"
grep -q "ours the same plus the LM head's dense layer" "$WORK"/bert-peer/bert-peer-*.md
ok $? "the BERT peer table says how the two FLOP counts differ"
# BERT/T5 settings where they do not belong
refused() {  # refused DESCRIPTION PATTERN LINE...: a study of these lines is refused with PATTERN
    what=$1 pattern=$2
    shift 2
    printf '%s\n' "$@" > "$WORK/refused.study"
    $HARNESS show "$WORK/refused.study" > "$WORK/refused.out" 2>&1
    [ $? -eq 2 ] && grep -q "$pattern" "$WORK/refused.out"
    ok $? "refused: $what ($(cat "$WORK/refused.out"))"
}
refused "pretrain_bert without a corpus" "refused.study:1: pretrain_bert reads a sentence-split WordPiece corpus" \
    "kind = throughput" "program = pretrain_bert" "base = bert-large" "case ranks=1"
refused "a corpus for pretrain_gpt" "refused.study:3: corpus = ... is for program = pretrain_bert or pretrain_t5" \
    "kind = throughput" "base = gpt-tiny" "corpus = wordpiece 512" "case ranks=1"
refused "a malformed corpus" "refused.study:3: corpus must be 'wordpiece VOCAB \[DOCUMENTS\]'" \
    "kind = throughput" "program = pretrain_t5" "corpus = sentencepiece 512" "base = t5-220m" "case ranks=1"
refused "decoder keys outside T5" "refused.study:4: decoder_seq is for program = pretrain_t5" \
    "kind = throughput" "program = pretrain_bert" "corpus = wordpiece 512" "case ranks=1 decoder_seq=8" "base = bert-large"
refused "an unknown program" "refused.study:1: program must be one of pretrain_gpt, pretrain_bert, pretrain_t5" \
    "program = pretrain_llama"
refused "the BERT peer on a GPT study" "peer torch_bert does not train what pretrain_gpt trains" \
    "kind = throughput" "base = gpt-tiny" "iterations = 12" "peer = torch_bert" "case ranks=1"

# --- the presets of Megatron's table 1 load: every flag is known and the values pass the checks ---
# (a batch that cannot divide is the last check pretrain_gpt makes: reaching it proves the rest)
status=0
for preset in "$top_srcdir"/configs/gpt3-*.args "$top_srcdir"/configs/gpt-1.3b.args; do
    "$PRETRAIN_GPT" --args-file "$preset" --micro-batch-size 3 --global-batch-size 4 > "$WORK/preset.out" 2>&1
    grep -q "error: --global-batch-size 4 is not a multiple of --micro-batch-size 3" "$WORK/preset.out" ||
        { status=1; diag "$(basename "$preset"): $(tail -1 "$WORK/preset.out")"; }
done
ok $status "the gpt3-*.args and gpt-1.3b presets parse and validate in pretrain_gpt"

done_testing
