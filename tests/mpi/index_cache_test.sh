#!/bin/sh
# tests/mpi/index_cache_test.sh: the index cache is Megatron-Core's, file for file. The reference
# (tests/tools/megatron_gpt_samples.py --write-cache) saves with numpy what Megatron's GPTDataset
# and BlendedDataset save (MD5-named description.txt and .npy files); pretrain_gpt
# --data-cache-path must write the same names and the same bytes, load a cache that Megatron
# wrote (and then checksum it), notice a damaged .npy through its XXH3 (warning naming the file,
# rebuilt), and use Megatron's default <prefix>/cache/GPTDataset_indices without the flag.
. "${top_srcdir:-.}/tests/lib.sh"
REFERENCE="$top_srcdir/tests/tools/megatron_gpt_samples.py"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

# NullTokenizer corpora as Megatron .bin/.idx: document d has 5 + (d * 37) % LEN tokens
prepare() {  # prepare NAME DOCS BASE LEN
    awk -v docs="$2" -v base="$3" -v span="$4" 'BEGIN { for (d = 0; d < docs; d++) {
        len = 5 + (d * 37) % span; line = "{\"text\": \"";
        for (k = 0; k < len; k++) line = line (k ? " " : "") (base + 1000 * d + k);
        print line "\"}" } }' > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type NullTokenizer --vocab-size 1000000 --append-eod >"$WORK/pre.out" 2>&1 &&
    "$top_builddir/app/convert_corpus" --input "$WORK/$1_text_document.h5" --output-prefix "$WORK/$1" --to mmap \
        >"$WORK/conv.out" 2>&1
    ok $? "corpus $1: $2 documents as Megatron .bin/.idx"
}
prepare a 300 0 60
prepare b 200 400000 90

SEQ=16
MODEL="--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length $SEQ --micro-batch-size 1
       --global-batch-size 4 --lr 0 --tokenizer-type NullTokenizer --vocab-size 1000001 --seed 1234"
# ours SPAN DIR FLAGS... : pretrain_gpt --print-sample with --data-cache-path DIR (2 ranks)
ours() {
    span=$1 dir=$2; shift 2
    timeout 300 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --print-sample "$span" --data-cache-path "$dir" "$@" \
        >"$WORK/ours.txt" 2>"$WORK/ours.err"
    status=$?
    grep -E '^(train|valid|test) ' "$WORK/ours.txt" > "$WORK/ours.samples"
    return $status
}
# reference TRAIN VALID SPAN DIR FLAGS... : Megatron's samples and cache files
reference() {
    train=$1 valid=$2 span=$3 dir=$4; shift 4
    "$PYTHON" "$REFERENCE" --seq-length $SEQ --seed 1234 --samples "$train" "$valid" 0 --print "$span" \
        --tokenizer-type NullTokenizer --vocab-size 1000001 --write-cache "$dir" "$@" >"$WORK/reference.txt" \
        2>"$WORK/reference.err" || cat "$WORK/reference.err"
}
# same_files OURS REF : every file Megatron's code wrote is in OURS under the same name with the
# same bytes (ours adds *-checksums.txt; printing the valid split builds the train one too)
same_files() {
    [ -n "$(ls "$2")" ] || return 1
    for f in $(ls "$2"); do
        cmp "$1/$f" "$2/$f" >"$WORK/cmp.out" 2>&1 || { sed 's/^/# /' "$WORK/cmp.out"; return 1; }
    done
}

# 1. one corpus, two epochs (a separate final epoch), the train split
P=$("$PYTHON" "$REFERENCE" --seq-length $SEQ --seed 1234 --samples 1 1 1 --print train:0 --length \
    --data-path "$WORK/a" --split 969,30,1)
