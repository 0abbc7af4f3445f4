#!/bin/sh
# tokenizer_cache_name_test.sh: the index cache of a corpus read with --tokenizer-type
# HuggingFaceTokenizer, Llama2Tokenizer or SentencePieceTokenizer is named as Megatron-Core names
# it: the MD5 of the dataset's unique description. The descriptions below are written by hand
# from Megatron-LM's code (megatron/core/datasets/megatron_dataset.py: json.dumps of
# unique_identifiers, indent=4; megatron/core/tokenizers/text/text_tokenizer.py
# MegatronTokenizerText.unique_identifiers: class, tokenizer_path, then each keyword argument of
# megatron/core/tokenizers/utils/build_tokenizer.py as str(), with Megatron's defaults for the
# tokenizer flags this project does not have); md5sum of each must be the name of the
# description.txt that pretrain_gpt writes, and the file must hold exactly that text.
. "${top_srcdir:-.}/tests/lib.sh"
HF="$top_srcdir/tests/data/hf-bpe-600"
MODEL="--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16
       --micro-batch-size 1 --global-batch-size 4 --train-iters 3 --lr 0 --eval-iters 0 --split 100,0,0 --seed 1234"

grep -v '["\\]' "$top_srcdir/configs/data/tinyshakespeare.txt" | grep '[a-z]' | head -200 | sed 's/.*/{"text": "&"}/' \
    > "$WORK/lines.jsonl"

