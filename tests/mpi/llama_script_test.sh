#!/bin/sh
# llama_script_test.sh: the flags of Megatron-LM's Llama example that used to be refused, each
# through pretrain_gpt on the CPU backend: --decoupled-lr / --decoupled-min-lr (the embedding and
# output layer on their own peak and floor: at 0 they keep their initial values while every
# other tensor trains; equal to --lr, training is bitwise unchanged), --apply-layernorm-1p (norm
# weights stored as w - 1, zero at initialization; training bitwise the same losses as without),
# --use-rope-scaling (changes the losses of a long-context model; refused without rope).
# Then examples/llama/train_llama3_8b_h100_fp8.sh itself, every flag kept, shrunk to a tiny
# shape with the HuggingFaceTokenizer of tests/data/hf-bpe-600: it trains on 2 ranks and the
# loss falls.
. "${top_srcdir:-.}/tests/lib.sh"
LLAMA_ARGS="$top_srcdir/configs/llama-tiny.args"
SHORT="--args-file $LLAMA_ARGS --train-iters 3 --lr-warmup-iters 1 --eval-iters 0 --log-interval 1 --seq-length 32
       --micro-batch-size 2 --global-batch-size 8"

# changed DUMP_A DUMP_B : the names of the tensors that differ between two --dump-parameters files
changed() {
    python3 - "$1" "$2" <<'EOF'
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
for line in open(sys.argv[1] + ".index"):
    name, rows, cols, offset = line.split()
    n = int(rows) * max(int(cols), 1)
    lo, hi = 4 * int(offset), 4 * (int(offset) + n)
    print(name, "changed" if a[lo:hi] != b[lo:hi] else "same")
EOF
}

# ---- --decoupled-lr ----------------------------------------------------------------------------
run_app 1 $SHORT --lr 0 --min-lr 0 --dump-parameters "$WORK/initial.bin"
ok $? "--lr 0: the initial parameters, dumped" || tail -3 "$WORK/err" | sed 's/^/# /'
run_app 1 $SHORT --decoupled-lr 0 --decoupled-min-lr 0 --dump-parameters "$WORK/decoupled0.bin"
ok $? "--decoupled-lr 0 --decoupled-min-lr 0 trains" || tail -3 "$WORK/err" | sed 's/^/# /'
changed "$WORK/initial.bin" "$WORK/decoupled0.bin" > "$WORK/changed"
grep -qx "embedding.word_embeddings.weight same" "$WORK/changed" && grep -qx "output_layer.weight same" "$WORK/changed" &&
    [ "$(grep -c ' same$' "$WORK/changed")" -eq 2 ] && [ "$(grep -c ' changed$' "$WORK/changed")" -ge 10 ]
ok $? "the word embeddings and output layer keep their initial values, the other $(grep -c ' changed$' "$WORK/changed") tensors train"
run_app 2 $SHORT --decoupled-lr 0 --decoupled-min-lr 0 --pipeline-model-parallel-size 2 --untie-embeddings-and-output-weights \
    --dump-parameters "$WORK/decoupled0_pp.bin"
changed "$WORK/initial.bin" "$WORK/decoupled0_pp.bin" | grep -c ' same$' | grep -qx 2
ok $? "the same over two pipeline stages (embedding on the first, output layer on the last)"
run_app 1 $SHORT --dump-parameters "$WORK/plain.bin"
hash=$(grep "final parameter hash" "$WORK/out")
run_app 1 $SHORT --decoupled-lr 3e-3 --decoupled-min-lr 3e-4
[ -n "$hash" ] && [ "$(grep "final parameter hash" "$WORK/out")" = "$hash" ]
ok $? "--decoupled-lr equal to --lr and --decoupled-min-lr to --min-lr: bitwise the same training ($hash)"
run_app 1 $SHORT --decoupled-lr 1e-2
[ -n "$hash" ] && [ "$(grep "final parameter hash" "$WORK/out")" != "$hash" ]
ok $? "another --decoupled-lr changes training"
run_app 1 $SHORT --decoupled-min-lr 1e-5
[ $? -ne 0 ] && grep -q -- "--decoupled-min-lr needs --decoupled-lr" "$WORK/err"
ok $? "--decoupled-min-lr alone is refused: $(grep -m1 error: "$WORK/err")"

