#!/bin/sh
# tests/mpi/t5_samples_test.sh: the T5 training samples equal Megatron-Core's
# T5MaskedWordPieceDataset's, field for field (text_enc, text_dec, labels, loss_mask, enc_mask,
# dec_mask, truncated) and the b1ss attention masks of --transformer-impl local.
# tests/tools/megatron_t5_samples.py is an independent reference that follows
# megatron/core/datasets (t5_dataset.py, masked_dataset.py, helpers.cpp build_mapping) with
# numpy.random.RandomState (its geometric span lengths included); tests/tools/t5_samples prints
# the same samples from the C pipeline (app/data/t5_dataset.c). Corpora: sentence-split WordPiece
# text with multi-piece words, the same not split (one sentence per document), and a corpus
# written directly with [PAD], [CLS], [SEP] ids and "##" pieces anywhere (the candidate and
# span edge cases); configurations: several epochs, our HDF5 corpus, other masking and
# short-sequence rates, a weighted blend with its validation split on two ranks; the index
# cache file for file. Any differing value fails.
. "${top_srcdir:-.}/tests/lib.sh"
REFERENCE="$top_srcdir/tests/tools/megatron_t5_samples.py"
TOOL="$top_builddir/tests/tools/t5_samples"
VOCAB="$top_srcdir/tests/data/wordpiece-vocab.txt"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

# document d: 1 + 7d mod 6 sentences of words from the vocabulary (several split into pieces)
make_corpus() {  # make_corpus DOCS SPAN SALT > file.jsonl
    awk -v docs="$1" -v span="$2" -v salt="$3" 'BEGIN {
        n = split("the quick brown fox jumped over the lazy dog jumps unaffable tokenizer dataset " \
                  "resume alpha hello world data token cafe naive tokenizing is it a don", w, " ");
        for (d = 0; d < docs; d++) {
            ns = 1 + (d * 7) % 6; line = "{\"text\": \"";
            for (s = 0; s < ns; s++) {
                len = 2 + (d * 13 + s * 5 + salt) % span;
                for (k = 0; k < len; k++) line = line (k ? " " : "") w[1 + (d * 31 + s * 17 + k * 7 + k * k + salt) % n];
                line = line (s + 1 < ns ? ". " : ".") }
            print line "\"}" } }'
}
prepare() {  # prepare NAME DOCS SPAN SALT [--split-sentences]: NAME_text_KIND.h5 and NAME.bin/.idx
    kind=document; [ -n "$5" ] && kind=sentence
    make_corpus "$2" "$3" "$4" > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type BertWordPieceCase --vocab-file "$VOCAB" $5 >"$WORK/pre.out" 2>&1 &&
    "$top_builddir/app/convert_corpus" --input "$WORK/$1_text_$kind.h5" --output-prefix "$WORK/$1" --to mmap \
        >"$WORK/conv.out" 2>&1
    ok $? "corpus $1: $2 documents ($kind per row of the index), as Megatron .bin/.idx"
}
prepare a 200 23 0 --split-sentences
prepare b 150 40 3 --split-sentences
prepare docs 120 30 5

# a corpus written directly: ids drawn from the whole vocabulary file (61 tokens: [PAD] = 0,
# [CLS] = 2, [SEP] = 3, "##" pieces at the start of documents and after special ids)
"$PYTHON" - "$WORK/edge" <<'PY'
import struct, sys, numpy
rs = numpy.random.RandomState(7)
sentences, documents = [], [0]
for d in range(90):
    for s in range(1 + rs.randint(4)):
        sentences.append(rs.randint(0, 61, size=1 + rs.randint(30)).astype(numpy.int32))
    documents.append(len(sentences))
with open(sys.argv[1] + ".bin", "wb") as f:
    for s in sentences:
        f.write(s.tobytes())
lengths = numpy.array([len(s) for s in sentences], dtype=numpy.int32)
pointers = numpy.concatenate([[0], numpy.cumsum(lengths[:-1]) * 4]).astype(numpy.int64)
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
    f.write(struct.pack("<Q", len(sentences)) + struct.pack("<Q", len(documents)))
    f.write(lengths.tobytes() + pointers.tobytes() + numpy.array(documents, dtype=numpy.int64).tobytes())