N=$(( 2 * P + P / 10 ))
reference $N 0 train:0-9 "$WORK/ref1" --data-path "$WORK/a" --split 969,30,1
ours train:0-9 "$WORK/ours1" --data-path "$WORK/a" --split 969,30,1 --train-samples $N --eval-iters 0
ok $? "pretrain_gpt builds and writes the cache of one corpus ($N samples)"
cmp -s "$WORK/ours.samples" "$WORK/reference.txt"
ok $? "... and its samples are Megatron's"
same_files "$WORK/ours1" "$WORK/ref1"
ok $? "... in Megatron's files: $(ls "$WORK/ref1" | sed 's/^[0-9a-f]*-//' | tr '\n' ' ')(same MD5 names, same bytes)"
grep -q '"split": "969,30,1"' "$WORK"/ref1/*-description.txt && ls "$WORK"/ours1/*-GPTDataset-train-checksums.txt >/dev/null 2>&1
ok $? "... plus our XXH3 list (*-checksums.txt), which Megatron ignores"

# 2. a weighted three-way blend (floats in the description), and the validation split
reference 120 0 train:0-9 "$WORK/ref2" --data-path 2 "$WORK/a" 1 "$WORK/b" 1.5 "$WORK/a" --split 98,2,0
ours train:0-9 "$WORK/ours2" --data-path 2 "$WORK/a" 1 "$WORK/b" 1.5 "$WORK/a" --split 98,2,0 --train-samples 120 --eval-iters 0
cmp -s "$WORK/ours.samples" "$WORK/reference.txt" && same_files "$WORK/ours2" "$WORK/ref2"
ok $? "a weighted blend: the same GPTDataset and BlendedDataset files as Megatron's ($(ls "$WORK/ref2" | wc -l) files)"
reference 40 60 valid:0-9 "$WORK/ref3" --data-path "$WORK/a" --split 90,5,5
ours valid:0-9 "$WORK/ours3" --data-path "$WORK/a" --split 90,5,5 --train-samples 40 --eval-interval 5 --eval-iters 5
cmp -s "$WORK/ours.samples" "$WORK/reference.txt" && same_files "$WORK/ours3" "$WORK/ref3"
ok $? "the validation split: the same files as Megatron's"
reference 100 0 train:0-9 "$WORK/ref4" --train-data-path 0.5 "$WORK/a" 0.5 "$WORK/b"
ours train:0-9 "$WORK/ours4" --train-data-path 0.5 "$WORK/a" 0.5 "$WORK/b" --train-samples 100 --eval-iters 0
cmp -s "$WORK/ours.samples" "$WORK/reference.txt" && same_files "$WORK/ours4" "$WORK/ref4"
ok $? "per-split data paths (split and split_matrix null): the same files as Megatron's"

# 3. a cache Megatron wrote (no checksum list) is loaded, range-checked, then checksummed
cp -r "$WORK/ref1" "$WORK/adopt"
ours train:0-9 "$WORK/adopt" --data-path "$WORK/a" --split 969,30,1 --train-samples $N --eval-iters 0
status=$?
reference $N 0 train:0-9 "$WORK/unused" --data-path "$WORK/a" --split 969,30,1
[ $status -eq 0 ] && cmp -s "$WORK/ours.samples" "$WORK/reference.txt" && ! grep -q warning "$WORK/ours.err" &&
    ls "$WORK"/adopt/*-GPTDataset-train-checksums.txt >/dev/null 2>&1 && same_files "$WORK/adopt" "$WORK/ref1"
ok $? "a cache written by Megatron is used as it is (same samples, files unchanged) and gets a checksum list"
# a Megatron cache whose shuffle index points outside the samples is refused by the range check
cp -r "$WORK/ref1" "$WORK/bad"
f=$(ls "$WORK"/bad/*-shuffle_index.npy)
printf '\377\377\377\177' | dd of="$f" bs=1 seek=128 conv=notrunc 2>/dev/null
ours train:0-9 "$WORK/bad" --data-path "$WORK/a" --split 969,30,1 --train-samples $N --eval-iters 0
[ $? -eq 0 ] && cmp -s "$WORK/ours.samples" "$WORK/reference.txt" && grep -q "shuffle_index.*outside" "$WORK/ours.err" &&
    same_files "$WORK/bad" "$WORK/ref1"
ok $? "an unchecksummed cache with an out-of-range value is rebuilt (the warning names the array)"

# 4. a damaged .npy of ours: the XXH3 mismatch names the file, the indices are rebuilt
f=$(ls "$WORK"/ours1/*-GPTDataset-train-document_index.npy)
printf '\001' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
ours train:0-9 "$WORK/ours1" --data-path "$WORK/a" --split 969,30,1 --train-samples $N --eval-iters 0
[ $? -eq 0 ] && cmp -s "$WORK/ours.samples" "$WORK/reference.txt" &&
    grep -q "warning: index cache unusable: checksum mismatch in $f" "$WORK/ours.err" && same_files "$WORK/ours1" "$WORK/ref1"
ok $? "a changed byte in document_index.npy: one warning naming it, rebuilt, the same samples"
grep "checksum mismatch" "$WORK/ours.err" | head -1 | cut -c1-200 | sed 's/^/# /'
# a corpus changed under the same name: the checksum list's content hash catches it
mv "$WORK/a.bin" "$WORK/a.bin.orig" && mv "$WORK/a.idx" "$WORK/a.idx.orig"
cp "$WORK/b.bin" "$WORK/a.bin" && cp "$WORK/b.idx" "$WORK/a.idx"
ours train:0-3 "$WORK/ours1" --data-path "$WORK/a" --split 969,30,1 --train-samples $N --eval-iters 0
grep -q "built from other corpus contents" "$WORK/ours.err"
ok $? "a corpus replaced under the same prefix: the cache is not reused (other corpus contents)"
mv "$WORK/a.bin.orig" "$WORK/a.bin" && mv "$WORK/a.idx.orig" "$WORK/a.idx"

# 5. without --data-cache-path: Megatron's default directory <prefix>/cache/GPTDataset_indices
timeout 300 "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --print-sample train:0-9 --data-path "$WORK/a" --split 969,30,1 \
    --train-samples $N --eval-iters 0 > "$WORK/default.txt" 2>&1
grep -E '^train ' "$WORK/default.txt" > "$WORK/default.samples"
reference $N 0 train:0-9 "$WORK/unused2" --data-path "$WORK/a" --split 969,30,1
cmp -s "$WORK/default.samples" "$WORK/reference.txt" && ls "$WORK"/a/cache/GPTDataset_indices/*-GPTDataset-train-shuffle_index.npy >/dev/null 2>&1
ok $? "no --data-cache-path: the indices go to Megatron's default <prefix>/cache/GPTDataset_indices"
done_testing
