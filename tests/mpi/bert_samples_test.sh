#!/bin/sh
# tests/mpi/bert_samples_test.sh: the BERT training samples equal Megatron-Core's
# BERTMaskedWordPieceDataset's, field for field (text, types, labels, padding mask, loss mask,
# is_random, truncated). tests/tools/megatron_bert_samples.py is an independent reference that
# follows megatron/core/datasets (bert_dataset.py, masked_dataset.py, helpers.cpp build_mapping)
# with numpy.random.RandomState; tests/tools/bert_samples prints the same samples from the C
# pipeline (app/data/bert_dataset.c). Sentence-split WordPiece corpora with multi-piece words
# (whole-word masking), one-sentence documents and a document with a sentence over 512 tokens
# (skipped); configurations: several epochs, our HDF5 corpus, no binary head with other masking
# and short-sequence rates, BertWordPieceCase's extra ids, a weighted blend with its validation
# split, per-split data paths, two ranks; the index cache file for file. Any differing value fails.
. "${top_srcdir:-.}/tests/lib.sh"
REFERENCE="$top_srcdir/tests/tools/megatron_bert_samples.py"
TOOL="$top_builddir/tests/tools/bert_samples"
VOCAB="$top_srcdir/tests/data/wordpiece-vocab.txt"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

# document d: 1 + 7d mod 6 sentences of words from the vocabulary (several split into pieces);
# with LONG set, document 3 gets a sentence of 600 words
make_corpus() {  # make_corpus DOCS SPAN SALT LONG > file.jsonl
    awk -v docs="$1" -v span="$2" -v salt="$3" -v long="$4" 'BEGIN {
        n = split("the quick brown fox jumped over the lazy dog jumps unaffable tokenizer dataset " \
                  "resume alpha hello world data token cafe naive tokenizing is it a don", w, " ");
        for (d = 0; d < docs; d++) {
            ns = 1 + (d * 7) % 6; line = "{\"text\": \"";
            for (s = 0; s < ns; s++) {
                len = 2 + (d * 13 + s * 5 + salt) % span;
                if (long && d == 3 && s == 1) len = 600;
                for (k = 0; k < len; k++) line = line (k ? " " : "") w[1 + (d * 31 + s * 17 + k * 7 + k * k + salt) % n];
                line = line (s + 1 < ns ? ". " : ".") }
            print line "\"}" } }'
}
prepare() {  # prepare NAME DOCS SPAN SALT LONG: NAME_text_sentence.h5 and NAME.bin/.idx
    make_corpus "$2" "$3" "$4" "$5" > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type BertWordPieceLowerCase --vocab-file "$VOCAB" --split-sentences >"$WORK/pre.out" 2>&1 &&
    "$top_builddir/app/convert_corpus" --input "$WORK/$1_text_sentence.h5" --output-prefix "$WORK/$1" --to mmap \
        >"$WORK/conv.out" 2>&1
    ok $? "corpus $1: $2 documents split into sentences, as Megatron .bin/.idx"
}
prepare a 200 23 0 1
prepare b 150 40 3 0

