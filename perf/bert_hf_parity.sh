#!/bin/sh
# bert_hf_parity.sh: issue 46's Hugging Face logits parity for BERT. Trains a small but complete
# BERT on the CPU backend (pretrain_bert: 4 layers, hidden 256, 8 heads, ffn 1024, sequence 128,
# the binary head; a WordPiece corpus made here from the test vocabulary), exports it with
# convert_checkpoint --to-hf (MegatronBertForPreTraining, float32), computes our MLM and binary
# logits on PROMPTS samples with token types and padding (tests/tools/bert_logits, fp32), and
# compares them with transformers' MegatronBertForPreTraining in float32 (perf/bert_hf_parity.py:
# as transformers computes config.json, and with the LM head's GeLU exact, which is our model's
# function: max |d logit|, max |d log-prob|, the binary logits, PASS/FAIL). Then the import
# direction: transformers makes a random model of the export's config.json with every parameter
# perturbed (bert_hf_parity.py make), convert_checkpoint --from-hf imports it, and our logits of
# it are compared with transformers' the same way. Writes the record
# (date, commit, machine, versions, model, results) to RECORD.
#
#   perf/bert_hf_parity.sh      (from the built tree, or with the executables on PATH: a devpack)
#
# Environment: BIN (the build tree holding app/ and tests/tools/; default the tree this script is
# in; executables not found there are taken from PATH), PYTHON (python3), LOGDIR (default a
# temporary folder), TRAIN_ITERS (default 40), PROMPTS (default 3), NOBINARY=1 for a
# --bert-no-binary-head model (MegatronBertForMaskedLM), RECORD (default LOGDIR/record.md).
# Without torch and transformers the steps before the comparison run and the script ends with
# "SKIP" (exit 0).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$top}
python=${PYTHON:-python3}
logdir=${LOGDIR:-$(mktemp -d /tmp/bert-hf-parity.XXXXXX)}
prompts=${PROMPTS:-3}
iters=${TRAIN_ITERS:-40}
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
record=${RECORD:-$logdir/record.md}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-4}
. "$top/perf/parity_tools.sh"
PRETRAIN=$(tool pretrain_bert)
PREPROCESS=$(tool preprocess_data)
CONVERT=$(tool convert_checkpoint)
LOGITS=$(tool bert_logits)
commit=${COMMIT:-$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "# bert_hf_parity, $(date -Is), commit $commit, files in $logdir"

# the corpus: documents of 2 to 6 sentences over the test vocabulary's words (tests/mpi/bert_corpus.sh's)
vocab="$top/tests/data/wordpiece-vocab.txt"
awk -v docs=600 'BEGIN {
    n = split("the quick brown fox jumped over the lazy dog jumps unaffable tokenizer dataset " \
              "resume alpha hello world data token cafe naive tokenizing is it a don", w, " ");
    for (d = 0; d < docs; d++) {
        ns = 2 + (d * 7) % 5; line = "{\"text\": \"";
        for (s = 0; s < ns; s++) {
            len = 2 + (d * 13 + s * 5) % 23;
            for (k = 0; k < len; k++) line = line (k ? " " : "") w[1 + (d * 31 + s * 17 + k * 7 + k * k) % n];
            line = line (s + 1 < ns ? ". " : ".") }
        print line "\"}" } }' > "$logdir/corpus.jsonl"
rm -rf "$logdir/corpus_text_sentence"*
step "$logdir/preprocess.out" mpiexec -n 1 "$PREPROCESS" --input "$logdir/corpus.jsonl" --output-prefix "$logdir/corpus" \
    --tokenizer-type BertWordPieceLowerCase --vocab-file "$vocab" --split-sentences

binary=
architecture=MegatronBertForPreTraining
[ "${NOBINARY:-0}" = 1 ] && binary=--bert-no-binary-head && architecture=MegatronBertForMaskedLM
MODEL="--device cpu --num-layers 4 --hidden-size 256 --ffn-hidden-size 1024 --num-attention-heads 8 --seq-length 128
       --max-position-embeddings 128 --vocab-file $vocab --make-vocab-size-divisible-by 16
       --data-path $logdir/corpus_text_sentence.h5 --split 949,50,1 --hidden-dropout 0 --attention-dropout 0
       --init-method-std 0.02 $binary"
