#!/bin/sh
# tensorboard_test.sh: Megatron's TensorBoard switches write Megatron's tags with the right values.
# Four runs of a tiny GPT on mock data (4 iterations, --log-interval 2, no linear biases: the key
# bias has an analytically zero gradient that rounding makes exactly 0 or not):
#   A: 2 ranks, tensor-parallel 2, every switch, 32 position rows for 16 tokens, a parameter dump;
#   B: the same model on 1 rank; D: on 2 pipeline stages (params norm and num zeros);
#   C: 1 rank, 16 position rows, --tensorboard-log-interval 2, loss scale and learning rate left out.
# params-norm is the norm of the dumped parameters and the same on 1 rank, 2 tensor-parallel ranks
# and 2 stages; num-zeros likewise (each parameter counted once), and exactly 16 x 64 more with the
# 16 position rows no token reaches; lm loss is the iteration's (the log line prints the interval's
# mean); validation ppl = exp(loss); memory matches the metrics file's peak; a switch off leaves its
# scalars out. A switch without --tensorboard-dir is refused.
. "${top_srcdir:-.}/tests/lib.sh"
SCALARS="$top_srcdir/tests/tools/tensorboard_scalars.py"

base="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --vocab-size 64
    --make-vocab-size-divisible-by 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 4 --lr 1e-3
    --hidden-dropout 0 --attention-dropout 0 --disable-bias-linear --mock-data --log-interval 2 --eval-interval 2 --eval-iters 1
    --device cpu"
switches="--log-params-norm --log-num-zeros-in-grad --log-validation-ppl-to-tensorboard --log-memory-to-tensorboard
    --log-world-size-to-tensorboard --log-throughput --log-timers-to-tensorboard --tensorboard-queue-size 10"

# run NAME NRANKS ARGS...: $WORK/NAME.out, $WORK/NAME.tsv (the scalars), $WORK/NAME.jsonl
run() {
    name=$1; n=$2; shift 2
    # shellcheck disable=SC2086
    timeout 300 "$MPIEXEC" -n "$n" "$PRETRAIN_GPT" $base --tensorboard-dir "$WORK/tb-$name" \
        --metrics-file "$WORK/$name.jsonl" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
    status=$?
    [ $status -eq 0 ] && python3 "$SCALARS" "$WORK/tb-$name" > "$WORK/$name.tsv" 2> "$WORK/$name.tsv.err"
    status=$((status + $?))
    ok $status "run $name ($n rank(s)$(echo " $*" | sed 's/ --[a-z-]*-to-tensorboard//g; s/ --dump-parameters [^ ]*//'))"
    [ $status -eq 0 ] || sed 's/^/#   /' "$WORK/$name.err" | head -5
}
# shellcheck disable=SC2086
run A 2 $switches --tensor-model-parallel-size 2 --max-position-embeddings 32 --dump-parameters "$WORK/params"
# shellcheck disable=SC2086
run B 1 $switches --max-position-embeddings 32
run C 1 --log-num-zeros-in-grad --tensorboard-log-interval 2 --no-log-loss-scale-to-tensorboard \
    --no-log-learning-rate-to-tensorboard --log-batch-size-to-tensorboard
run D 2 --log-params-norm --log-num-zeros-in-grad --pipeline-model-parallel-size 2 --max-position-embeddings 32

python3 - "$WORK" > "$WORK/checks" 2>&1 <<'PY'
import math, re, struct, sys
work = sys.argv[1]

def scalars(name):
    out = {}
    for line in open(f"{work}/{name}.tsv"):
        tag, step, value = line.rstrip("\n").split("\t")
        out.setdefault(tag, {})[int(step)] = float(value)
    return out

def logged(name, field):
    """{iteration: value} of a log-line field"""
    out = {}
    for line in open(f"{work}/{name}.out"):
        m = re.search(r"iteration +(\d+)/", line)
        f = re.search(re.escape(field) + r": ([0-9.E+-]+) \|", line)
        if m and f:
            out[int(m.group(1))] = float(f.group(1))
    return out

def check(cond, text):
    print(("ok " if cond else "not ok ") + text)

A, B, C, D = scalars("A"), scalars("B"), scalars("C"), scalars("D")
tags = ["learning-rate", "learning-rate vs samples", "batch-size", "batch-size vs samples", "lm loss",
        "lm loss vs samples", "loss-scale", "loss-scale vs samples", "world-size", "world-size vs samples",
        "grad-norm", "grad-norm vs samples", "num-zeros", "num-zeros vs samples", "params-norm",
        "params-norm vs samples", "mem-reserved-bytes", "mem-allocated-bytes", "mem-max-allocated-bytes",
        "mem-allocated-count", "lm loss validation", "lm loss validation vs samples", "lm loss validation ppl",
        "lm loss validation ppl vs samples", "throughput", "iteration-time"]
missing = [t for t in tags if t not in A]
check(not missing, f"every switch's tags are written (missing: {missing or 'none'})")
check(sorted(A["lm loss"]) == [1, 2, 3, 4] and sorted(A["lm loss vs samples"]) == [4, 8, 12, 16],
      f"--tensorboard-log-interval 1 (default): every iteration, vs samples at 4, 8, 12, 16 ({sorted(A['lm loss'])})")
check(sorted(C["lm loss"]) == [2, 4] and sorted(C["num-zeros"]) == [2, 4],
      f"--tensorboard-log-interval 2: iterations 2 and 4 only ({sorted(C['lm loss'])})")