# compare NAME NRANKS SPLIT:FIRST-LAST TRAIN VALID TEST FLAGS... (the same flags to both; the
# C tool reads PREFIX or PREFIX_text_sentence.h5 as the flags name them, the reference PREFIX)
compare() {
    name=$1 n=$2 span=$3 train=$4 valid=$5 test=$6; shift 6
    timeout 300 "$MPIEXEC" -n "$n" "$TOOL" --samples "$train" "$valid" "$test" --print "$span" \
        --vocab-file "$VOCAB" "$@" >"$WORK/ours.txt" 2>"$WORK/ours.err"
    status=$?
    reference_flags=$(echo "$@" | sed 's/_text_sentence\.h5//g')
    "$PYTHON" "$REFERENCE" --samples "$train" "$valid" "$test" --print "$span" --vocab-file "$VOCAB" \
        $reference_flags >"$WORK/reference.txt" 2>"$WORK/reference.err" || { cat "$WORK/reference.err"; status=1; }
    lines=$(wc -l < "$WORK/reference.txt")
    [ $status -eq 0 ] && [ "$lines" -gt 0 ] && cmp -s "$WORK/ours.txt" "$WORK/reference.txt"
    ok $? "$name: $lines samples ($span) equal Megatron's on $n rank(s)"
    if ! cmp -s "$WORK/ours.txt" "$WORK/reference.txt"; then
        diff "$WORK/ours.txt" "$WORK/reference.txt" | head -4 | cut -c1-200 | sed 's/^/# /'
        tail -3 "$WORK/ours.err" | sed 's/^/# /'
    fi
}
# what the compared samples exercise: padded, truncated, swapped (is_random), kept or replaced
# masked tokens (a label whose text is neither [MASK] = 4 nor the label itself)
describe() {
    awk -F'|' '{ split($1, text, " "); split($3, labels, " "); split($4, pad, " ")
        padded += pad[length(pad)] == 0; swapped += $6 ~ /is_random 1/; truncated += $6 ~ /truncated 1/
        for (k = 2; k <= length(labels); k++) if (labels[k] >= 0 && labels[k] != 0) {
            masked++; t = text[k + 2]; if (t == 4) asmask++; else if (t == labels[k]) kept++; else other++ } }
        END { printf "# %d samples: %d padded, %d truncated, %d sentence pairs swapped; %d masked: " \
              "%d [MASK], %d kept, %d random\n", NR, padded, truncated, swapped, masked, asmask, kept, other }' "$WORK/reference.txt"
}
epoch() {  # epoch SPLIT FLAGS...: samples of one epoch of the split (the reference's length)
    sp=$1; shift
    "$PYTHON" "$REFERENCE" --samples 1 1 1 --print "$sp:0" --length --vocab-file "$VOCAB" "$@"
}

BASE="--seq-length 32 --seed 1234"
P=$(epoch train $BASE --data-path "$WORK/a" --split 969,30,1)
diag "corpus a, --seq-length 32: $P train samples per epoch"
many=$((2 * P + P / 3))
compare "one corpus, $many samples (3 epochs)" 1 "train:0-$((many - 1))" $many 0 0 \
    $BASE --data-path "$WORK/a" --split 969,30,1
describe
compare "the HDF5 corpus (our format) gives the same samples" 1 "train:0-199" 200 0 0 \
    $BASE --data-path "$WORK/a_text_sentence.h5" --split 969,30,1
compare "--bert-no-binary-head, --mask-prob 0.3, --short-seq-prob 0.5, --seq-length 48" 1 "train:0-299" 300 0 0 \
    --seq-length 48 --seed 77 --data-path "$WORK/a" --split 969,30,1 --bert-no-binary-head --mask-prob 0.3 \
    --short-seq-prob 0.5
describe
compare "BertWordPieceCase (100 extra ids among the random replacements)" 1 "train:0-199" 200 0 0 \
    $BASE --data-path "$WORK/b" --split 969,30,1 --tokenizer-type BertWordPieceCase
compare "weighted blend, train" 2 "train:0-399" 400 40 0 \
    $BASE --data-path 0.3 "$WORK/a" 0.7 "$WORK/b" --split 90,10,0
compare "weighted blend, validation" 1 "valid:0-39" 400 40 0 \
    $BASE --data-path 0.3 "$WORK/a" 0.7 "$WORK/b_text_sentence.h5" --split 90,10,0
compare "per-split data paths" 1 "valid:0-49" 100 50 0 \
    $BASE --train-data-path "$WORK/a" --valid-data-path 1 "$WORK/b" 2 "$WORK/a"

# the index cache: Megatron's file names and bytes (description, sample_index.npy, the blend's)
CACHE_FLAGS="$BASE --data-path 0.4 $WORK/a 0.6 $WORK/b --split 90,10,0"
timeout 300 "$MPIEXEC" -n 2 "$TOOL" --samples 300 0 0 --print train:0-299 --vocab-file "$VOCAB" $CACHE_FLAGS \
    --data-cache-path "$WORK/ours_cache" > "$WORK/cached.txt" 2>&1
"$PYTHON" "$REFERENCE" --samples 300 0 0 --print train:0-299 --vocab-file "$VOCAB" $CACHE_FLAGS \
    --write-cache "$WORK/megatron_cache" > "$WORK/reference.txt"
