#!/bin/sh
# fuzz_test.sh: builds every libFuzzer target of tests/fuzz with clang (ASan + UBSan + coverage)
# and runs each for a short time (MTC_FUZZ_SECONDS, default 5) from its seed corpus
# (tests/fuzz/corpus/TARGET), after replaying every saved crash (tests/fuzz/regressions/TARGET),
# each of which is now a regression test. A crash, a leak, a sanitizer report or a parser that
# exits fails the test; the table gives each target's executions. A TAP skip (exit 0, which the
# TAP driver counts as SKIP; 77 would be an ERROR) without clang or when MTC_SKIP_FUZZ=1. A longer
# run: see tests/fuzz/README.md.
. "${top_srcdir:-.}/tests/lib.sh"
[ "${MTC_SKIP_FUZZ:-0}" = 1 ] && { echo "1..0 # SKIP MTC_SKIP_FUZZ=1"; exit 0; }
mkvar() { sed -n "s/^$1 = //p" "$top_builddir/Makefile" | head -1; }
FUZZ_CC=$(mkvar FUZZ_CC)
[ -n "$FUZZ_CC" ] && command -v "$FUZZ_CC" >/dev/null || { echo "1..0 # SKIP no clang (libFuzzer)"; exit 0; }
SECONDS_EACH=${MTC_FUZZ_SECONDS:-5}
CFLAGS="-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=undefined -I$top_srcdir -I$top_builddir $(mkvar HDF5_CFLAGS) $(mkvar UTF8PROC_CFLAGS)"
LIBS="$(mkvar HDF5_LIBS) $(mkvar JANSSON_LIBS) $(mkvar PCRE2_LIBS) $(mkvar UTF8PROC_LIBS) $(mkvar ZLIB_LIBS) $(mkvar XXHASH_LIBS) -lm"
# the SentencePiece shim is the tree's one C++ file: the tokenizer targets link the build's object
# of it (not instrumented) with libsentencepiece and the C++ runtime
SPM_OBJECT="$top_builddir/app/tokenizers/libtokenizers_a-sentencepiece_shim.o"
SPM_LIBS="$SPM_OBJECT $(mkvar SENTENCEPIECE_LIBS)"
CORE="app/core/error.c"
sources() {
    case "$1" in
        jsonl) echo "io/jsonl_reader.c $CORE" ;;
        args_file) echo "app/core/options.c $CORE" ;;
        gpt2_vocab|wordpiece_vocab) echo "app/tokenizers/tokenizer.c app/tokenizers/tokenizer_gpt2.c app/tokenizers/tokenizer_wordpiece.c app/tokenizers/tokenizer_hf.c app/core/hashmap.c $CORE" ;;
        idx_header) echo "io/mmap_indexed.c $CORE" ;;
        tracker) echo "io/checkpoint_format.c io/hdf5_attributes.c io/io_error.c io/io_fault.c $CORE" ;;
        safetensors) echo "io/safetensors.c $CORE" ;;
        generate_request) echo "app/inference/generate_request.c $CORE" ;;
        hf_tokenizer) sources gpt2_vocab ;;
        bert_sample) echo "app/data/bert_dataset.c app/data/numpy_random.c $CORE" ;;
    esac
}
TARGETS="jsonl args_file gpt2_vocab wordpiece_vocab idx_header tracker safetensors generate_request hf_tokenizer bert_sample"
export ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1"
# the targets write their input to a file per run: in memory when /dev/shm is there, removed at exit
FUZZ_TMP=$(mktemp -d /dev/shm/mtc-fuzz-test.XXXXXX 2>/dev/null || mktemp -d "$WORK/tmp.XXXXXX")
trap 'rm -rf "$WORK" "$FUZZ_TMP"' EXIT
export TMPDIR="$FUZZ_TMP"
TABLE="$top_srcdir/tests/tools/fault_table.sh"
diag "target | seconds | executions"
for t in $TARGETS; do
    bin="$WORK/fuzz_$t"
    srcs=""
    for s in tests/fuzz/fuzz_$t.c $(sources "$t"); do srcs="$srcs $top_srcdir/$s"; done
    # shellcheck disable=SC2086
    extra=""
    case "$t" in gpt2_vocab|wordpiece_vocab|hf_tokenizer) extra=$SPM_LIBS ;; esac
    $FUZZ_CC $CFLAGS -o "$bin" $srcs $LIBS $extra > "$WORK/cc_$t.log" 2>&1
    status=$?
    [ $status -eq 0 ] || sed 's/^/# /' "$WORK/cc_$t.log" | head -10
    ok $status "fuzz target $t builds with clang -fsanitize=fuzzer,address,undefined"
    [ $status -eq 0 ] || continue
    regressions="$top_srcdir/tests/fuzz/regressions/$t"
    if [ -d "$regressions" ] && [ -n "$(ls "$regressions")" ]; then
        "$bin" "$regressions"/* > "$WORK/reg_$t.log" 2>&1
        status=$?
        [ $status -eq 0 ] || grep -m3 "ERROR\|SUMMARY" "$WORK/reg_$t.log" | sed 's/^/# /'
        ok $status "fuzz target $t: its $(ls "$regressions" | wc -l) saved crash inputs pass (regressions)"
    fi
    mkdir -p "$WORK/corpus_$t"
    (cd "$WORK" && "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$WORK/crash_$t-" "$WORK/corpus_$t" "$top_srcdir/tests/fuzz/corpus/$t") > "$WORK/fuzz_$t.log" 2>&1
    status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/fuzz_$t.log")
    diag "$t | $SECONDS_EACH | ${runs:-?}"
    if [ $status -ne 0 ]; then
        grep -m5 "ERROR\|SUMMARY\|Test unit written" "$WORK/fuzz_$t.log" | sed 's/^/# /'
        for crash in "$WORK"/crash_$t-*; do [ -f "$crash" ] && diag "crash input (base64): $(base64 -w0 "$crash" | head -c 600)"; done
    fi
    ok $status "fuzz target $t runs ${SECONDS_EACH} s (${runs:-?} executions) without a crash"
done
done_testing