PY
ok $? "corpus edge: 90 documents of random ids (special ids and pieces anywhere), as Megatron .bin/.idx"
# and 4 documents of one 2000-token sentence each (more masked spans than the 100 sentinels)
"$PYTHON" - "$WORK/long" <<'PY'
import struct, sys, numpy
rs = numpy.random.RandomState(3)
sentences = [rs.randint(5, 61, size=2000).astype(numpy.int32) for _ in range(4)]
with open(sys.argv[1] + ".bin", "wb") as f:
    for s in sentences:
        f.write(s.tobytes())
lengths = numpy.array([len(s) for s in sentences], dtype=numpy.int32)
pointers = (numpy.arange(4) * 8000).astype(numpy.int64)
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
    f.write(struct.pack("<Q", 4) + struct.pack("<Q", 5))
    f.write(lengths.tobytes() + pointers.tobytes() + numpy.arange(5, dtype=numpy.int64).tobytes())
PY

# compare NAME NRANKS SPLIT:FIRST-LAST TRAIN VALID TEST FLAGS... (the same flags to both; the
# C tool reads PREFIX or PREFIX_text_KIND.h5 as the flags name them, the reference PREFIX)
compare() {
    name=$1 n=$2 span=$3 train=$4 valid=$5 test=$6; shift 6
    timeout 300 "$MPIEXEC" -n "$n" "$TOOL" --samples "$train" "$valid" "$test" --print "$span" \
        --vocab-file "$VOCAB" "$@" >"$WORK/ours.txt" 2>"$WORK/ours.err"
    status=$?
    reference_flags=$(echo "$@" | sed 's/_text_\(sentence\|document\)\.h5//g')
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
# what the compared samples exercise: spans (sentinels 61 ..), truncated and padded samples
describe() {
    awk -F'|' '{ split($2, dec, " "); n = 0; for (k = 2; k <= length(dec); k++) if (dec[k] >= 61) n++
        spans += n; if (n > most) most = n; truncated += $7 ~ /truncated 1/
        split($5, enc, " "); padded += enc[length(enc)] == 0 }
        END { printf "# %d samples: %d masked spans (up to %d in one), %d truncated, %d padded\n",
              NR, spans, most, truncated, padded }' "$WORK/reference.txt"
}
epoch() {  # epoch SPLIT FLAGS...: samples of one epoch of the split (the reference's length)
    sp=$1; shift
    "$PYTHON" "$REFERENCE" --samples 1 1 1 --print "$sp:0" --length --vocab-file "$VOCAB" "$@"
}

BASE="--encoder-seq-length 48 --decoder-seq-length 24 --vocab-extra-ids 100 --seed 1234 --tokenizer-type BertWordPieceCase"
P=$(epoch train $BASE --data-path "$WORK/a" --split 969,30,1)
diag "corpus a, --encoder-seq-length 48: $P train samples per epoch"
many=$((2 * P + P / 3))
compare "one corpus, $many samples (3 epochs)" 1 "train:0-$((many - 1))" $many 0 0 \
    $BASE --data-path "$WORK/a" --split 969,30,1
describe
compare "the b1ss attention masks (--transformer-impl local)" 1 "train:0-59" 60 0 0 \
    $BASE --data-path "$WORK/a" --split 969,30,1 --attention-masks
compare "the HDF5 corpus (our format) gives the same samples" 1 "train:0-199" 200 0 0 \
    $BASE --data-path "$WORK/a_text_sentence.h5" --split 969,30,1
compare "--mask-prob 0.3, --short-seq-prob 0.5, --encoder-seq-length 64 --decoder-seq-length 48" 1 \
    "train:0-299" 300 0 0 --encoder-seq-length 64 --decoder-seq-length 48 --seed 77 \
    --data-path "$WORK/b" --split 969,30,1 --mask-prob 0.3 --short-seq-prob 0.5
describe
compare "a corpus not split into sentences (.bin/.idx)" 1 "train:0-149" 150 0 0 \
    $BASE --data-path "$WORK/docs" --split 969,30,1
compare "a corpus not split into sentences (HDF5)" 1 "train:0-149" 150 0 0 \
    $BASE --data-path "$WORK/docs_text_document.h5" --split 969,30,1
