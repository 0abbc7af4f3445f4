#!/bin/sh
# corpus_check_test.sh: untrusted corpora and inputs are refused at the door (io/corpus_check.h,
# app/preprocess_data.c, app/core/options.c):
#  - a corpus holding an id outside the model's vocabulary (HDF5 with max_token_id, or Megatron
#    .bin/.idx scanned once and cached in FILE.checked) is refused naming the file and the
#    document; a good .bin is scanned once, then read from the cache;
#  - an HDF5 corpus whose tokens changed after writing fails its checksum (--no-verify-checksums
#    trusts the metadata); an empty corpus gets its own message;
#  - preprocess_data exits non-zero when it writes no document (a binary file, JSONL without the
#    key) or when bad lines pass --max-bad-fraction; --args-file naming a folder is refused;
#  - a model that cannot fit in memory stops before allocating (app/training/memory_estimate.h).
. "${top_srcdir:-.}/tests/lib.sh"
PREPROCESS="$top_builddir/app/preprocess_data"
CONVERT="$top_builddir/app/convert_corpus"
POKE="$top_builddir/tests/tools/h5_poke"

# make_corpus DOCS BAD_DOC BAD_ID: NullTokenizer text, ids below 200 except one id in BAD_DOC
make_corpus() {
    awk -v docs="$1" -v bad="$2" -v id="$3" 'BEGIN { for (d = 0; d < docs; d++) {
        line = "{\"text\": \""; for (k = 0; k < 40; k++) line = line (k ? " " : "") ((d == bad && k == 5) ? id : (d * 7 + k) % 200);
        print line "\"}" } }'
}
preprocess() {  # preprocess VOCAB INPUT PREFIX [FLAGS...]
    vocab=$1 input=$2 prefix=$3; shift 3
    timeout 120 "$MPIEXEC" -n 2 "$PREPROCESS" --input "$input" --output-prefix "$prefix" --tokenizer-type NullTokenizer \
        --vocab-size "$vocab" "$@" > "$WORK/pre.out" 2> "$WORK/pre.err"
}
make_corpus 60 -1 0 > "$WORK/good.jsonl"
make_corpus 60 7 700 > "$WORK/wide.jsonl"
preprocess 255 "$WORK/good.jsonl" "$WORK/good"; ok $? "preprocess a good corpus (ids < 255)"
preprocess 1000 "$WORK/wide.jsonl" "$WORK/wide"; ok $? "preprocess a corpus with id 700 in document 7 (vocabulary 1000)"
h5dump -a /max_token_id "$WORK/wide_text_document.h5" | grep -q "(0): 700"
ok $? "the corpus metadata records the largest id (700)"

DATA="--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 2
      --global-batch-size 4 --train-iters 2 --lr 1e-3 --lr-warmup-iters 1 --eval-iters 0 --split 90,10,0
      --tokenizer-type NullTokenizer --vocab-size 255"
run_app 2 $DATA --data-path "$WORK/good_text_document"
ok $? "training on the good corpus"
run_app 2 $DATA --data-path "$WORK/wide_text_document"
status=$?; diag "$(grep -m1 error "$WORK/err")"
[ $status -ne 0 ] && grep -q "wide_text_document.h5: document 7 (token 5 of it) has id 700, outside the vocabulary \[0, 256)" "$WORK/err"
ok $? "an HDF5 corpus with an id outside the vocabulary is refused naming the file and document 7"

"$CONVERT" --input "$WORK/wide_text_document.h5" --output-prefix "$WORK/wide_mm" --to mmap > /dev/null &&
    "$CONVERT" --input "$WORK/good_text_document.h5" --output-prefix "$WORK/good_mm" --to mmap > /dev/null
ok $? "both corpora as Megatron .bin/.idx"
run_app 2 $DATA --data-path "$WORK/wide_mm"
status=$?
[ $status -ne 0 ] && grep -q "wide_mm.bin: document 7 (token 5 of it) has id 700" "$WORK/err" && [ -f "$WORK/wide_mm.bin.checked" ]
ok $? "a .bin with an id outside the vocabulary is refused naming document 7 (and the scan is cached)"
run_app 2 $DATA --data-path "$WORK/good_mm"
status=$?
[ $status -eq 0 ] && grep -q "good_mm.bin: scanned .* tokens once (largest id 199); cached" "$WORK/out"
ok $? "a good .bin is scanned once: $(grep -o 'scanned [0-9]* tokens once (largest id [0-9]*)' "$WORK/out")"
run_app 2 $DATA --data-path "$WORK/good_mm"
[ $? -eq 0 ] && ! grep -q "scanned" "$WORK/out"
ok $? "... and the next run reads the cache instead"
touch "$WORK/good_mm.bin"
run_app 2 $DATA --data-path "$WORK/good_mm"
grep -q "scanned" "$WORK/out"
ok $? "... which a changed .bin invalidates"

