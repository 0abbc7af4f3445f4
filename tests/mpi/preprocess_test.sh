#!/bin/sh
# tests/mpi/preprocess_test.sh: preprocess_data and convert_corpus end to end. The same inputs
# (tinyshakespeare as JSON lines with a bad line in the middle, a gzip file, a file of bad
# cases) give identical corpora on 1, 2 and 3 ranks; bad lines are reported with file and line;
# decode(encode(text)) == text through the corpus; HDF5 <-> .bin/.idx round trips are exact.
. "${top_srcdir:-.}/tests/lib.sh"
PREPROCESS="$top_builddir/app/preprocess_data"
CONVERT="$top_builddir/app/convert_corpus"
TOOL="$top_builddir/tests/tools/corpus_tool"
TEXT="$top_srcdir/configs/data/tinyshakespeare.txt"
GPT2="$top_srcdir/configs/tokenizers/gpt2"
GPT2_FLAGS="--tokenizer-type GPT2BPETokenizer --vocab-file $GPT2/vocab.json --merge-file $GPT2/merges.txt"

preprocess() {  # preprocess NRANKS ARGS... ; output in $WORK/out, $WORK/err
    n=$1; shift
    timeout 120 "$MPIEXEC" -n "$n" "$PREPROCESS" "$@" >"$WORK/out" 2>"$WORK/err"
}
same_digest() {  # same_digest A B : tokens and offsets identical
    "$TOOL" digest "$1" | grep -v '^type' > "$WORK/d1" && "$TOOL" digest "$2" | grep -v '^type' > "$WORK/d2" &&
        cmp -s "$WORK/d1" "$WORK/d2"
}

# inputs: 220 KB of plays with one malformed line in the middle, 80 KB gzip, bad cases
head -n 4000 "$TEXT" > "$WORK/part1a.txt"; sed -n '4001,8000p' "$TEXT" > "$WORK/part1b.txt"
sed -n '8001,11000p' "$TEXT" > "$WORK/part2.txt"
"$TOOL" make-jsonl "$WORK/part1a.txt" "$WORK/p1a.jsonl" 2000
"$TOOL" make-jsonl "$WORK/part1b.txt" "$WORK/p1b.jsonl" 2000
bad_line=$(($(wc -l < "$WORK/p1a.jsonl") + 1))
{ cat "$WORK/p1a.jsonl"; echo '{"text": "a line cut short'; cat "$WORK/p1b.jsonl"; } > "$WORK/part1.jsonl"
"$TOOL" make-jsonl "$WORK/part2.txt" "$WORK/part2.jsonl" 2000
gzip -c "$WORK/part2.jsonl" > "$WORK/part2.jsonl.gz"
{
    echo '{"text": "A good document."}'
    echo '{"text": "unterminated'
    echo '{"title": "no text key"}'
    echo '{"text": ""}'
    printf '{"text": "raw bytes \377\376 and \300 here"}\n'
    echo '{"text": 42}'
    echo ''
    echo '{"text": "Another good one.", "id": 7}'
} > "$WORK/bad.jsonl"
INPUTS="$WORK/part1.jsonl $WORK/part2.jsonl.gz $WORK/bad.jsonl"

for n in 1 2 3; do
    preprocess $n --input $INPUTS --output-prefix "$WORK/r$n" $GPT2_FLAGS --append-eod --log-interval 50
    ok $? "preprocess on $n rank(s)" || sed 's/^/# /' "$WORK/err"
    cp "$WORK/err" "$WORK/err.$n"
    grep -q "part1.jsonl:$bad_line: malformed JSON" "$WORK/err"
    ok $? "$n rank(s): malformed line reported at part1.jsonl:$bad_line"
done
grep '^Processed' "$WORK/out" | head -1 | sed 's/^/# /'
grep '^> done' "$WORK/out" | sed 's/^/# /'
same_digest "$WORK/r1_text_document.h5" "$WORK/r2_text_document.h5"; ok $? "1 and 2 ranks give identical tokens and offsets"
same_digest "$WORK/r1_text_document.h5" "$WORK/r3_text_document.h5"; ok $? "1 and 3 ranks give identical tokens and offsets"
cmp -s "$WORK/err.1" "$WORK/err.3"; ok $? "1 and 3 ranks give identical bad-input reports"
sed 's/^/# /' "$WORK/err.1"
grep -q "bad.jsonl:2: malformed JSON" "$WORK/err.1"; ok $? "malformed JSON reported with file and line"
grep -q "bad.jsonl:3: missing key \"text\"" "$WORK/err.1"; ok $? "missing key reported with file and line"
grep -q 'malformed JSON 2, missing key 1, value not a string 1' "$WORK/err.1"; ok $? "bad lines counted by kind"
grep -q 'skipped: 1 empty documents, 1 blank lines, 4 bad lines' "$WORK/out"; ok $? "empty document and blank line counted"
h5dump -H "$WORK/r1_text_document.h5" | grep -q 'DATASET "tokens"'; ok $? "h5dump reads the corpus"

# invalid UTF-8 goes through byte-level BPE and decodes back to the same bytes
printf '{"text": "raw bytes \377\376 and \300 here"}\n' > "$WORK/utf8.jsonl"
preprocess 1 --input "$WORK/utf8.jsonl" --output-prefix "$WORK/utf8" $GPT2_FLAGS
    "$TOOL" decode "$WORK/utf8_text_document.h5" GPT2BPETokenizer "$GPT2/vocab.json" "$GPT2/merges.txt" "$WORK/utf8.txt"