compare "[PAD], [CLS], [SEP] ids and pieces anywhere in the text" 1 "train:0-199" 200 0 0 \
    --encoder-seq-length 40 --decoder-seq-length 32 --seed 5 --data-path "$WORK/edge" --split 969,30,1 \
    --mask-prob 0.25
describe
compare "weighted blend, train" 2 "train:0-399" 400 40 0 \
    $BASE --data-path 0.3 "$WORK/a" 0.7 "$WORK/b" --split 90,10,0
compare "weighted blend, validation" 1 "valid:0-39" 400 40 0 \
    $BASE --data-path 0.3 "$WORK/a" 0.7 "$WORK/b_text_sentence.h5" --split 90,10,0

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
[ $files -eq 7 ] && [ $same -eq $files ] && cmp -s "$WORK/cached.txt" "$WORK/reference.txt" &&
    ls "$WORK/ours_cache" | grep -q 'T5MaskedWordPieceDataset-sample_index.npy'
ok $? "--data-cache-path: $same of the $files files Megatron writes (2 T5 datasets, a blend) equal ours byte for byte"
"$TOOL" --samples 300 0 0 --print train:0-299 --vocab-file "$VOCAB" $CACHE_FLAGS \
    --data-cache-path "$WORK/megatron_cache" > "$WORK/loaded.txt" 2>&1
cmp -s "$WORK/loaded.txt" "$WORK/reference.txt"
ok $? "a cache written by Megatron loads and gives the same samples"

# the comparison can fail: another seed on our side only
"$TOOL" --samples 50 0 0 --print train:0-49 --vocab-file "$VOCAB" $BASE --seed 1235 \
    --data-path "$WORK/a" > "$WORK/other.txt" 2>&1
"$PYTHON" "$REFERENCE" --samples 50 0 0 --print train:0-49 --vocab-file "$VOCAB" $BASE \
    --data-path "$WORK/a" > "$WORK/reference.txt"
[ -s "$WORK/other.txt" ] && ! cmp -s "$WORK/other.txt" "$WORK/reference.txt"
ok $? "--seed 1235 against the reference's 1234: the samples differ (the comparison can fail)"

# bad input: one clear message each (where Megatron's asserts stop, or its tokenizer has no sentinels)
expect_error() {  # expect_error DESCRIPTION PATTERN FLAGS...
    what=$1 pattern=$2; shift 2
    timeout 60 "$MPIEXEC" -n 1 "$TOOL" --print train:0-99 --samples 100 0 0 --vocab-file "$VOCAB" "$@" \
        >"$WORK/bad.out" 2>&1
    status=$?
    [ $status -ne 0 ] && grep -q "$pattern" "$WORK/bad.out"
    ok $? "$what: refused ($(grep -m1 error "$WORK/bad.out" | cut -c1-170))"
}
expect_error "--decoder-seq-length too short for the spans" "over --decoder-seq-length 4" \
    --encoder-seq-length 48 --decoder-seq-length 4 --data-path "$WORK/a"
expect_error "BertWordPieceLowerCase (no sentinel tokens in Megatron-Core)" "needs sentinel tokens" \
    --encoder-seq-length 48 --decoder-seq-length 24 --data-path "$WORK/a" --tokenizer-type BertWordPieceLowerCase
expect_error "--encoder-seq-length 3" "needs --encoder-seq-length >= 4" \
    --encoder-seq-length 3 --decoder-seq-length 24 --data-path "$WORK/a"
expect_error "more masked spans than sentinel tokens" "more than the tokenizer's 100 sentinel" \
    --encoder-seq-length 4096 --decoder-seq-length 4096 --mask-prob 0.5 --short-seq-prob 0 --data-path "$WORK/long"
{ cat "$VOCAB"; echo "<extra_id_0>"; } > "$WORK/with_sentinel.txt"
expect_error "a vocabulary that holds a sentinel itself" "line 62 holds <extra_id_0>" \
    --encoder-seq-length 48 --decoder-seq-length 24 --data-path "$WORK/a" --vocab-file "$WORK/with_sentinel.txt"
expect_error "--mask-prob 1 (Megatron asserts 0 < p < 1)" "needs --mask-prob in (0, 1)" \
    --encoder-seq-length 48 --decoder-seq-length 24 --data-path "$WORK/a" --mask-prob 1
done_testing
