#!/bin/sh
# tests/mpi/dataset_test.sh: prepares two NullTokenizer corpora (HDF5 and .bin/.idx) and runs
# tests/dataset_test on 1, 2 and 4 MPI ranks: sample i must be the same whatever the rank
# count; also the error messages for damaged .idx/.bin and HDF5 files.
. "${top_srcdir:-.}/tests/lib.sh"
PREPROCESS="$top_builddir/app/preprocess_data"
CONVERT="$top_builddir/app/convert_corpus"
TEST="$top_builddir/tests/mpi/dataset_test"

# document d has tokens 1000 d + k (k < its length); corpus b starts at 500000
make_corpus() {  # make_corpus DOCS BASE > file.jsonl
    awk -v docs="$1" -v base="$2" 'BEGIN { for (d = 0; d < docs; d++) {
        len = 20 + (d * 37) % 150; line = "{\"text\": \"";
        for (k = 0; k < len; k++) line = line (k ? " " : "") (base + 1000 * d + k);
        print line "\"}" } }'
}
make_corpus 300 0 > "$WORK/a.jsonl"
make_corpus 200 500000 > "$WORK/b.jsonl"
for c in a b; do
    "$MPIEXEC" -n 1 "$PREPROCESS" --input "$WORK/$c.jsonl" --output-prefix "$WORK/$c" \
        --tokenizer-type NullTokenizer --vocab-size 1000000 >"$WORK/pre.out" 2>&1
    ok $? "preprocess corpus $c (NullTokenizer)" || cat "$WORK/pre.out"
done
"$CONVERT" --input "$WORK/a_text_document.h5" --output-prefix "$WORK/a_mmap" --to mmap >/dev/null
ok $? "convert corpus a to .bin/.idx"

for n in 1 2 4; do
    timeout 120 "$MPIEXEC" -n "$n" "$TEST" "$WORK" >"$WORK/test.$n.out" 2>&1
    status=$?
    ok $status "dataset_test on $n rank(s): $(grep -c '^ok' "$WORK/test.$n.out") checks passed"
    [ $status -eq 0 ] || sed 's/^/# /' "$WORK/test.$n.out"
done
cmp -s "$WORK/samples.1.txt" "$WORK/samples.2.txt"; ok $? "samples identical on 1 and 2 ranks"
cmp -s "$WORK/samples.1.txt" "$WORK/samples.4.txt"; ok $? "samples identical on 1 and 4 ranks"
diag "$(wc -l < "$WORK/samples.1.txt") sample hashes compared"

# damaged inputs: each gives a message naming the file and the problem
expect_error() {  # expect_error DESCRIPTION PATTERN PREFIX
    timeout 60 "$MPIEXEC" -n 1 "$TEST" open "$3" >"$WORK/err.out" 2>&1
    status=$?
    [ $status -ne 0 ] && grep -q "$2" "$WORK/err.out"
    ok $? "$1: $(grep -m1 'error' "$WORK/err.out")"
}
cp "$WORK/a_mmap.bin" "$WORK/magic.bin"; cp "$WORK/a_mmap.idx" "$WORK/magic.idx"
printf 'XXXXXXX' | dd of="$WORK/magic.idx" bs=1 conv=notrunc 2>/dev/null
expect_error "wrong .idx magic" "magic.idx: not a Megatron index file (wrong magic" "$WORK/magic"
cp "$WORK/a_mmap.bin" "$WORK/version.bin"; cp "$WORK/a_mmap.idx" "$WORK/version.idx"
printf '\002' | dd of="$WORK/version.idx" bs=1 seek=9 conv=notrunc 2>/dev/null
expect_error "wrong .idx version" "version.idx: index version 2" "$WORK/version"
cp "$WORK/a_mmap.idx" "$WORK/short.idx"; head -c 1000 "$WORK/a_mmap.bin" > "$WORK/short.bin"
expect_error ".bin shorter than the .idx says" "short.bin: is 1000 bytes but" "$WORK/short"
head -c 100 "$WORK/a_mmap.idx" > "$WORK/cut.idx"; cp "$WORK/a_mmap.bin" "$WORK/cut.bin"
expect_error "truncated .idx" "cut.idx: header says" "$WORK/cut"
head -c 3000 "$WORK/a_text_document.h5" > "$WORK/trunc.h5"
expect_error "truncated HDF5 corpus" "trunc.h5: HDF5 cannot open it" "$WORK/trunc"
printf 'not hdf5 at all' > "$WORK/foreign.h5"
expect_error "foreign file named .h5" "foreign.h5: not an HDF5 file" "$WORK/foreign"
expect_error "missing corpus" "neither .*nothing.h5 nor" "$WORK/nothing"
done_testing
