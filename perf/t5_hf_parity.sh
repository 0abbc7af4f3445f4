#!/bin/sh
# t5_hf_parity.sh: issue 46's Hugging Face logits parity for T5, both directions, on the machine
# that has torch and transformers (the GPU machine; a GPU runs transformers in bfloat16 too).
#  1. export: trains a small HF-compatible T5 on the CPU backend (pretrain_t5: relative positions,
#     RMSNorm, --disable-bias-linear, untied, --swiglu = HF gated-silu; GELU=1 for the GeLU MLP,
#     HF "gelu": exact, as Megatron computes it without linear biases), exports it with
#     convert_checkpoint --to-hf, computes our logits on PROMPTS samples
#     (tests/tools/t5_logits, fp32: an encoder with its last quarter padded, a decoder sequence)
#     and compares them with transformers' T5ForConditionalGeneration (perf/t5_hf_parity.py
#     compare; tests/mpi/t5_hf_test.sh makes the same comparison on a tiny T5 against
#     tests/tools/hf_t5_reference.py, HF's forward written out without torch);
#  2. import: transformers makes a random T5ForConditionalGeneration of the same kind
#     (perf/t5_hf_parity.py make, save_pretrained), convert_checkpoint --from-hf imports it, and
#     our logits of it are compared with transformers' the same way.
#
#   perf/t5_hf_parity.sh            (from the built tree; LOGDIR keeps the files)
#
# Environment: BIN (the build tree holding app/ and tests/tools/; default the tree this script is
# in; executables not found there are taken from PATH, as in a devpack), PYTHON (python3), LOGDIR (default a temporary folder), TRAIN_ITERS (default 40), PROMPTS
# (default 3), GELU=1 (the GeLU MLP instead of SwiGLU). Without torch and transformers the steps
# before the comparison run and the script ends with "SKIP" (exit 0).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/t5-hf-parity.XXXXXX)}
prompts=${PROMPTS:-3}
mkdir -p "$logdir"
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-4}
. "$top/perf/parity_tools.sh"
preprocess=$(tool preprocess_data) pretrain=$(tool pretrain_t5) convert=$(tool convert_checkpoint) logits=$(tool t5_logits)
echo "# t5_hf_parity, $(date -Is), commit ${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}, files in $logdir"
mlp=--swiglu
[ "${GELU:-0}" = 1 ] && mlp=
vocab_file="$top/tests/data/wordpiece-vocab.txt"
# a sentence-split WordPiece corpus (tests/mpi/bert_corpus.sh's documents)
awk -v docs=400 'BEGIN {
    n = split("the quick brown fox jumped over the lazy dog jumps unaffable tokenizer dataset " \
              "resume alpha hello world data token cafe naive tokenizing is it a don", w, " ");
    for (d = 0; d < docs; d++) {
        ns = 2 + (d * 7) % 5; line = "{\"text\": \"";
        for (s = 0; s < ns; s++) {
            len = 2 + (d * 13 + s * 5) % 23;
            for (k = 0; k < len; k++) line = line (k ? " " : "") w[1 + (d * 31 + s * 17 + k * 7 + k * k) % n];
            line = line (s + 1 < ns ? ". " : ".") }
        print line "\"}" } }' > "$logdir/corpus.jsonl"
mpiexec -n 1 "$preprocess" --input "$logdir/corpus.jsonl" --output-prefix "$logdir/corpus" \
    --tokenizer-type BertWordPieceCase --vocab-file "$vocab_file" --split-sentences > "$logdir/preprocess.out" 2>&1
MODEL="--encoder-num-layers 4 --decoder-num-layers 3 --hidden-size 256 --num-attention-heads 4 --kv-channels 64
       --ffn-hidden-size 512 --encoder-seq-length 128 --decoder-seq-length 32 --max-position-embeddings 128
       --position-embedding-type relative --relative-attention-num-buckets 32 --relative-attention-max-distance 128
       --normalization RMSNorm --norm-epsilon 1e-6 --disable-bias-linear --untie-embeddings-and-output-weights $mlp
       --make-vocab-size-divisible-by 1 --vocab-extra-ids 100 --tokenizer-type BertWordPieceCase --vocab-file $vocab_file
       --data-path $logdir/corpus_text_sentence.h5 --split 949,50,1 --hidden-dropout 0 --attention-dropout 0
       --init-method-std 0.05"
rm -rf "$logdir/ck" "$logdir/hf" "$logdir/made" "$logdir/imported"
mpiexec -n 1 "$pretrain" --device cpu $MODEL --micro-batch-size 4 --global-batch-size 8 \
    --train-iters "${TRAIN_ITERS:-40}" --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 4 --lr-decay-style cosine --seed 1234 \
    --log-interval 10 --eval-iters 0 --save "$logdir/ck" --save-interval "${TRAIN_ITERS:-40}" > "$logdir/train.out" 2>&1
echo "# trained: $(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | head -1) -> $(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | tail -1)"
step "$logdir/export.out" "$convert" --to-hf --load "$logdir/ck" --output "$logdir/hf"
sed 's/^/# /' "$logdir/export.out"
ours_logits() {  # ours_logits CKPT PREFIX : t5_logits of every prompt (seed 1000 + p)
    p=0
    while [ "$p" -lt "$prompts" ]; do
        mpiexec -n 1 "$logits" "$2.$p" $MODEL --micro-batch-size 1 --global-batch-size 1 \
            --train-iters 1 --lr 0 --seed $((1000 + p)) --load "$1" --finetune > "$2.$p.out" 2>&1
        sed 's/^/# prompt '"$p"': /' "$2.$p.out" | grep t5_logits
        p=$((p + 1))
    done
}
ours_logits "$logdir/ck" "$logdir/ours"
if ! "$python" -c 'import torch, transformers, numpy' 2>/dev/null; then
    echo "SKIP: torch, transformers or numpy is not installed ($python): trained, exported and computed our logits only"
    exit 0
fi
echo "# peer: $("$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
status=0
"$python" "$top/perf/t5_hf_parity.py" compare "$logdir/hf" "$logdir/ours" "$prompts" || status=1
# the other way: a T5 made by transformers, imported
"$python" "$top/perf/t5_hf_parity.py" make "$logdir/made" "$logdir/hf/config.json"
step "$logdir/import.out" "$convert" --from-hf --input "$logdir/made" --save "$logdir/imported" \
    --make-vocab-size-divisible-by 1
sed 's/^/# /' "$logdir/import.out"
ours_logits "$logdir/imported" "$logdir/ours_imported"
"$python" "$top/perf/t5_hf_parity.py" compare "$logdir/made" "$logdir/ours_imported" "$prompts" || status=1
exit $status