cp "$WORK/good_text_document.h5" "$WORK/rotten.h5"
"$POKE" "$WORK/rotten.h5" /tokens 1234 u16:3
run_app 2 $DATA --data-path "$WORK/rotten.h5"
status=$?; diag "$(grep -m1 error "$WORK/err")"
[ $status -ne 0 ] && grep -q "rotten.h5: /tokens \[[0-9]*, [0-9]*) do not match their checksum" "$WORK/err"
ok $? "an HDF5 corpus whose tokens changed after writing fails its checksum"
run_app 2 $DATA --data-path "$WORK/rotten.h5" --no-verify-checksums
ok $? "--no-verify-checksums trains on it (the metadata's largest id is in range)"

# an empty Megatron corpus: magic, version 1, dtype uint16, 0 sequences, 1 document index (0)
printf 'MMIDIDX\000\000\001\000\000\000\000\000\000\000\010\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$WORK/empty.idx"
: > "$WORK/empty.bin"
run_app 2 $DATA --data-path "$WORK/empty"
status=$?; diag "$(grep -m1 error "$WORK/err")"
[ $status -ne 0 ] && grep -q "empty.bin: the corpus holds no documents" "$WORK/err"
ok $? "an empty corpus gets its own message"

# preprocess_data refuses to write a corpus of nothing
head -c 3000 "$PRETRAIN_GPT" > "$WORK/binary.jsonl"
preprocess 255 "$WORK/binary.jsonl" "$WORK/bin"
status=$?; diag "$(grep error "$WORK/pre.err" | tail -1)"
[ $status -ne 0 ] && grep -q "no document to write" "$WORK/pre.err" && [ ! -e "$WORK/bin_text_document.h5" ]
ok $? "preprocess_data on a binary file exits non-zero and writes nothing"
sed 's/"text"/"body"/' "$WORK/good.jsonl" > "$WORK/nokey.jsonl"
preprocess 255 "$WORK/nokey.jsonl" "$WORK/nokey"
[ $? -ne 0 ] && grep -q 'no document to write: of 60 non-blank input lines, 60 are bad' "$WORK/pre.err"
ok $? "preprocess_data on JSONL that lacks the key exits non-zero"
{ head -45 "$WORK/good.jsonl"; sed 's/"text"/"body"/' "$WORK/good.jsonl" | head -5; } > "$WORK/some_bad.jsonl"
preprocess 255 "$WORK/some_bad.jsonl" "$WORK/some_bad" --max-bad-fraction 0.05
[ $? -ne 0 ] && grep -q "5 of 50 non-blank input lines are bad (10.00%), more than --max-bad-fraction 0.05" "$WORK/pre.err"
ok $? "10% bad lines pass --max-bad-fraction 0.05: exit non-zero"
preprocess 255 "$WORK/some_bad.jsonl" "$WORK/some_bad" --max-bad-fraction 0.2
ok $? "... and are accepted under --max-bad-fraction 0.2"

# an impossible model stops before allocating, with the estimate and what is available
run_app 2 --args-file "$TINY_ARGS" --seq-length 999999999 --max-position-embeddings 999999999 --train-iters 1 --lr-warmup-iters 0
status=$?; diag "$(grep error "$WORK/err" | cut -c1-200)"
[ $status -ne 0 ] && grep -q "this run needs about .* GiB per rank (parameters and gradients .*) but .* GiB of host memory is available per rank" "$WORK/err" &&
    ! grep -q "out of memory" "$WORK/err"
ok $? "--seq-length 999999999 stops before allocating, giving both figures"
run_app 2 --args-file "$TINY_ARGS" --hidden-size 1000000 --train-iters 1 --lr-warmup-iters 0
[ $? -ne 0 ] && grep -q "this run needs about [0-9.]* GiB per rank (parameters and gradients [0-9.]* GiB" "$WORK/err"
ok $? "--hidden-size 1000000 too"

run_app 1 --args-file "$WORK" --mock-data
[ $? -ne 0 ] && grep -q "args file '$WORK' is a directory" "$WORK/err"
ok $? "--args-file naming a folder is refused"

done_testing
