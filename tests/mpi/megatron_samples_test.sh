#!/bin/sh
# tests/mpi/megatron_samples_test.sh: the training samples equal Megatron-Core's, token for
# token. tests/tools/megatron_gpt_samples.py is an independent reference that follows
# megatron/core/datasets step by step with numpy.random.RandomState; pretrain_gpt
# --print-sample prints the same samples from our C pipeline. Configurations: one corpus over
# several epochs with and without a separate final epoch, the validation split, two- and
# three-way weighted blends, an unweighted blend, per-split data paths, a sentence-split corpus,
# on 1, 2 and 4 ranks (each rank reads its share of the samples). Any differing token fails.
. "${top_srcdir:-.}/tests/lib.sh"
REFERENCE="$top_srcdir/tests/tools/megatron_gpt_samples.py"
PYTHON=""
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then echo "1..0 # SKIP python3-numpy is missing (autotools/install-deps.sh installs it)"; exit 0; fi

# NullTokenizer corpora: document d of corpus BASE has 5 + (d * 37) % LEN tokens BASE + 1000 d + k
make_corpus() {  # make_corpus DOCS BASE LEN SENTENCES > file.jsonl
    awk -v docs="$1" -v base="$2" -v span="$3" -v sentences="$4" 'BEGIN { for (d = 0; d < docs; d++) {
        len = 5 + (d * 37) % span; line = "{\"text\": \"";
        for (k = 0; k < len; k++) {
            sep = k == 0 ? "" : (sentences && k % 7 == 0 ? "\\n\\n" : " ");
            line = line sep (base + 1000 * d + k) }
        print line "\"}" } }'
}
prepare() {  # prepare NAME DOCS BASE LEN [--split-sentences]
    make_corpus "$2" "$3" "$4" "${5:+1}" > "$WORK/$1.jsonl"
    "$MPIEXEC" -n 1 "$top_builddir/app/preprocess_data" --input "$WORK/$1.jsonl" --output-prefix "$WORK/$1" \
        --tokenizer-type NullTokenizer --vocab-size 1000000 --append-eod $5 >"$WORK/pre.out" 2>&1 &&
    kind=document && [ -n "$5" ] && kind=sentence
    "$top_builddir/app/convert_corpus" --input "$WORK/$1_text_$kind.h5" --output-prefix "$WORK/$1" --to mmap \
        >"$WORK/conv.out" 2>&1
    ok $? "corpus $1: $2 documents${5:+ split into sentences} as Megatron .bin/.idx"
}
prepare a 300 0 60
prepare b 200 400000 90
prepare c 120 700000 40
prepare s 150 900000 50 --split-sentences

SEQ=16
MODEL="--num-layers 1 --hidden-size 8 --num-attention-heads 2 --seq-length $SEQ --micro-batch-size 1
       --global-batch-size 4 --lr 0 --vocab-size 1000001 --seed 1234"
# compare NAME NRANKS SPLIT:FIRST-LAST TRAIN VALID TEST FLAGS...  (TRAIN etc.: the sample counts
# these flags make pretrain_gpt ask for, given to the reference as Megatron's num_samples:
# train = --train-samples, valid = (train iterations / eval interval + 1) x eval iters x 4)
compare() {
    name=$1 n=$2 span=$3 train=$4 valid=$5 test=$6; shift 6
    timeout 300 "$MPIEXEC" -n "$n" "$PRETRAIN_GPT" $MODEL --print-sample "$span" "$@" \
        >"$WORK/ours.txt" 2>"$WORK/ours.err"
    status=$?
    "$PYTHON" "$REFERENCE" --seq-length $SEQ --seed 1234 --samples "$train" "$valid" "$test" --print "$span" \
        "$@" >"$WORK/reference.txt" 2>"$WORK/reference.err" || { cat "$WORK/reference.err"; status=1; }
    grep -E '^(train|valid|test) ' "$WORK/ours.txt" > "$WORK/ours.samples"
    lines=$(wc -l < "$WORK/reference.txt")
    [ $status -eq 0 ] && [ "$lines" -gt 0 ] && cmp -s "$WORK/ours.samples" "$WORK/reference.txt"
    ok $? "$name: $lines samples ($span) equal Megatron's on $n rank(s)"
    if ! cmp -s "$WORK/ours.samples" "$WORK/reference.txt"; then
        diff "$WORK/ours.samples" "$WORK/reference.txt" | head -4 | cut -c1-160 | sed 's/^/# /'
        tail -3 "$WORK/ours.err" | sed 's/^/# /'
    fi
}
# samples of one epoch of a split (the reference's length with one sample asked for)
epoch() {  # epoch SPLIT FLAGS...
    sp=$1; shift
    "$PYTHON" "$REFERENCE" --seq-length $SEQ --seed 1234 --samples 1 1 1 --print "$sp:0" --length "$@"
}