# ---- --apply-layernorm-1p ------------------------------------------------------------------------
# norm_values DUMP : "NAME MIN MAX" of every norm weight in a dump
norm_values() {
    python3 - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
for line in open(sys.argv[1] + ".index"):
    name, rows, cols, offset = line.split()
    if "norm" in name and name.endswith("weight"):
        v = struct.unpack("<%df" % int(rows), data[4 * int(offset):4 * (int(offset) + int(rows))])
        print(name, min(v), max(v))
EOF
}
losses() { grep -o 'lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/lm loss: //'; }
close_losses() {  # close_losses A B : the same count, each within 1e-5 relative, the first bitwise
    awk 'NR == FNR { a[FNR] = $1; n = FNR; next } { d = a[FNR] - $1; if (d < 0) d = -d; if (d > 1e-5 * a[FNR]) bad++; m = FNR }
         END { exit !(n == m && n >= 3 && !bad) }' "$1" "$2" && [ "$(head -1 "$1")" = "$(head -1 "$2")" ]
}
run_app 1 $SHORT --apply-layernorm-1p --lr 0 --min-lr 0 --dump-parameters "$WORK/zero1p.bin"
norm_values "$WORK/zero1p.bin" > "$WORK/norms"
[ "$(wc -l < "$WORK/norms")" -eq 5 ] && ! grep -qv ' 0.0 0.0$' "$WORK/norms"
ok $? "--apply-layernorm-1p: the 5 RMSNorm weights are stored as zeros at initialization"
run_app 1 $SHORT --train-iters 4 --dump-parameters "$WORK/rms.bin"
losses > "$WORK/rms_losses"
run_app 1 $SHORT --train-iters 4 --apply-layernorm-1p --dump-parameters "$WORK/rms1p.bin"
ok $? "a Llama trains with --apply-layernorm-1p" || tail -3 "$WORK/err" | sed 's/^/# /'
losses > "$WORK/rms1p_losses"
close_losses "$WORK/rms_losses" "$WORK/rms1p_losses"
ok $? "RMSNorm: the losses of training without it (first bitwise, then within rounding): $(tr '\n' ' ' < "$WORK/rms1p_losses")"
norm_values "$WORK/rms.bin" > "$WORK/plain_norms"; norm_values "$WORK/rms1p.bin" > "$WORK/1p_norms"
paste -d' ' "$WORK/plain_norms" "$WORK/1p_norms" | awk '{ d1 = $2 - ($5 + 1); d2 = $3 - ($6 + 1); if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2;
    if (d1 > 1e-5 || d2 > 1e-5 || $2 == 1) bad++ } END { exit !(NR == 5 && !bad) }'
ok $? "after training the stored weights are the plain run's minus 1 (and have moved from 1)"
TINY_SHORT="--args-file $TINY_ARGS --train-iters 4 --lr-warmup-iters 1 --eval-iters 0 --log-interval 1 --hidden-dropout 0 --attention-dropout 0"
run_app 1 $TINY_SHORT; losses > "$WORK/ln_losses"
run_app 1 $TINY_SHORT --apply-layernorm-1p; losses > "$WORK/ln1p_losses"
close_losses "$WORK/ln_losses" "$WORK/ln1p_losses"
ok $? "LayerNorm (the tiny GPT): the same losses with it: $(tr '\n' ' ' < "$WORK/ln1p_losses")"
run_app 1 $SHORT --apply-layernorm-1p --save "$WORK/ck1p" --save-interval 3 &&
    timeout 60 "$top_builddir/app/convert_checkpoint" --to-hf --load "$WORK/ck1p" --output "$WORK/hf1p" > /dev/null 2>&1 &&
    python3 - "$WORK/hf1p/model.safetensors" <<'EOF' > "$WORK/hf_norm"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])["model.norm.weight"]
