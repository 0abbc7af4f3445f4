#!/bin/sh
# perf/preprocess_bench.sh: throughput of preprocess_data (GPT-2 BPE) on a >= 200 MB JSONL corpus
# built from configs/data/tinyshakespeare.txt (documents of ~3000 characters, the corpus
# repeated until it reaches SIZE_MB), on 1 and 2 MPI ranks. Prints a markdown report (date,
# commit, machine, commands, MB/s of JSONL in total and per core) on stdout.
#   sh perf/preprocess_bench.sh [> perf/results/io/preprocess-$(date +%F).md]
# Environment: BENCH_DIR (default /tmp/mtc-preprocess-bench, kept out of the repository),
# SIZE_MB (default 200), RANKS (default "1 2"), MPIEXEC (default mpiexec).
# Caveat: a repeated text makes the BPE word cache unusually effective after the first copy.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${BENCH_DIR:-/tmp/mtc-preprocess-bench}
size_mb=${SIZE_MB:-200}
ranks=${RANKS:-1 2}
mpiexec=${MPIEXEC:-mpiexec}
gpt2="$top/configs/tokenizers/gpt2"
mkdir -p "$dir"

corpus="$dir/corpus-${size_mb}mb.jsonl"
if [ ! -s "$corpus" ]; then
    "$top/tests/corpus_tool" make-jsonl "$top/configs/data/tinyshakespeare.txt" "$dir/one.jsonl" 3000
    : > "$corpus.part"
    while [ "$(wc -c < "$corpus.part")" -lt $((size_mb * 1000000)) ]; do cat "$dir/one.jsonl" >> "$corpus.part"; done
    mv "$corpus.part" "$corpus"
fi
bytes=$(wc -c < "$corpus")

echo "# preprocess_data throughput, $(date +%F)"
echo
echo "- commit: $(cd "$top" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online"
echo "- corpus: $corpus, $bytes bytes, $(wc -l < "$corpus") JSON lines (tinyshakespeare in ~3000-character documents, repeated)"
echo "- tokenizer: GPT2BPETokenizer, --append-eod; output on the same file system as the input"
echo
echo "| ranks | wall s | tokenize s | write s | MB/s total | MB/s per core |"
echo "| --- | --- | --- | --- | --- | --- |"
commands=""
for n in $ranks; do
    rm -f "$dir"/bench_text_document.h5
    cmd="$mpiexec -n $n $top/app/preprocess_data --input $corpus --output-prefix $dir/bench $(printf '%s' "--tokenizer-type GPT2BPETokenizer --vocab-file $gpt2/vocab.json --merge-file $gpt2/merges.txt --append-eod --log-interval 100000 --overwrite")"
    commands="$commands
    $cmd"
    out=$($cmd)
    done_line=$(printf '%s\n' "$out" | grep '^> done')
    wall=$(printf '%s\n' "$done_line" | sed 's/.* in \([0-9.]*\) s (tokenize.*/\1/')
    tok=$(printf '%s\n' "$done_line" | sed 's/.*(tokenize \([0-9.]*\) s.*/\1/')
    wr=$(printf '%s\n' "$done_line" | sed 's/.*write \([0-9.]*\) s).*/\1/')
    total=$(awk -v b="$bytes" -v t="$wall" 'BEGIN { printf "%.1f", b / t / 1e6 }')
    per=$(awk -v b="$bytes" -v t="$wall" -v n="$n" 'BEGIN { printf "%.1f", b / t / 1e6 / n }')
    echo "| $n | $wall | $tok | $wr | $total | $per |"
done
rm -f "$dir"/bench_text_document.h5
echo
echo "Commands:"
echo '```'"$commands"
echo '```'