# description PREFIX TOKENIZER_FIELDS : GPTDataset's unique_description of the train split
# (12 samples, 100,0,0) of corpus PREFIX; the tokenizer's fields are "key": "value" lines
description() {
    printf '{\n    "class": "GPTDataset",\n    "dataset_path": "%s",\n    "num_samples": 12,\n' "$1"
    printf '    "index_split": "train",\n    "random_seed": 1234,\n    "sequence_length": 16,\n'
    printf '    "split": "100,0,0",\n    "split_matrix": [\n        [\n            0,\n            1.0\n        ],\n'
    printf '        null,\n        null\n    ],\n    "tokenizer": {\n'
    printf '        "class": "megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText",\n'
    printf '%s' "$2" | sed 's/^/        /; $!s/$/,/'
    printf '\n    }\n}'
}
# check NAME EXPECTED_FILE FLAGS... : pretrain_gpt --print-sample writes the cache under
# $WORK/NAME; the description named md5(EXPECTED) holds EXPECTED
ours() {  # ours NAME FLAGS... : pretrain_gpt --print-sample with --data-cache-path $WORK/NAME
    name=$1; shift
    timeout 300 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --print-sample train:0 --data-cache-path "$WORK/$name" "$@" \
        > "$WORK/out" 2> "$WORK/err" || { sed 's/^/#   /' "$WORK/err" | tail -3; return 1; }
}
check() {
    name=$1 expected=$2; shift 2
    ours "$name" "$@" || return 1
    hash=$(md5sum < "$expected" | cut -d' ' -f1)
    file="$WORK/$name/$hash-GPTDataset-train-description.txt"
    [ -f "$file" ] && cmp -s "$file" "$expected" && return 0
    ls "$WORK/$name" | sed 's/^/#   written: /'
    diff "$expected" "$WORK/$name"/*-GPTDataset-train-description.txt | sed 's/^/#   /'
    return 1
}

# ---- HuggingFaceTokenizer ----
"$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/lines.jsonl" --output-prefix "$WORK/hf" \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF" --append-eod > "$WORK/pre.out" 2>&1
ok $? "a corpus written with the HuggingFaceTokenizer of tests/data/hf-bpe-600"
description "$WORK/hf_text_document" "\"tokenizer_path\": \"$HF\"
\"chat_template\": \"None\"
\"vocab_file\": \"None\"
\"merges_file\": \"None\"
\"additional_special_tokens\": \"[]\"
\"use_fast\": \"True\"
\"trust_remote_code\": \"False\"
\"include_special_tokens\": \"True\"
\"use_gigatoken\": \"False\"" > "$WORK/hf.want"
check hf "$WORK/hf.want" --data-path "$WORK/hf_text_document" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF"
ok $? "HuggingFaceTokenizer --tokenizer-model DIR: the cache is named md5 of Megatron's description ($hash)"
description "$WORK/hf_text_document" "\"tokenizer_path\": \"$HF/tokenizer.json\"
\"chat_template\": \"None\"
\"vocab_file\": \"None\"
\"merges_file\": \"None\"
\"additional_special_tokens\": \"[]\"
\"use_fast\": \"True\"
\"trust_remote_code\": \"False\"
\"include_special_tokens\": \"True\"
\"use_gigatoken\": \"False\"" > "$WORK/hf_file.want"
check hf_file "$WORK/hf_file.want" --data-path "$WORK/hf_text_document" --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model "$HF/tokenizer.json"
ok $? "... --tokenizer-model DIR/tokenizer.json: the path as given, another name ($hash)"
# the same through tests/tools/megatron_gpt_samples.py (Megatron's algorithm in numpy) on the
# corpus as Megatron .bin/.idx: the same file names and bytes as ours for that prefix
PYTHON=""
for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PYTHON=$p; break; }; done
if [ -n "$PYTHON" ]; then
    "$top_builddir/app/convert_corpus" --input "$WORK/hf_text_document.h5" --output-prefix "$WORK/hfmm" --to mmap \
        > "$WORK/conv.out" 2>&1 &&
    "$PYTHON" "$top_srcdir/tests/tools/megatron_gpt_samples.py" --seq-length 16 --seed 1234 --samples 12 0 0 \
        --print train:0 --split 100,0,0 --data-path "$WORK/hfmm" --tokenizer-type HuggingFaceTokenizer \
        --tokenizer-model "$HF" --write-cache "$WORK/hfmm_ref" > "$WORK/ref.out" 2>&1 &&
    ours hfmm --data-path "$WORK/hfmm" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$HF"
    for f in $(ls "$WORK/hfmm_ref"); do cmp "$WORK/hfmm/$f" "$WORK/hfmm_ref/$f" || break; done > "$WORK/cmp.out" 2>&1
    [ -s "$WORK/cmp.out" ] && sed 's/^/#   /' "$WORK/cmp.out"
    [ "$(ls "$WORK/hfmm_ref" | wc -l)" -eq 4 ] && [ ! -s "$WORK/cmp.out" ]
    ok $? "... and megatron_gpt_samples.py --write-cache names and writes the same 4 files"
else
    ok 0 "megatron_gpt_samples.py # SKIP python3-numpy is missing"
fi

# ---- SentencePiece (Llama2Tokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer) ----
if command -v spm_train >/dev/null; then
    spm_train --input="$top_srcdir/configs/data/tinyshakespeare.txt" --model_prefix="$WORK/sp" --vocab_size=300 \
        --model_type=bpe --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --input_sentence_size=5000 \
        --minloglevel=2 > "$WORK/spm.out" 2>&1 &&
    "$MPIEXEC" -n 2 "$top_builddir/app/preprocess_data" --input "$WORK/lines.jsonl" --output-prefix "$WORK/sp" \
        --tokenizer-type Llama2Tokenizer --tokenizer-model "$WORK/sp.model" --append-eod > "$WORK/pre.out" 2>&1
    ok $? "a corpus written with a SentencePiece model trained by spm_train"
    description "$WORK/sp_text_document" "\"tokenizer_path\": \"$WORK/sp.model\"
\"chat_template\": \"None\"
\"ignore_extra_whitespaces\": \"True\"
\"legacy\": \"False\"
\"special_tokens\": \"None\"" > "$WORK/sp.want"
    for type in Llama2Tokenizer SentencePieceTokenizer GPTSentencePieceTokenizer; do
        check "sp_$type" "$WORK/sp.want" --data-path "$WORK/sp_text_document" --tokenizer-type $type \
            --tokenizer-model "$WORK/sp.model"
        ok $? "$type: the cache is named md5 of Megatron's description ($hash, the type is not part of it)"
    done
else
    for what in corpus Llama2Tokenizer SentencePieceTokenizer GPTSentencePieceTokenizer; do
        ok 0 "SentencePiece $what # SKIP spm_train not installed (apt-get install sentencepiece)"
    done
fi
done_testing
