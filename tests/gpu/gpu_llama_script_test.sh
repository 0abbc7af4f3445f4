#!/bin/sh
# gpu_llama_script_test.sh: the GPU run of tests/mpi/llama_script_test.sh's launch script
# (Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh shrunk, every flag kept,
# tests/data/train_llama3_8b_tiny.sh) with --device cuda on 2 GPUs (TP2, sequence parallel,
# distributed optimizer, bf16, --apply-layernorm-1p, --decoupled-lr): it trains 12 iterations,
# the loss falls as on the CPU, and the first loss is within 1% of the CPU backend's. Skipped
# (a TAP skip plan) with fewer than 2 GPUs. On the accelerator machine: GPU_PRETRAIN_GPT=path/to/pretrain_gpt.
. "${top_srcdir:-.}/tests/lib.sh"
PRETRAIN_GPT=${GPU_PRETRAIN_GPT:-$PRETRAIN_GPT}
require_gpus 2
awk 'BEGIN { RS = ""; n = 0 } n < 150 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/docs.jsonl"
HF_TOKENIZER="$top_srcdir/tests/data/hf-bpe-600"
"$MPIEXEC" -n 2 "$(dirname "$PRETRAIN_GPT")/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF_TOKENIZER" --append-eod > "$WORK/pre.out" 2>&1
ok $? "the script's data, preprocessed"
export MPIEXEC PRETRAIN_GPT
script() {  # script DEVICE : losses in $WORK/DEVICE.losses
    (cd "$WORK" && DEVICE=$1 DATA_CACHE_PATH="$WORK/cache" timeout 300 bash "$top_srcdir/tests/data/train_llama3_8b_tiny.sh" \
        "$WORK/ck_$1" "$WORK/tb_$1" "$HF_TOKENIZER" "$WORK/corpus_text_document" > "$WORK/out" 2> "$WORK/err")
    status=$?
    grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*lm loss: //' > "$WORK/$1.losses"
    return $status
}
script cuda
ok $? "the Llama 3 example script trains on 2 GPUs" || sed 's/^/#   /' "$WORK/err" | head -5
first=$(head -1 "$WORK/cuda.losses"); last=$(tail -1 "$WORK/cuda.losses")
[ "$(wc -l < "$WORK/cuda.losses")" -eq 12 ] && awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.5) }'
ok $? "12 iterations and the loss falls (from $first to $last)"
script cpu
cpu_first=$(head -1 "$WORK/cpu.losses")
awk -v g="$first" -v c="$cpu_first" 'BEGIN { d = (g - c) / c; if (d < 0) d = -d; exit !(c > 0 && d < 0.01) }'
ok $? "the first loss within 1% of the CPU backend's ($first on the GPU, $cpu_first on the CPU)"
done_testing