line = logged("A", "lm loss")
means = {i: (A["lm loss"][i - 1] + A["lm loss"][i]) / 2 for i in (2, 4)}
check(all(abs(means[i] - line[i]) <= 1e-6 * abs(line[i]) + 1e-6 for i in (2, 4)),
      f"lm loss is each iteration's: the log line's interval means {line} are their averages {means}")
check(set(A["world-size"].values()) == {2.0} and "world-size" not in C, "world-size is 2 with the switch, absent without")
check(set(A["loss-scale"].values()) == {1.0} and "loss-scale" not in C and "loss-scale" in B,
      "loss-scale 1 (fp32) by default, absent with --no-log-loss-scale-to-tensorboard")
check("learning-rate" not in C and "batch-size" in C and set(A["batch-size"].values()) == {4.0},
      "learning-rate absent with --no-log-learning-rate-to-tensorboard; batch-size (4) always written")

# params-norm: the dumped parameters (float32, each once, global shapes) after the last step
raw = open(f"{work}/params", "rb").read()
values = struct.unpack(f"<{len(raw) // 4}f", raw)
norm = math.sqrt(math.fsum(v * v for v in values))
tb = A["params-norm"][4]
check(abs(tb - norm) <= 1e-5 * norm, f"params-norm {tb:.6f} at iteration 4 is the dumped parameters' norm {norm:.6f}")
check(all(abs(A["params-norm"][i] - B["params-norm"][i]) <= 1e-5 * B["params-norm"][i] for i in range(1, 5)),
      "params-norm is the same on 2 tensor-parallel ranks as on 1 (each parameter counted once)")
check(all(abs(D["params-norm"][i] - B["params-norm"][i]) <= 1e-5 * B["params-norm"][i] for i in range(1, 5)) and
      D["num-zeros"] == B["num-zeros"],
      "params-norm and num-zeros are the same on 2 pipeline stages as on 1 (the tied embedding counted once)")
pn = logged("A", "params norm")
check(all(abs(pn[i] - A["params-norm"][i]) <= 1e-3 for i in (2, 4)), f"the log line's params norm {pn} is TensorBoard's")

# num-zeros: same on 1 and 2 ranks; 16 unused position rows x 64 more zeros than without them
check(A["num-zeros"] == B["num-zeros"], f"num-zeros is the same on 2 tensor-parallel ranks as on 1 ({B['num-zeros']})")
diff = {i: B["num-zeros"][i] - C["num-zeros"][i] for i in (2, 4)}
check(diff == {2: 1024.0, 4: 1024.0} and min(C["num-zeros"].values()) >= 0,
      f"32 position rows for 16 tokens: exactly 16 x 64 more zero gradients ({diff})")
nz = logged("A", "num zeros")
check(all(nz[i] == A["num-zeros"][i] for i in (2, 4)), f"the log line's num zeros {nz} is TensorBoard's")

ppl = A["lm loss validation ppl"]
check(all(abs(ppl[i] - math.exp(A["lm loss validation"][i])) <= 1e-5 * ppl[i] for i in ppl) and
      "lm loss validation ppl" not in C and "lm loss validation" in C,
      "lm loss validation ppl = exp(lm loss validation) with the switch, absent without")

peak = [float(m.group(1)) for m in re.finditer(r'"peak_memory_gib": ([0-9.]+)', open(f"{work}/B.jsonl").read())][-1]
mem = {t: B[t][4] for t in ("mem-reserved-bytes", "mem-allocated-bytes", "mem-max-allocated-bytes", "mem-allocated-count")}
check(abs(mem["mem-max-allocated-bytes"] / 2**30 - peak) <= 1e-4 and
      0 < mem["mem-allocated-bytes"] == mem["mem-reserved-bytes"] <= mem["mem-max-allocated-bytes"] and
      mem["mem-allocated-count"] >= 10, f"memory: peak {mem['mem-max-allocated-bytes']:.0f} bytes is the metrics "
      f"file's {peak} GiB; allocated = reserved, {mem['mem-allocated-count']:.0f} allocations")
tp = logged("A", "throughput per GPU (TFLOP/s/GPU)")
check(sorted(A["throughput"]) == [2, 4] and all(abs(A["throughput"][i] - tp[i]) <= 1e-3 for i in (2, 4)),
      f"throughput (--log-throughput with --log-timers-to-tensorboard) is the log line's at 2 and 4")
PY
sed 's/^/# /' "$WORK/checks" | grep -v '^# \(not \)\?ok ' 
while IFS= read -r line; do
    case "$line" in
        "ok "*) ok 0 "${line#ok }" ;;
        "not ok "*) ok 1 "${line#not ok }" ;;
    esac
done < "$WORK/checks"
grep -q "^ok \|^not ok " "$WORK/checks"
ok $? "the checks ran"

# a TensorBoard switch without --tensorboard-dir does nothing in Megatron: refused here
# shellcheck disable=SC2086
timeout 60 "$MPIEXEC" -n 1 "$PRETRAIN_GPT" $base --log-memory-to-tensorboard > "$WORK/nodir.out" 2> "$WORK/nodir.err"
[ $? -eq 2 ] && grep -q -- "--log-memory-to-tensorboard writes TensorBoard scalars: it needs --tensorboard-dir DIR" "$WORK/nodir.err"
ok $? "--log-memory-to-tensorboard without --tensorboard-dir: $(grep -m1 error: "$WORK/nodir.err")"
done_testing