P=$(epoch train --data-path "$WORK/a" --split 969,30,1)
diag "corpus a, --split 969,30,1: $P train samples per epoch"
# 2 epochs + 10%: the final epoch is shuffled apart; 2 epochs + 90%: shuffled with the others
few=$(( 2 * P + P / 10 )); many=$(( 2 * P + 9 * P / 10 ))
for n in 1 2 4; do
    compare "one corpus, separate final epoch" $n "train:0-$((P - 1))" $few 0 0 \
        --data-path "$WORK/a" --split 969,30,1 --train-samples $few --eval-iters 0 --data-cache-path "$WORK/cache$n"
done
compare "one corpus, separate final epoch, all samples" 2 "train:0-$((few - 1))" $few 0 0 \
    --data-path "$WORK/a" --split 969,30,1 --train-samples $few --eval-iters 0
compare "one corpus, no separate final epoch" 1 "train:0-$((many - 1))" $many 0 0 \
    --data-path "$WORK/a" --split 969,30,1 --train-samples $many --eval-iters 0
compare "one corpus, validation split" 2 "valid:0-59" 40 60 0 \
    --data-path "$WORK/a" --split 90,5,5 --train-samples 40 --eval-interval 5 --eval-iters 5
compare "two-way weighted blend" 2 "train:0-799" 800 0 0 \
    --data-path 0.3 "$WORK/a" 0.7 "$WORK/b" --split 98,2,0 --train-samples 800 --eval-iters 0
compare "three-way weighted blend" 4 "train:0-899" 900 0 0 \
    --data-path 2 "$WORK/a" 1 "$WORK/b" 1.5 "$WORK/c" --split 949,50,1 --train-samples 900 --eval-iters 0
compare "three-way weighted blend, validation" 1 "valid:0-59" 32 60 0 \
    --data-path 2 "$WORK/a" 1 "$WORK/b" 1.5 "$WORK/c" --split 949,50,1 --train-samples 32 --eval-interval 4 --eval-iters 5
compare "unweighted blend (--data-path A B)" 2 "train:0-499" 500 0 0 \
    --data-path "$WORK/a" "$WORK/b" --split 969,30,1 --train-samples 500 --eval-iters 0
compare "one corpus with a weight" 1 "train:0-299" 300 0 0 \
    --data-path 1.0 "$WORK/c" --split 969,30,1 --train-samples 300 --eval-iters 0
S=$(epoch train --data-path "$WORK/s" --split 969,30,1)
compare "sentence-split corpus" 2 "train:0-$((S - 1))" $((S + S / 2)) 0 0 \
    --data-path "$WORK/s" --split 969,30,1 --train-samples $((S + S / 2)) --eval-iters 0
compare "per-split data paths, train" 2 "train:0-99" 100 40 0 \
    --train-data-path 0.5 "$WORK/a" 0.5 "$WORK/c" --valid-data-path "$WORK/b" --train-samples 100 \
    --eval-interval 25 --eval-iters 5
compare "per-split data paths, valid" 2 "valid:0-39" 100 40 0 \
    --train-data-path 0.5 "$WORK/a" 0.5 "$WORK/c" --valid-data-path "$WORK/b" --train-samples 100 \
    --eval-interval 25 --eval-iters 5
printf '{"train": ["0.5", "%s", 0.5, "%s"], "valid": "%s", "test": null}\n' "$WORK/a" "$WORK/c" "$WORK/b" \
    > "$WORK/per_split.json"
timeout 300 "$MPIEXEC" -n 1 "$PRETRAIN_GPT" $MODEL --print-sample train:0-99 --per-split-data-args-path "$WORK/per_split.json" \
    --train-samples 100 --eval-interval 25 --eval-iters 5 > "$WORK/json.txt" 2>&1
grep -E '^train ' "$WORK/json.txt" > "$WORK/json.samples"
"$PYTHON" "$REFERENCE" --seq-length $SEQ --seed 1234 --samples 100 40 0 --print train:0-99 \
    --train-data-path 0.5 "$WORK/a" 0.5 "$WORK/c" --valid-data-path "$WORK/b" > "$WORK/reference.txt"
[ -s "$WORK/json.samples" ] && cmp -s "$WORK/json.samples" "$WORK/reference.txt"
ok $? "--per-split-data-args-path (JSON lists and strings): the same 100 train samples as Megatron's"
done_testing
