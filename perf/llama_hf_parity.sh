#!/bin/sh
# llama_hf_parity.sh: issue 17's Hugging Face logits parity for the Llama family. Trains a small
# but complete Llama on the CPU backend (RoPE base 500000 with Llama 3 rope scaling, RMSNorm with
# --apply-layernorm-1p, SwiGLU, 8 query heads in 2 groups, no biases, untied output layer),
# exports it with convert_checkpoint --to-hf (LlamaForCausalLM, float32), computes our logits
# on PROMPTS mock-token prompts (tests/tools/model_logits, fp32), and compares them with
# transformers' LlamaForCausalLM in float32 on the CPU and bfloat16 on the GPU; on a machine with a
# GPU also our bf16 CUDA forward against transformers in float32
# (perf/llama_hf_parity.py: max |d logit|, max |d log-prob|, PASS/FAIL with stated tolerances).
#
#   perf/llama_hf_parity.sh            (from the built tree; LOGDIR keeps the files)
#
# Environment: BIN (the build tree holding app/ and tests/tools/; default the tree this script is
# in), PYTHON (python3), LOGDIR (default a temporary folder), TRAIN_ITERS (default 40), PROMPTS
# (default 3), TIED=1 for a tied output layer (Llama 3.2's). Without torch and transformers the
# steps before the comparison run and the script ends with "SKIP" (exit 0).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/llama-hf-parity.XXXXXX)}
prompts=${PROMPTS:-3}
mkdir -p "$logdir"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-4}
echo "# llama_hf_parity, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}, files in $logdir"
tied=--untie-embeddings-and-output-weights
[ "${TIED:-0}" = 1 ] && tied=
MODEL="--num-layers 4 --hidden-size 256 --ffn-hidden-size 704 --num-attention-heads 8 --group-query-attention
       --num-query-groups 2 --seq-length 128 --max-position-embeddings 256 --position-embedding-type rope
       --rotary-base 500000 --use-rope-scaling --rope-scaling-factor 32 --normalization RMSNorm --norm-epsilon 1e-5
       --apply-layernorm-1p --swiglu --disable-bias-linear $tied --vocab-size 1000 --make-vocab-size-divisible-by 128
       --mock-data --hidden-dropout 0 --attention-dropout 0 --init-method-std 0.02"
rm -rf "$logdir/ck" "$logdir/hf"
mpiexec -n 1 "$bin/app/pretrain_gpt" --device cpu $MODEL --micro-batch-size 4 --global-batch-size 8 \
    --train-iters "${TRAIN_ITERS:-40}" --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 4 --lr-decay-style cosine --seed 1234 \
    --log-interval 10 --eval-iters 0 --save "$logdir/ck" --save-interval "${TRAIN_ITERS:-40}" > "$logdir/train.out" 2>&1
echo "# trained: $(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | head -1) -> $(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | tail -1)"
"$bin/app/convert_checkpoint" --to-hf --load "$logdir/ck" --output "$logdir/hf" > "$logdir/export.out" 2>&1
sed 's/^/# /' "$logdir/export.out"
p=0
while [ "$p" -lt "$prompts" ]; do  # prompt p: the mock tokens of seed 1000 + p
    mpiexec -n 1 "$bin/tests/tools/model_logits" "$logdir/ours.$p" --device cpu $MODEL --micro-batch-size 1 \
        --global-batch-size 1 --train-iters 1 --lr 0 --seed $((1000 + p)) --load "$logdir/ck" --finetune > "$logdir/logits.$p.out" 2>&1
    sed 's/^/# prompt '"$p"': /' "$logdir/logits.$p.out" | grep model_logits
    if nvidia-smi -L > /dev/null 2>&1; then  # our bf16 CUDA forward of the same checkpoint and prompt
        mpiexec -n 1 "$bin/tests/tools/model_logits" "$logdir/ours_cuda.$p" --device cuda $MODEL --micro-batch-size 1 \
            --global-batch-size 1 --train-iters 1 --lr 0 --seed $((1000 + p)) --load "$logdir/ck" --finetune > "$logdir/logits_cuda.$p.out" 2>&1
        sed 's/^/# prompt '"$p"' (cuda): /' "$logdir/logits_cuda.$p.out" | grep model_logits
    fi
    p=$((p + 1))
done
if ! "$python" -c 'import torch, transformers, numpy' 2>/dev/null; then
    echo "SKIP: torch, transformers or numpy is not installed ($python): trained, exported and computed our logits only"
    exit 0
fi
echo "# peer: $("$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
"$python" "$top/perf/llama_hf_parity.py" "$logdir/hf" "$logdir/ours" "$prompts"
