#!/bin/sh
# tools_args_test.sh: every program parses its flags with the one option engine
# (app/core/options.c). A malformed or out-of-range number ("abc", "12x", "", " 12", "0x10", a
# negative, a value too large for the type) is refused with exit status 2 and exactly one line,
# "PROGRAM: error: --FLAG ...", naming the flag; an unknown flag and a missing value are named;
# an error inside an args file names FILE:LINE; --help exits 0 and lists the flags by group; an
# args file's values reach the program and the command line overrides them.
. "${top_srcdir:-.}/tests/lib.sh"
PREPROCESS="$top_builddir/app/preprocess_data"
CONVERT_CORPUS="$top_builddir/app/convert_corpus"
CONVERT_CHECKPOINT="$top_builddir/app/convert_checkpoint"
FIXTURE="$top_builddir/tests/tools/make_hf_fixture"

run_tool() {  # run_tool PROGRAM ARGS... : one rank; output in $WORK/out and $WORK/err
    program=$1; shift
    timeout 60 "$MPIEXEC" -n 1 "$program" "$@" >"$WORK/out" 2>"$WORK/err"
}

# refused DESCRIPTION TEXT PROGRAM ARGS... : exit status 2, exactly one line on stderr, which
# starts "PROGRAM: error: " and contains TEXT
refused() {
    description=$1; text=$2; program=$3; shift 3
    run_tool "$program" "$@"; status=$?
    lines=$(wc -l < "$WORK/err")
    name=$(basename "$program")
    if [ "$status" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "^$name: error: " "$WORK/err" &&
        grep -qF -- "$text" "$WORK/err"; then
        ok 0 "$description: $(cat "$WORK/err")"
    else
        ok 1 "$description"; diag "status $status, $lines lines on stderr:"; sed 's/^/#   /' "$WORK/err" | head -5
    fi
}

# bad_numbers PROGRAM FLAG OUT_OF_RANGE TOO_LARGE : the malformed values of a numeric flag, each
# alone and as --FLAG=VALUE, are refused naming the flag
bad_numbers() {
    program=$1; flag=$2; out_of_range=$3; too_large=$4
    name=$(basename "$program")
    for value in abc 12x "" " 12" 0x10 1,5 "$out_of_range" "$too_large"; do
        refused "$name --$flag '$value'" "error: --$flag " "$program" "--$flag" "$value"
    done
    refused "$name --$flag=12x" "error: --$flag " "$program" "--$flag=12x"
}

# bad_range PROGRAM FLAG OUT_OF_RANGE TOO_LARGE : the same for a shorter list of values
bad_range() {
    program=$1; flag=$2; name=$(basename "$program")
    for value in 12x "$3" "$4"; do
        refused "$name --$flag '$value'" "error: --$flag " "$program" "--$flag" "$value"
    done
}

# ---- malformed numbers, every program ----------------------------------------------------------
bad_numbers "$PRETRAIN_GPT" hidden-size -5 99999999999              # int, [1, inf)
bad_numbers "$PRETRAIN_GPT" lr -5 1e39                              # float, [0, inf)
bad_range "$PRETRAIN_GPT" train-iters 0 99999999999999999999        # int64, [1, inf)
bad_range "$PRETRAIN_GPT" seed -5 99999999999999999999              # uint64
bad_range "$PRETRAIN_GPT" hidden-dropout 1.0 1e39                   # float, [0, 1)
bad_numbers "$PREPROCESS" vocab-size -5 99999999999                 # int, [1, inf)
bad_numbers "$PREPROCESS" workers 0 99999999999                     # int, [1, inf)
bad_numbers "$PREPROCESS" log-interval -5 99999999999999999999      # int64, [1, inf)
bad_numbers "$PREPROCESS" partitions 2 99999999999                  # int, [1, 1]
bad_numbers "$CONVERT_CORPUS" vocab-size -5 99999999999             # int, [1, inf)
bad_numbers "$CONVERT_CORPUS" eod-id -5 99999999999                 # int, [0, inf)
bad_numbers "$CONVERT_CHECKPOINT" make-vocab-size-divisible-by 0 99999999999999999999  # int64, [1, inf)

refused "the range is named" "--hidden-size must be in [1, 2147483647], got 99999999999" \
    "$PRETRAIN_GPT" --hidden-size 99999999999
refused "a half-open range is named" "--hidden-dropout must be in [0, 1), got 1" \
    "$PRETRAIN_GPT" --hidden-dropout 1.0
refused "a negative count is refused" "--eod-id must not be negative, got -5" "$CONVERT_CORPUS" --eod-id -5
refused "convert_corpus --vocab-size abc --eod-id 12x" "--vocab-size expects an integer, got 'abc'" \
    "$CONVERT_CORPUS" --vocab-size abc --eod-id 12x
refused "convert_corpus: the EOD id must be a token of the vocabulary" "--eod-id 10 is not a token of --vocab-size 10" \
    "$CONVERT_CORPUS" --input x.h5 --output-prefix y --to mmap --vocab-size 10 --eod-id 10

# ---- unknown flags, missing values, choices, required flags --------------------------------------
for program in "$PRETRAIN_GPT" "$PREPROCESS" "$CONVERT_CORPUS" "$CONVERT_CHECKPOINT"; do
    name=$(basename "$program")
    refused "$name: an unknown flag is named" "unknown flag '--no-such-flag'" "$program" --no-such-flag 3
    refused "$name: a stray word is named" "unexpected argument 'stray'" "$program" stray
done
refused "preprocess_data: a missing value is named" "--vocab-size is missing its value" "$PREPROCESS" --vocab-size
refused "convert_corpus: a missing value is named" "--eod-id is missing its value" "$CONVERT_CORPUS" --eod-id --overwrite
refused "convert_checkpoint: a flag takes no value" "--overwrite takes no value" "$CONVERT_CHECKPOINT" --overwrite=1
refused "preprocess_data: a choice lists the valid ones" \
    "--tokenizer-type must be one of GPT2BPETokenizer|BertWordPieceLowerCase|BertWordPieceCase|NullTokenizer|HuggingFaceTokenizer|Llama2Tokenizer|SentencePieceTokenizer|GPTSentencePieceTokenizer, got 'gpt2'" \
    "$PREPROCESS" --tokenizer-type gpt2
refused "convert_corpus: a choice lists the valid ones" "--to must be one of hdf5|mmap, got 'bin'" "$CONVERT_CORPUS" --to bin
refused "convert_checkpoint: a choice lists the valid ones" "--dtype must be one of float32|bfloat16|fp32|bf16, got 'fp16'" \
    "$CONVERT_CHECKPOINT" --dtype fp16
refused "preprocess_data: a required flag is named" "--output-prefix is required" \
    "$PREPROCESS" --input x.jsonl --tokenizer-type NullTokenizer
refused "convert_corpus: a required flag is named" "--to is required" "$CONVERT_CORPUS" --input x.h5 --output-prefix y
refused "preprocess_data: one JSON key per run" "--json-keys: only one key per run is supported" \
    "$PREPROCESS" --input x.jsonl --output-prefix y --tokenizer-type NullTokenizer --json-keys text title

# ---- args files: errors name FILE:LINE --------------------------------------------------------
args_file_error() {  # args_file_error PROGRAM FLAG : a bad value on line 3 of an args file
    program=$1; flag=$2; name=$(basename "$program")
    printf -- '# %s flags\n--overwrite\n--%s 12x\n' "$name" "$flag" > "$WORK/$name.args"
    [ "$name" = pretrain_gpt ] && printf -- '# pretrain_gpt flags\n--mock-data\n--%s 12x\n' "$flag" > "$WORK/$name.args"
    refused "$name: an args file error names file and line" "error: $WORK/$name.args:3: --$flag expects an integer, got '12x'" \
        "$program" --args-file "$WORK/$name.args"
}
args_file_error "$PRETRAIN_GPT" num-layers
args_file_error "$PREPROCESS" workers
args_file_error "$CONVERT_CORPUS" eod-id
args_file_error "$CONVERT_CHECKPOINT" make-vocab-size-divisible-by
printf -- '--input %s/x.h5\n--output-prefix\n%s/y\n' "$WORK" "$WORK" > "$WORK/split.args"
refused "a value on the next line of an args file is missing" "split.args:2: --output-prefix is missing its value" \
    "$CONVERT_CORPUS" --args-file "$WORK/split.args"
refused "a missing args file is named" "cannot open args file '$WORK/none.args'" "$CONVERT_CHECKPOINT" --args-file "$WORK/none.args"
printf -- '--args-file %s/other.args\n' "$WORK" > "$WORK/nested.args"
refused "args files do not nest" "nested.args:1: --args-file cannot appear inside an args file" \
    "$PREPROCESS" --args-file "$WORK/nested.args"

# ---- --help: exit 0, flags by group -----------------------------------------------------------
help_lists() {  # help_lists PROGRAM GROUP... : --help exits 0, prints nothing on stderr, has each "GROUP:"
    program=$1; shift; name=$(basename "$program")
    run_tool "$program" --help; status=$?
    [ -s "$WORK/err" ] && status=1
    for group in "$@" "other"; do grep -qx -- "$group:" "$WORK/out" || { status=1; diag "$name: no group '$group:'"; }; done
    grep -q -- "--args-file PATH" "$WORK/out" || status=1
    ok $status "$name --help exits 0 and lists the flags by group"
    cp "$WORK/out" "$WORK/help.$name"
}
help_lists "$PRETRAIN_GPT" "network size" "regularization" "training" "learning rate" "data and dataloader" "checkpointing"
help_lists "$PREPROCESS" "input data" "tokenizer" "output data" "runtime"
help_lists "$CONVERT_CORPUS" "conversion" "tokenizer (recorded when a .bin/.idx input becomes HDF5)"
help_lists "$CONVERT_CHECKPOINT" "direction (give one)" "with --to-hf" "with --from-hf" "output"
[ "$(grep -c '^logging:' "$WORK/help.pretrain_gpt")" -eq 1 ]
ok $? "pretrain_gpt --help lists each group once"
grep -q -- "--input FILE \[FILE ...\] .*(required)" "$WORK/help.preprocess_data"
ok $? "preprocess_data --help marks required flags"

# ---- args files work: values arrive, the command line overrides ----------------------------------
printf '{"text": "1 2 3"}\n{"text": "4 5"}\n' > "$WORK/docs.jsonl"
cat > "$WORK/preprocess.args" <<EOF
# a corpus from an args file
--input $WORK/docs.jsonl
--tokenizer-type NullTokenizer --vocab-size 100   # ids 0..99, EOD 100
--output-prefix $WORK/from_file
--append-eod
EOF
run_tool "$PREPROCESS" --args-file "$WORK/preprocess.args" --output-prefix "$WORK/overridden"
[ $? -eq 0 ] && [ -f "$WORK/overridden_text_document.h5" ] && [ ! -e "$WORK/from_file_text_document.h5" ] &&
    grep -q '2 documents, 2 sentences, 7 tokens' "$WORK/out"
ok $? "preprocess_data reads an args file; the command line's --output-prefix wins" || sed 's/^/# /' "$WORK/err"

printf -- '--input %s/overridden_text_document.h5\n--to hdf5\n--output-prefix %s/mm\n' "$WORK" "$WORK" > "$WORK/convert.args"
run_tool "$CONVERT_CORPUS" --args-file "$WORK/convert.args" --to=mmap
[ $? -eq 0 ] && [ -f "$WORK/mm.bin" ] && [ -f "$WORK/mm.idx" ] && [ ! -e "$WORK/mm.h5" ]
ok $? "convert_corpus reads an args file; the command line's --to=mmap wins" || sed 's/^/# /' "$WORK/err"
run_tool "$CONVERT_CORPUS" --input "$WORK/mm" --output-prefix "$WORK/back" --to hdf5 --tokenizer-type NullTokenizer \
    --vocab-size 101 --eod-id 100
[ $? -eq 0 ] && [ "$(h5dump -a /vocab_size "$WORK/back.h5" | sed -n 's/^ *(0): *//p')" = 101 ] &&
    [ "$(h5dump -a /eod_id "$WORK/back.h5" | sed -n 's/^ *(0): *//p')" = 100 ]
ok $? "convert_corpus records --vocab-size 101 and --eod-id 100 for a .bin/.idx input"

mkdir -p "$WORK/hf"
"$FIXTURE" write "$WORK/hf" >/dev/null
printf -- '--from-hf\n--input %s/hf\n--save %s/ckpt  # a converted model\n--make-vocab-size-divisible-by 64\n' "$WORK" "$WORK" > "$WORK/checkpoint.args"
run_tool "$CONVERT_CHECKPOINT" --args-file "$WORK/checkpoint.args" --make-vocab-size-divisible-by 128
[ $? -eq 0 ] && [ -f "$WORK/ckpt/release.h5" ] &&
    [ "$(h5dump -a /args/make_vocab_size_divisible_by "$WORK/ckpt/release.h5" | sed -n 's/^ *(0): *//p')" = 128 ]
ok $? "convert_checkpoint reads an args file; the command line's --make-vocab-size-divisible-by wins" || sed 's/^/# /' "$WORK/err"

done_testing