print("%.9g" % struct.unpack("<f", data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][0] + 4])[0])
EOF
stored=$("$top_builddir/tests/tools/make_hf_fixture" get "$WORK/ck1p/iter_0000003.h5" decoder.final_layernorm.weight 0)
awk -v h="$(cat "$WORK/hf_norm")" -v s="$stored" 'BEGIN { d = h - (s + 1); exit !(d < 1e-7 && d > -1e-7 && s != 0) }'
ok $? "the Hugging Face export writes 1 + w (stored $stored, exported $(cat "$WORK/hf_norm"))"
run_app 1 $SHORT --load "$WORK/ck1p" --train-iters 4
[ $? -ne 0 ] && grep -q -- "--apply-layernorm-1p = 1 (this run: 0)" "$WORK/err"
ok $? "loading it without the flag is refused: $(grep -m1 -o 'conflict with.*' "$WORK/err" | cut -c1-100)"

# ---- --use-rope-scaling --------------------------------------------------------------------------
LONG="$SHORT --seq-length 64 --rotary-base 500000 --train-iters 2"
run_app 1 $LONG; losses > "$WORK/rope_plain"
run_app 1 $LONG --use-rope-scaling --rope-scaling-factor 8; losses > "$WORK/rope_scaled"
[ -s "$WORK/rope_scaled" ] && ! cmp -s "$WORK/rope_plain" "$WORK/rope_scaled"
ok $? "--use-rope-scaling changes the rotary frequencies: losses $(tr '\n' ' ' < "$WORK/rope_plain")-> $(tr '\n' ' ' < "$WORK/rope_scaled")"
run_app 1 --args-file "$TINY_ARGS" --train-iters 1 --use-rope-scaling
[ $? -ne 0 ] && grep -q -- "need --position-embedding-type rope" "$WORK/err"
ok $? "refused without rotary embeddings: $(grep -m1 error: "$WORK/err" | cut -c1-120)"

# ---- Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh, shrunk (tests/data/) ------------
awk 'BEGIN { RS = ""; n = 0 } n < 150 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/docs.jsonl"
HF_TOKENIZER="$top_srcdir/tests/data/hf-bpe-600"
"$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF_TOKENIZER" --append-eod > "$WORK/pre.out" 2>&1
ok $? "the script's data: Shakespeare preprocessed with the HuggingFaceTokenizer of tests/data/hf-bpe-600"
export MPIEXEC PRETRAIN_GPT
(cd "$WORK" && DATA_CACHE_PATH="$WORK/cache" timeout 300 bash "$top_srcdir/tests/data/train_llama3_8b_tiny.sh" "$WORK/llama_ck" \
    "$WORK/llama_tb" "$HF_TOKENIZER" "$WORK/corpus_text_document" > "$WORK/out" 2> "$WORK/err")
status=$?
ok $status "the Llama 3 example script, every flag kept, trains on 2 ranks (TP2, sequence parallel, distributed optimizer)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*lm loss: //' > "$WORK/script_losses"
first=$(head -1 "$WORK/script_losses"); last=$(tail -1 "$WORK/script_losses")
[ "$(wc -l < "$WORK/script_losses")" -eq 12 ] && awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.5) }'
ok $? "12 iterations and the loss falls (from $first to $last)"
R="$WORK/llama_ck/iter_0000012.h5"
[ -f "$R" ] && [ "$(h5dump -a /args/apply_layernorm_1p "$R" | sed -n 's/^ *(0): *//p')" = 1 ] &&
    [ "$(h5dump -a /args/tokenizer_type "$R" | sed -n 's/^ *(0): *//p' | tr -d '"')" = HuggingFaceTokenizer ] &&
    grep -q "validation loss at iteration 12" "$WORK/out"
ok $? "it validates and saves at iteration 12 (apply_layernorm_1p and the tokenizer in /args)"
grep -q "^> accepted with no effect here (see --help): .*--use-mcore-models" "$WORK/out" && ! grep -qi "refused\|not supported" "$WORK/err"
ok $? "start-up names the no-effect flags; nothing is refused"

done_testing