same=0 files=0
for f in "$WORK/megatron_cache"/*; do
    files=$((files + 1)); cmp -s "$f" "$WORK/ours_cache/${f##*/}" && same=$((same + 1))
done
[ $files -eq 7 ] && [ $same -eq $files ] && cmp -s "$WORK/cached.txt" "$WORK/reference.txt"
ok $? "--data-cache-path: $same of the $files files Megatron writes (2 BERT datasets, a blend) equal ours byte for byte"
"$TOOL" --samples 300 0 0 --print train:0-299 --vocab-file "$VOCAB" $CACHE_FLAGS \
    --data-cache-path "$WORK/megatron_cache" > "$WORK/loaded.txt" 2>&1
cmp -s "$WORK/loaded.txt" "$WORK/reference.txt" && ls "$WORK/megatron_cache" | grep -q 'BERTMaskedWordPieceDataset-checksums.txt'
ok $? "a cache written by Megatron loads (checked, checksums added) and gives the same samples"
"$PYTHON" - "$WORK/megatron_cache" <<'PY'
import glob, sys, numpy
for path in glob.glob(sys.argv[1] + "/*-BERTMaskedWordPieceDataset-sample_index.npy"):
    rows = numpy.load(path)
    rows[[0, 1]] = rows[[1, 0]]
    numpy.save(path, rows)
PY
rm -f "$WORK/megatron_cache"/*checksums.txt
"$TOOL" --samples 300 0 0 --print train:0-299 --vocab-file "$VOCAB" $CACHE_FLAGS \
    --data-cache-path "$WORK/megatron_cache" > "$WORK/swapped.txt" 2>&1
[ -s "$WORK/swapped.txt" ] && ! cmp -s "$WORK/swapped.txt" "$WORK/reference.txt"
ok $? "a cached sample index with two rows swapped is what the samples follow (the cache is read)"

# the comparison can fail: another seed on our side only
"$TOOL" --samples 50 0 0 --print train:0-49 --vocab-file "$VOCAB" --seq-length 32 --seed 1235 \
    --data-path "$WORK/a" > "$WORK/other.txt" 2>&1
"$PYTHON" "$REFERENCE" --samples 50 0 0 --print train:0-49 --vocab-file "$VOCAB" $BASE \
    --data-path "$WORK/a" > "$WORK/reference.txt"
[ -s "$WORK/other.txt" ] && ! cmp -s "$WORK/other.txt" "$WORK/reference.txt"
ok $? "--seed 1235 against the reference's 1234: the samples differ (the comparison can fail)"

# bad input: one clear message each
expect_error() {  # expect_error DESCRIPTION PATTERN FLAGS...
    what=$1 pattern=$2; shift 2
    timeout 60 "$MPIEXEC" -n 1 "$TOOL" --print train:0 --vocab-file "$VOCAB" $BASE "$@" >"$WORK/bad.out" 2>&1
    status=$?
    [ $status -ne 0 ] && grep -q "$pattern" "$WORK/bad.out"
    ok $? "$what: refused ($(grep -m1 error "$WORK/bad.out" | cut -c1-150))"
}
expect_error "an unweighted blend (Megatron's build_mapping cannot take num_samples None)" "unweighted blend" \
    --samples 10 0 0 --data-path "$WORK/a" "$WORK/b"
"$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/a.jsonl" --output-prefix "$WORK/doc" \
    --tokenizer-type BertWordPieceLowerCase --vocab-file "$VOCAB" >"$WORK/pre.out" 2>&1
expect_error "a corpus not split into sentences" "sentence-split corpus" \
    --samples 10 0 0 --data-path "$WORK/doc_text_document.h5"
"$top_builddir/app/convert_corpus" --input "$WORK/doc_text_document.h5" --output-prefix "$WORK/doc" --to mmap \
    >"$WORK/conv.out" 2>&1
expect_error "one sentence per document with the binary head" "yields no BERT sample" \
    --samples 10 0 0 --data-path "$WORK/doc"
head -4 "$VOCAB" > "$WORK/no_mask.txt"
expect_error "a vocabulary without [MASK]" "has no \[MASK\]" \
    --samples 10 0 0 --data-path "$WORK/a" --vocab-file "$WORK/no_mask.txt"
done_testing
