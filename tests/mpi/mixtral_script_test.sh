#!/bin/sh
# mixtral_script_test.sh: Megatron-LM's examples/mixtral/train_mixtral_8x7b_distributed.sh with
# every flag kept and the sizes shrunk (tests/data/train_mixtral_8x7b_tiny.sh: 4 ranks, PP2 x DP2
# with the experts split over the 2 data-parallel ranks (EP2) and the distributed optimizer, 4 experts top-2 with the load-balancing loss, a SentencePiece
# Llama2Tokenizer trained here on the bundled text) trains, logs Megatron's MoE items, validates
# and saves; nothing of it is refused.
. "${top_srcdir:-.}/tests/lib.sh"
if ! command -v spm_train >/dev/null; then echo "1..0 # SKIP spm_train (package sentencepiece) is not installed"; exit 0; fi
spm_train --input="$top_srcdir/configs/data/tinyshakespeare.txt" --model_prefix="$WORK/sp" --vocab_size=400 \
    --model_type=bpe --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --input_sentence_size=20000 \
    --minloglevel=2 > "$WORK/spm.out" 2>&1
ok $? "a 400-piece SentencePiece model trained on the bundled text (the script's --tokenizer-model)"
awk 'BEGIN { RS = ""; n = 0 } n < 200 { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\n/, "\\n"); printf "{\"text\": \"%s\\n\"}\n", $0; n++ }' \
    "$top_srcdir/configs/data/tinyshakespeare.txt" > "$WORK/docs.jsonl"
"$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/corpus" \
    --tokenizer-type Llama2Tokenizer --tokenizer-model "$WORK/sp.model" --append-eod > "$WORK/pre.out" 2>&1
ok $? "the script's data: Shakespeare preprocessed with that tokenizer"
export MPIEXEC PRETRAIN_GPT
(cd "$WORK" && timeout 300 bash "$top_srcdir/tests/data/train_mixtral_8x7b_tiny.sh" "$WORK/mixtral_ck" "$WORK/sp.model" \
    "$WORK/corpus_text_document" > "$WORK/out" 2> "$WORK/err")
status=$?
ok $status "the Mixtral example script, every flag kept, trains on 4 ranks (PP2 x DP2, EP2, distributed optimizer)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*' "$WORK/out" | sed 's/.*lm loss: //' > "$WORK/losses"
first=$(head -1 "$WORK/losses"); last=$(tail -1 "$WORK/losses")
[ "$(wc -l < "$WORK/losses")" -eq 10 ] && awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.3) }'
ok $? "10 iterations and the loss falls (from $first to $last)"
grep -q "lm loss: [0-9.E+-]* | load_balancing_loss: [0-9.]* |" "$WORK/out"
ok $? "every log line carries load_balancing_loss"
[ -f "$WORK/mixtral_ck/iter_0000010.h5" ] && grep -q "validation loss at iteration 10" "$WORK/out" &&
    [ "$(h5dump -a /args/num_experts "$WORK/mixtral_ck/iter_0000010.h5" | sed -n 's/^ *(0): *//p')" = 4 ]
ok $? "it validates and saves at iteration 10 (num_experts 4 in /args)"
grep -q "^> accepted with no effect here (see --help): .*--use-mcore-models" "$WORK/out" && ! grep -qi "refused\|not supported" "$WORK/err"
ok $? "start-up names the no-effect flags; nothing is refused"
done_testing