rm -rf "$logdir/ck" "$logdir/hf"
step "$logdir/train.out" mpiexec -n 1 "$PRETRAIN" $MODEL --micro-batch-size 4 --global-batch-size 8 --train-iters "$iters" \
    --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters $((iters < 8 ? 1 : 4)) --lr-decay-style cosine --seed 1234 \
    --log-interval $((iters < 10 ? 1 : 10)) --eval-iters 0 --save "$logdir/ck" --save-interval "$iters"
trained="$(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | head -1) -> $(grep -o 'lm loss: [0-9.E+-]*' "$logdir/train.out" | tail -1)"
echo "# trained $iters iterations: $trained"
step "$logdir/export.out" "$CONVERT" --to-hf --load "$logdir/ck" --output "$logdir/hf"
sed 's/^/# /' "$logdir/export.out"
p=0
while [ "$p" -lt "$prompts" ]; do  # sample p: the mock-token ids of seed 1000 + p, types and padding
    step "$logdir/logits.$p.out" mpiexec -n 1 "$LOGITS" "$logdir/ours.$p" $MODEL --micro-batch-size 1 --global-batch-size 1 \
        --train-iters 1 --lr 0 --seed $((1000 + p)) --load "$logdir/ck" --finetune
    sed 's/^/# prompt '"$p"': /' "$logdir/logits.$p.out" | grep bert_logits
    p=$((p + 1))
done
if ! "$python" -c 'import torch, transformers, numpy' 2>/dev/null; then
    echo "SKIP: torch, transformers or numpy is not installed ($python): trained, exported and computed our logits only"
    exit 0
fi
peer=$("$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')
echo "# peer: $peer"
status=0
"$python" "$top/perf/bert_hf_parity.py" "$logdir/hf" "$logdir/ours" "$prompts" > "$logdir/parity.out" 2>&1 || status=$?
cat "$logdir/parity.out"
# the other way: a model made by transformers (every parameter perturbed), imported, compared
rm -rf "$logdir/made" "$logdir/imported"
"$python" "$top/perf/bert_hf_parity.py" make "$logdir/made" "$logdir/hf/config.json" > "$logdir/import.out" 2>&1 &&
    "$CONVERT" --from-hf --input "$logdir/made" --save "$logdir/imported" --make-vocab-size-divisible-by 16 \
        >> "$logdir/import.out" 2>&1 || { echo "FAIL: the import step failed:"; tail -5 "$logdir/import.out"; status=1; }
sed 's/^/# /' "$logdir/import.out"
p=0
while [ "$status" = 0 ] && [ "$p" -lt "$prompts" ]; do
    step "$logdir/logits_imported.$p.out" mpiexec -n 1 "$LOGITS" "$logdir/ours_imported.$p" $MODEL --micro-batch-size 1 \
        --global-batch-size 1 --train-iters 1 --lr 0 --seed $((1000 + p)) --load "$logdir/imported" --finetune
    p=$((p + 1))
done
if [ "$status" = 0 ]; then
    echo "# import direction: transformers' model made and saved, imported with --from-hf" >> "$logdir/parity.out"
    "$python" "$top/perf/bert_hf_parity.py" "$logdir/made" "$logdir/ours_imported" "$prompts" > "$logdir/parity_import.out" 2>&1 ||
        status=$?
    cat "$logdir/parity_import.out" >> "$logdir/parity.out"
    cat "$logdir/parity_import.out"
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
{
    echo "# BERT: our forward against transformers' $architecture ($(date +%F))"
    echo
    echo "Issue 46 item 4: a pretrain_bert checkpoint exported with \`convert_checkpoint --to-hf\`, our logits"
    echo "against transformers' on the same inputs (token types, padding), float32; then the other way: a"
    echo "model made by transformers (every parameter perturbed) imported with \`--from-hf\`, compared the same way."
    echo
    echo "- machine: $(hostname)${gpu:+, $gpu}; $peer; commit $commit"
    echo "- command: \`perf/bert_hf_parity.sh\` (TRAIN_ITERS=$iters PROMPTS=$prompts NOBINARY=${NOBINARY:-0})"
    echo "- model: $(echo $MODEL | sed "s|$logdir/||g; s|$top/||g")"
    echo "- trained on the CPU backend, fp32: $trained"
    echo
    echo '```'
    sed 's/^/# /' "$logdir/export.out"
    for f in "$logdir"/logits.*.out; do grep bert_logits "$f" | sed 's/^/# /'; done
    cat "$logdir/parity.out"
    echo '```'
} > "$record"
echo "# record: $record"
exit $status
