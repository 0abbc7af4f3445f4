#!/bin/sh
# fp8_convergence.sh: issue 43's convergence check. Trains the same GPT twice on the bundled
# corpus (configs/data/tinyshakespeare.txt, GPT-2 BPE), once in bf16 and once in fp8 (--fp8-format
# hybrid, delayed scaling: Transformer Engine's default recipe, amax history 1024, max), from the
# same seed and data order, validating every EVAL_INTERVAL iterations; writes both validation
# curves (CSV and a gnuplot PNG) and a record with the final validation losses, their relative
# difference and PASS when it is within TOLERANCE (default 1%).
#
#   perf/fp8_convergence.sh OUTDIR                    (from the built tree, or with a devpack's
#                                                      executables on PATH)
#
# Environment: DEVICE (cuda; cpu emulates fp8), ITERS (2000), EVAL_INTERVAL (100), MODEL (gpt2-124m:
# 12 x 768, 12 heads, sequence 1024, micro-batch 8; tiny: 2 x 128, sequence 64, for a check on
# the CPU), NP (1 rank), TOLERANCE (0.01), EXTRA (more flags for both runs), BIN (the build tree;
# executables not found there are taken from PATH). Exit status 0 on PASS, 1 on FAIL, 2 on an
# error.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top}
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
. "$top/perf/parity_tools.sh"
pretrain=$(tool pretrain_gpt) preprocess=$(tool preprocess_data)
device=${DEVICE:-cuda} iters=${ITERS:-2000} eval_interval=${EVAL_INTERVAL:-100} np=${NP:-1}
tolerance=${TOLERANCE:-0.01}
case "${MODEL:-gpt2-124m}" in
    gpt2-124m) model="--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
                      --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8" ;;
    tiny) model="--num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length 64
                 --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8" ;;
    *) echo "fp8_convergence: MODEL=${MODEL}: gpt2-124m or tiny" >&2; exit 2 ;;
esac

# the corpus: one JSON document per paragraph of the play text, as autotools/quickstart.sh makes it
if [ ! -f "$out/corpus_text_document.h5" ]; then
    python3 - "$top/configs/data/tinyshakespeare.txt" "$out/corpus.jsonl" <<'PY'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
with open(sys.argv[2], "w") as f:
    for doc in re.split(r"\n\s*\n", text):
        if doc.strip():
            f.write(json.dumps({"text": doc.strip() + "\n"}) + "\n")
PY
    step "$out/preprocess.out" mpiexec -n 1 "$preprocess" --input "$out/corpus.jsonl" --output-prefix "$out/corpus" \
        --tokenizer-type GPT2BPETokenizer --vocab-file "$top/configs/tokenizers/gpt2/vocab.json" \
        --merge-file "$top/configs/tokenizers/gpt2/merges.txt" --append-eod
fi

common="$model --device $device --bf16 --train-iters $iters --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine
        --lr-warmup-iters $((iters / 20)) --weight-decay 0.1 --clip-grad 1.0 --init-method-std 0.02
        --hidden-dropout 0.1 --attention-dropout 0.1 --seed 1234 --log-interval $eval_interval
        --eval-interval $eval_interval --eval-iters 10 --split 949,50,1 --data-path $out/corpus_text_document
        --data-cache-path $out/cache --tokenizer-type GPT2BPETokenizer
        --vocab-file $top/configs/tokenizers/gpt2/vocab.json --merge-file $top/configs/tokenizers/gpt2/merges.txt
        --deterministic-mode ${EXTRA:-}"
fp8="--fp8-format hybrid --fp8-recipe delayed --fp8-amax-history-len 1024 --fp8-amax-compute-algo max"
for run in bf16 fp8; do
    rm -f "$out/$run.jsonl"
    flags=$common
    [ $run = fp8 ] && flags="$common $fp8"
    echo "# $run: mpiexec -n $np pretrain_gpt $(echo $flags | tr -s ' \n' '  ')"
    step "$out/$run.out" mpiexec -n "$np" "$pretrain" $flags --metrics-file "$out/$run.jsonl"
done

# the curves, the final losses, the verdict
python3 - "$out" "$tolerance" <<'PY'
import json, sys
out, tolerance = sys.argv[1], float(sys.argv[2])
curves = {}
for run in ("bf16", "fp8"):
    points = [json.loads(l) for l in open(f"{out}/{run}.jsonl") if l.strip()]
    curves[run] = {r["iteration"]: r["lm_loss"] for r in points if r.get("split") == "validation"}
common = sorted(set(curves["bf16"]) & set(curves["fp8"]))
if not common:
    sys.exit("fp8_convergence: no validation loss in both runs")
with open(f"{out}/curves.csv", "w") as f:
    f.write("iteration,bf16,fp8\n")
    for i in common:
        f.write(f"{i},{curves['bf16'][i]:.6f},{curves['fp8'][i]:.6f}\n")
last = common[-1]
b, e = curves["bf16"][last], curves["fp8"][last]
d = abs(e - b) / b
verdict = "PASS" if d <= tolerance else "FAIL"
print(f"{verdict} final validation lm loss at iteration {last}: bf16 {b:.4f}, fp8 {e:.4f}, "
      f"relative difference {d:.4%} (tolerance {tolerance:.2%}); worst over the curve "
      f"{max(abs(curves['fp8'][i] - curves['bf16'][i]) / curves['bf16'][i] for i in common):.4%}")
open(f"{out}/verdict", "w").write(verdict + "\n")
PY
if command -v gnuplot > /dev/null 2>&1; then
    gnuplot -e "set terminal pngcairo size 900,520; set output '$out/curves.png'; set datafile separator ',';
        set title 'validation lm loss: bf16 and fp8 (hybrid, delayed scaling), ${MODEL:-gpt2-124m}';
        set xlabel 'iteration'; set ylabel 'lm loss'; set key top right; set grid;
        plot '$out/curves.csv' every ::1 using 1:2 with linespoints title 'bf16',
             '' every ::1 using 1:3 with linespoints title 'fp8'" 2> "$out/gnuplot.err" ||
        echo "# gnuplot failed: $(head -1 "$out/gnuplot.err")"
else
    echo "# no gnuplot here: plot $out/curves.csv elsewhere (the same gnuplot command, see this script)"
fi
[ "$(cat "$out/verdict")" = PASS ]
