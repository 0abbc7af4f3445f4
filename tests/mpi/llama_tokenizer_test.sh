#!/bin/sh
# llama_tokenizer_test.sh: the Llama tokenizers through the real programs, 2 MPI ranks each.
# SentencePiece (Llama2Tokenizer): a small BPE model trained here with spm_train on the bundled
# text; preprocess_data's tokens must be spm_encode's ids (the CLI, not our library path) with
# the model's EOS after each document. HuggingFaceTokenizer: GPT-2's vocabulary and merges
# written as a Llama 3 style tokenizer.json (Split regex + ByteLevel) must give the same corpus
# as GPT2BPETokenizer. Then pretrain_gpt trains on both corpora with the vocabulary size taken
# from the tokenizer.
. "${top_srcdir:-.}/tests/lib.sh"
GPT2="$top_srcdir/configs/tokenizers/gpt2"
PREPROCESS="$top_builddir/app/preprocess_data"

# the tokens of a corpus, one per line
tokens() { h5dump -d /tokens -y -w 0 "$1" | sed -n '/DATA {/,/}/p' | tr -cs '0-9' '\n' | sed '/^$/d'; }

# 300 one-line documents: lines of the bundled text without quotes or backslashes
grep -v '["\\]' "$top_srcdir/configs/data/tinyshakespeare.txt" | grep '[a-z]' | head -300 > "$WORK/lines.txt"
sed 's/.*/{"text": "&"}/' "$WORK/lines.txt" > "$WORK/lines.jsonl"

TRAIN="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 2
       --global-batch-size 8 --train-iters 12 --lr 3e-3 --lr-warmup-iters 2 --log-interval 4 --eval-interval 100
       --eval-iters 0 --split 100,0,0 --hidden-dropout 0 --attention-dropout 0 --make-vocab-size-divisible-by 64"

# ---- SentencePiece ----
if command -v spm_train >/dev/null && command -v spm_encode >/dev/null; then
    spm_train --input="$top_srcdir/configs/data/tinyshakespeare.txt" --model_prefix="$WORK/sp" --vocab_size=400 \
        --model_type=bpe --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --input_sentence_size=20000 \
        --minloglevel=2 > "$WORK/spm.out" 2>&1
    ok $? "spm_train trains a 400-piece BPE model on the bundled text"
    "$MPIEXEC" -n 2 "$PREPROCESS" --input "$WORK/lines.jsonl" --output-prefix "$WORK/sp" --tokenizer-type Llama2Tokenizer \
        --tokenizer-model "$WORK/sp.model" --append-eod > "$WORK/pre.out" 2>&1
    ok $? "preprocess_data --tokenizer-type Llama2Tokenizer writes the corpus ($(grep -o '[0-9]* tokens' "$WORK/pre.out" | head -1))"
    spm_encode --model="$WORK/sp.model" --output_format=id < "$WORK/lines.txt" | sed 's/$/ 2/' | tr ' ' '\n' | sed '/^$/d' > "$WORK/sp.want"
    tokens "$WORK/sp_text_document.h5" > "$WORK/sp.got"
    [ -s "$WORK/sp.want" ] && cmp -s "$WORK/sp.want" "$WORK/sp.got"
    ok $? "the corpus is spm_encode's ids, each document ended by the EOS 2 ($(wc -l < "$WORK/sp.want") tokens)"
    h5dump -a /vocab_size "$WORK/sp_text_document.h5" | grep -q "(0): 400"
    ok $? "the corpus records the SentencePiece vocabulary size 400"
    run_app 2 $TRAIN --data-path "$WORK/sp_text_document" --tokenizer-type Llama2Tokenizer --tokenizer-model "$WORK/sp.model" \
        --metrics-file "$WORK/sp.jsonl"
    status=$?
    grep -q "padded_vocab_size \.*\s*448$" "$WORK/out"
    ok $((status + $?)) "pretrain_gpt trains on it with Llama2Tokenizer (vocabulary 400 from the model, padded to 448)"
    [ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5
    run_app 2 $TRAIN --data-path "$WORK/sp_text_document" --tokenizer-type SentencePieceTokenizer --tokenizer-model "$WORK/sp.model"
    ok $? "SentencePieceTokenizer reads the same model"
else
    for what in spm_train preprocess ids vocab train sentencepiece; do
        ok 0 "SentencePiece $what # SKIP spm_train/spm_encode not installed (apt-get install sentencepiece)"
    done
fi

# ---- Hugging Face tokenizer.json ----
mkdir -p "$WORK/hf"
python3 - "$GPT2" "$WORK/hf" <<'EOF'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
vocab = json.load(open(src + "/vocab.json", encoding="utf-8"))
merges = [l.rstrip("\n") for l in open(src + "/merges.txt", encoding="utf-8") if l.strip() and not l.startswith("#")]
pattern = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
json.dump({"version": "1.0", "normalizer": None,
           "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}],
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
           "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": [m.split(" ") for m in merges]}},
          open(dst + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
json.dump({"eos_token": "<|endoftext|>"}, open(dst + "/tokenizer_config.json", "w"))
EOF
ok $? "GPT-2's vocabulary and merges written as a Llama 3 style tokenizer.json"
"$MPIEXEC" -n 2 "$PREPROCESS" --input "$WORK/lines.jsonl" --output-prefix "$WORK/hf" --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$WORK/hf" --append-eod > "$WORK/pre.out" 2>&1
ok $? "preprocess_data --tokenizer-type HuggingFaceTokenizer writes the corpus"
"$MPIEXEC" -n 2 "$PREPROCESS" --input "$WORK/lines.jsonl" --output-prefix "$WORK/gpt2" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$GPT2/vocab.json" --merge-file "$GPT2/merges.txt" --append-eod > "$WORK/pre2.out" 2>&1
tokens "$WORK/hf_text_document.h5" > "$WORK/hf.got"
tokens "$WORK/gpt2_text_document.h5" > "$WORK/gpt2.want"
[ -s "$WORK/gpt2.want" ] && cmp -s "$WORK/hf.got" "$WORK/gpt2.want"
ok $? "its tokens equal GPT2BPETokenizer's, EOD 50256 from tokenizer_config.json included ($(wc -l < "$WORK/hf.got") tokens)"
run_app 2 $TRAIN --data-path "$WORK/hf_text_document" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$WORK/hf/tokenizer.json"
status=$?
grep -q "padded_vocab_size \.*\s*50304$" "$WORK/out"
ok $((status + $?)) "pretrain_gpt trains on it with HuggingFaceTokenizer (vocabulary 50257, padded to 50304)"
[ "$status" -eq 0 ] || sed 's/^/#   /' "$WORK/err" | head -5

# flag errors: a SentencePiece type without a model, and --append-eod without a known EOS
run_app 2 $TRAIN --data-path "$WORK/hf_text_document" --tokenizer-type Llama2Tokenizer
grep -q "\-\-tokenizer-type Llama2Tokenizer needs --tokenizer-model" "$WORK/err"
ok $? "Llama2Tokenizer without --tokenizer-model is refused by name"
rm "$WORK/hf/tokenizer_config.json"
"$MPIEXEC" -n 2 "$PREPROCESS" --input "$WORK/lines.jsonl" --output-prefix "$WORK/noeos" --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$WORK/hf" --append-eod > "$WORK/pre.out" 2>&1
[ $? -ne 0 ] && grep -q "names no end-of-document token" "$WORK/pre.out"
ok $? "--append-eod with a tokenizer.json that names no EOS is refused"

done_testing
