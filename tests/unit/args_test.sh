#!/bin/sh
# args_test.sh: flag errors stop the job before any work with one message naming the problem;
# args files work with comments and the command line overrides them; --help lists groups.
. "${top_srcdir:-.}/tests/lib.sh"

# expect_error DESCRIPTION PATTERN ARGS... : exit status 2, one "error:" line matching PATTERN
expect_error() {
    desc=$1; pattern=$2; shift 2
    run_app 2 "$@"; status=$?
    lines=$(grep -c "error:" "$WORK/err")
    if [ "$status" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$pattern" "$WORK/err" && ! grep -q "iteration" "$WORK/out"; then
        ok 0 "$desc"
    else
        ok 1 "$desc"; diag "status $status, $lines error lines:"; sed 's/^/#   /' "$WORK/err" | head -5
    fi
}

expect_error "unknown flag is named" "unknown flag '--num-layer'" --args-file "$TINY_ARGS" --num-layer 3
expect_error "missing value is named" "\-\-lr is missing its value" --args-file "$TINY_ARGS" --lr
expect_error "non-numeric value is named" "\-\-hidden-size expects an integer, got 'big'" --args-file "$TINY_ARGS" --hidden-size big
expect_error "global batch not a multiple of micro batch x DP" \
    "\-\-global-batch-size 12 is not a multiple of --micro-batch-size 4 x data-parallel size 2 (= 8)" \
    --args-file "$TINY_ARGS" --global-batch-size 12
expect_error "heads must divide hidden size" "\-\-hidden-size 64 is not divisible by --num-attention-heads 5" \
    --args-file "$TINY_ARGS" --num-attention-heads 5
expect_error "bad choice lists the valid ones" "\-\-lr-decay-style must be one of constant|linear|cosine, got 'step'" \
    --args-file "$TINY_ARGS" --lr-decay-style step
expect_error "warm-up fraction and iterations exclude each other" "cannot both be given" \
    --args-file "$TINY_ARGS" --lr-warmup-fraction 0.1
expect_error "sequence longer than position embeddings" "\-\-seq-length 128 exceeds --max-position-embeddings 64" \
    --args-file "$TINY_ARGS" --seq-length 128
expect_error "required flag is named" "\-\-train-iters is required" --num-layers 2 --hidden-size 64 \
    --num-attention-heads 4 --seq-length 16 --micro-batch-size 2 --lr 1e-3 --mock-data --vocab-size 64
expect_error "missing args file is named" "cannot open args file '$WORK/nope.args'" --args-file "$WORK/nope.args"

printf -- '--num-layers 2\n# a comment\n--hidden-size\n64\n' > "$WORK/bad.args"
expect_error "args file error names file and line" "$WORK/bad.args:3: --hidden-size is missing its value" --args-file "$WORK/bad.args"
printf -- '--num-layers 2 # layers\n--dropout-rate 0.1\n' > "$WORK/bad2.args"
expect_error "unknown flag in args file names file and line" "$WORK/bad2.args:2: unknown flag '--dropout-rate'" --args-file "$WORK/bad2.args"

expect_error "--device cuda without a CUDA backend is refused" "\-\-device cuda" --args-file "$TINY_ARGS" --device cuda
expect_error "--exit-on-missing-checkpoint stops on a --load folder without a checkpoint" \
    "\-\-exit-on-missing-checkpoint: --load $WORK/no-checkpoint holds no checkpoint" \
    --args-file "$TINY_ARGS" --device cpu --load "$WORK/no-checkpoint" --exit-on-missing-checkpoint

# the command line overrides the file, and values reach the run
run_app 2 --args-file "$TINY_ARGS" --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --hidden-size 32
status=$?
grep -q "hidden_size \.*\s*32$" "$WORK/out"; override=$?
ok $((status + override)) "command line overrides the args file (hidden size 32, 3 iterations ran)"
[ "$(grep -c ' iteration ' "$WORK/out")" -eq 3 ]; ok $? "exactly --train-iters iterations are logged"

# --help lists the flags by group and exits 0
"$MPIEXEC" -n 1 "$PRETRAIN_GPT" --help >"$WORK/help" 2>&1; status=$?
for g in "network size:" "regularization:" "training:" "learning rate:" "validation:" "logging:"; do
    grep -q "^$g" "$WORK/help" || status=1
done
grep -q -- "--lr-decay-style {constant|linear|cosine}" "$WORK/help" || status=1
ok $status "--help lists the flags by group and exits 0"

done_testing
