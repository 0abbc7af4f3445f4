#!/bin/sh
# mixtral_hf_parity.sh: issue 42's Hugging Face logits parity for the mixture of experts, our
# side. DIR holds what perf/mixtral_hf_parity.py (or perf/qwen2_moe_hf_parity.py) wrote on a
# machine with transformers: a random MixtralForCausalLM (or Qwen2MoeForCausalLM) saved by
# transformers (bfloat16, sharded), the prompts' tokens and transformers' float32 logits. This script imports the model (convert_checkpoint --from-hf),
# computes our logits on each prompt (tests/tools/model_logits --tokens, CPU backend, fp32, the
# model flags taken from the checkpoint with --use-checkpoint-args), and compares: max |d logit|,
# relative to the largest logit, max |d log-prob|, next-token argmax agreement; PASS within 1e-4
# (the issue's float32 tolerance). Plain Python, no numpy.
#
#   python3 perf/mixtral_hf_parity.py DIR     (where transformers is installed; or
#   python3 perf/qwen2_moe_hf_parity.py DIR    for Qwen2-MoE)
#   perf/mixtral_hf_parity.sh DIR             (from the built tree)
#
# Environment: BIN (the build tree holding app/ and tests/tools/; default the tree this script is
# in), PROMPTS (default 3, as many as the .py wrote).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top}
dir=${1:?usage: perf/mixtral_hf_parity.sh DIR}
prompts=${PROMPTS:-3}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-4}
echo "# mixtral_hf_parity, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}, $dir"
rm -rf "$dir/ours"
"$bin/app/convert_checkpoint" --from-hf --input "$dir/hf" --save "$dir/ours" --make-vocab-size-divisible-by 128 |
    sed 's/^/# /'
python3 - "$dir" "$prompts" <<'EOF'
import sys
from array import array
folder, prompts = sys.argv[1], int(sys.argv[2])
tokens = array("i")
tokens.frombytes(open(folder + "/tokens.i32", "rb").read())
T = len(tokens) // prompts
for p in range(prompts):
    array("i", tokens[p * T:(p + 1) * T]).tofile(open("%s/tokens.%d.i32" % (folder, p), "wb"))
EOF
T=$(( $(wc -c < "$dir/tokens.i32") / 4 / prompts ))
# the routing flag --use-checkpoint-args leaves to the command line (as Megatron's
# load_args_from_checkpoint): Qwen2-MoE's norm_topk_prob false imports as --moe-router-pre-softmax
routing=""
[ "$(h5dump -a /args/moe_router_pre_softmax "$dir/ours/release.h5" 2>/dev/null | sed -n 's/^ *(0): *//p')" = 1 ] &&
    routing="--moe-router-pre-softmax"
p=0
while [ "$p" -lt "$prompts" ]; do
    mpiexec -n 1 "$bin/tests/tools/model_logits" "$dir/ours.$p" --tokens "$dir/tokens.$p.i32" --use-checkpoint-args \
        $routing --load "$dir/ours" --finetune --mock-data --seq-length "$T" --micro-batch-size 1 --global-batch-size 1 \
        --train-iters 1 --lr 0 --min-lr 0 --hidden-dropout 0 --attention-dropout 0 > "$dir/logits.$p.out" 2>&1
    sed 's/^/# prompt '"$p"': /' "$dir/logits.$p.out" | grep model_logits
    p=$((p + 1))
done
python3 - "$dir" "$prompts" <<'EOF'
import json, math, sys
from array import array
folder, prompts = sys.argv[1], int(sys.argv[2])
config = json.load(open(folder + "/hf/config.json"))
V = config["vocab_size"]
architecture = (config.get("architectures") or ["MixtralForCausalLM"])[0]
theirs = array("f")
theirs.frombytes(open(folder + "/logits.f32", "rb").read())
T = len(theirs) // V // prompts

def log_softmax(row):
    top = max(row)
    total = top + math.log(sum(math.exp(x - top) for x in row))
    return [x - total for x in row]

d_logit = d_logprob = largest = 0.0
agree = 0
for p in range(prompts):
    ours = array("f")
    ours.frombytes(open("%s/ours.%d.logits" % (folder, p), "rb").read())
    padded = len(ours) // T
    for t in range(T):
        a = theirs[(p * T + t) * V:(p * T + t + 1) * V].tolist()
        b = ours[t * padded:t * padded + V].tolist()
        d_logit = max(d_logit, max(abs(x - y) for x, y in zip(a, b)))
        d_logprob = max(d_logprob, max(abs(x - y) for x, y in zip(log_softmax(a), log_softmax(b))))
        largest = max(largest, max(abs(x) for x in a))
        agree += a.index(max(a)) == b.index(max(b))
ok = d_logprob <= 1e-4 and d_logit / largest <= 1e-4
print("%s transformers %s float32 vs ours (fp32 CPU, imported from transformers' bfloat16 save), "
      "%d prompts x %d tokens: max|d logit| %.3e, relative %.3e (limit 1e-4), max|d log-prob| %.3e (limit 1e-4); "
      "next-token argmax agrees on %d of %d" % ("PASS" if ok else "FAIL", architecture, prompts, T, d_logit, d_logit / largest,
                                               d_logprob, agree, prompts * T))
sys.exit(0 if ok else 1)
EOF