printf 'raw bytes \377\376 and \300 here' > "$WORK/utf8.expected"
cmp -s "$WORK/utf8.txt" "$WORK/utf8.expected"; ok $? "invalid UTF-8 bytes survive encode and decode"

# gzip input gives the same corpus as the plain file
preprocess 1 --input "$WORK/part2.jsonl" --output-prefix "$WORK/plain" $GPT2_FLAGS
preprocess 2 --input "$WORK/part2.jsonl.gz" --output-prefix "$WORK/gz" $GPT2_FLAGS
same_digest "$WORK/plain_text_document.h5" "$WORK/gz_text_document.h5"; ok $? "gzip input equals plain input"

# decode(encode(x)) == x for the whole of tinyshakespeare, through the corpus, on 2 ranks
"$TOOL" make-jsonl "$TEXT" "$WORK/all.jsonl" 3000
preprocess 2 --input "$WORK/all.jsonl" --output-prefix "$WORK/all" $GPT2_FLAGS --append-eod
ok $? "preprocess all of tinyshakespeare on 2 ranks"
"$TOOL" decode "$WORK/all_text_document.h5" GPT2BPETokenizer "$GPT2/vocab.json" "$GPT2/merges.txt" "$WORK/all.txt"
cmp -s "$WORK/all.txt" "$TEXT"; ok $? "every document decodes back to its text (1.1 MB)"

# HDF5 -> .bin/.idx -> HDF5 is exact, and the .idx is Megatron's layout
"$CONVERT" --input "$WORK/r1_text_document.h5" --output-prefix "$WORK/mm" --to mmap >/dev/null &&
    "$CONVERT" --input "$WORK/mm" --output-prefix "$WORK/back" --to hdf5 >/dev/null
ok $? "convert to .bin/.idx and back"
same_digest "$WORK/r1_text_document.h5" "$WORK/back.h5"; ok $? "round trip gives identical tokens and offsets"
docs=$("$TOOL" digest "$WORK/r1_text_document.h5" | awk '/^documents/ {print $2}')
tokens=$("$TOOL" digest "$WORK/r1_text_document.h5" | awk '/^tokens/ {print $2}')
header=$(od -A n -t x1 -N 18 "$WORK/mm.idx" | tr -d ' \n')
[ "$header" = "4d4d49444944580000010000000000000008" ]
ok $? ".idx starts with MMIDIDX\\0\\0, version 1, dtype 8 (uint16) ($header)"
[ "$(wc -c < "$WORK/mm.idx")" -eq $((34 + 12 * docs + 8 * (docs + 1))) ] && [ "$(wc -c < "$WORK/mm.bin")" -eq $((2 * tokens)) ]
ok $? ".idx and .bin sizes match $docs documents and $tokens tokens"

# sentences (BERT): identical on 1 and 3 ranks, and through .bin/.idx and back
BERT_FLAGS="--tokenizer-type BertWordPieceLowerCase --vocab-file $top_srcdir/tests/data/wordpiece-vocab.txt"
preprocess 1 --input "$WORK/part2.jsonl" --output-prefix "$WORK/s1" $BERT_FLAGS --split-sentences --append-eod
ok $? "preprocess --split-sentences with BERT WordPiece" || sed 's/^/# /' "$WORK/err"
preprocess 3 --input "$WORK/part2.jsonl" --output-prefix "$WORK/s3" $BERT_FLAGS --split-sentences --append-eod
same_digest "$WORK/s1_text_sentence.h5" "$WORK/s3_text_sentence.h5"; ok $? "sentence corpus identical on 1 and 3 ranks"
"$TOOL" digest "$WORK/s1_text_sentence.h5" | grep '^sentences' | sed 's/^/# /'
"$CONVERT" --input "$WORK/s1_text_sentence.h5" --output-prefix "$WORK/smm" --to mmap >/dev/null &&
    "$CONVERT" --input "$WORK/smm.idx" --output-prefix "$WORK/sback" --to hdf5 >/dev/null
same_digest "$WORK/s1_text_sentence.h5" "$WORK/sback.h5"; ok $? "sentence corpus round trip through .bin/.idx is exact"

# refusals
preprocess 1 --input "$WORK/bad.jsonl" --output-prefix "$WORK/strict" $GPT2_FLAGS --strict
[ $? -ne 0 ] && grep -q -- '--strict: 1 bad input line' "$WORK/err" && [ ! -e "$WORK/strict_text_document.h5" ]
ok $? "--strict stops on bad lines and writes nothing"
preprocess 1 --input "$WORK/bad.jsonl" --output-prefix "$WORK/r1" $GPT2_FLAGS
[ $? -ne 0 ] && grep -q 'r1_text_document.h5 already exists; pass --overwrite' "$WORK/err"
ok $? "an existing output is kept unless --overwrite"
preprocess 1 --input "$WORK/bad.jsonl" --output-prefix "$WORK/r1" $GPT2_FLAGS --overwrite
ok $? "--overwrite replaces it"
preprocess 2 --input "$WORK/bad.jsonl" --output-prefix "$WORK/w" $GPT2_FLAGS --workers 4
[ $? -ne 0 ] && grep -q -- '--workers 4, but running on 2 MPI ranks' "$WORK/err"
ok $? "--workers different from the rank count is refused: $(head -1 "$WORK/err")"
preprocess 1 --input "$WORK/missing.jsonl" --output-prefix "$WORK/m" $GPT2_FLAGS
[ $? -ne 0 ] && grep -q 'missing.jsonl: not a readable file' "$WORK/err"
ok $? "missing input named"
done_testing
