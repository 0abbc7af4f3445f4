#!/bin/sh
# sanitizer_build_test.sh: the project built with AddressSanitizer and UndefinedBehaviorSanitizer
# (./configure --enable-sanitizers --without-cuda, in a copy of the source tree) runs the unit
# tests and a small MPI job: a 2-rank training run that saves, resumes with TP2 (checksums
# verified by extra reads), convert_checkpoint --verify, and a 2-rank preprocess_data whose corpus
# the next run trains on. Any sanitizer report fails the test. A TAP skip when the tree is not a
# git checkout (the copy comes from git ls-files) or MTC_SKIP_SANITIZERS=1.
. "${top_srcdir:-.}/tests/lib.sh"
[ "${MTC_SKIP_SANITIZERS:-0}" = 1 ] && { echo "1..0 # SKIP MTC_SKIP_SANITIZERS=1"; exit 0; }
git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1 || { echo "1..0 # SKIP not a git checkout"; exit 0; }
SRC="$WORK/src"
mkdir -p "$SRC"
(cd "$top_srcdir" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null) | (cd "$SRC" && tar xf -)
cd "$SRC" || exit 1
log="$WORK/build.log"
# the copy's own make, not the outer `make check`'s: its command-line variables (TESTS=...) reach a
# sub-make through MAKEFLAGS and would replace the TESTS given below
unset MAKEFLAGS MFLAGS MAKELEVEL
UNIT="tests/unit/kernels_grad_test tests/unit/gpt_model_test tests/unit/parameter_table_test tests/unit/lr_schedule_test
      tests/unit/tokenizer_test tests/unit/safetensors_test tests/unit/pipeline_schedule_test tests/unit/rank_layout_test
      tests/unit/checkpoint_boxes_test tests/unit/checkpoint_format_test"
# only what the checks below run (not every program and test of `make all`/`make check`)
{ sh autotools/bootstrap && env -u CUDA_HOME ./configure --enable-sanitizers --without-cuda &&
  make -j2 app/pretrain_gpt app/convert_checkpoint app/preprocess_data $UNIT; } > "$log" 2>&1
status=$?
[ $status -eq 0 ] || tail -20 "$log" | sed 's/^/# /'
ok $status "configure --enable-sanitizers --without-cuda and build"
grep -q "sanitizers (ASan+UBSan)  : yes" "$log"
ok $? "configure reports the sanitizers on"

export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0 passed=0
for t in $UNIT; do
    top_srcdir="$SRC" top_builddir="$SRC" ./$t > "$WORK/unit.log" 2>&1 || { status=1; grep -E "^not ok|Sanitizer|runtime error" "$WORK/unit.log" | head -5 | sed "s|^|# $t: |"; }
    passed=$(( passed + $(grep -c "^ok " "$WORK/unit.log") ))
done
ok $status "the unit tests pass under ASan and UBSan ($passed TAP checks)"

sanitized() { ! grep -q "Sanitizer\|runtime error:" "$WORK/err"; }
PRETRAIN_GPT="$SRC/app/pretrain_gpt"
MODEL="--args-file $SRC/configs/gpt-tiny.args --lr-warmup-iters 1 --eval-iters 0 --log-interval 1"
run_app 2 $MODEL --train-iters 2 --use-distributed-optimizer --save "$WORK/ckpt"
status=$?; sanitized; ok $(( status + $? )) "2-rank training and save, clean under the sanitizers"
[ $status -eq 0 ] || grep -m3 "Sanitizer\|runtime error\|error" "$WORK/err" | sed 's/^/# /'
run_app 2 $MODEL --train-iters 3 --override-opt-param-scheduler --load "$WORK/ckpt" --tensor-model-parallel-size 2
status=$?; sanitized; ok $(( status + $? )) "resume with TP2 (checksums verified), clean"
"$SRC/app/convert_checkpoint" --verify "$WORK/ckpt" > "$WORK/out" 2> "$WORK/err"
status=$?; sanitized; ok $(( status + $? )) "convert_checkpoint --verify, clean"
awk 'BEGIN { for (d = 0; d < 40; d++) { line = "{\"text\": \""; for (k = 0; k < 30; k++) line = line (k ? " " : "") (d * 3 + k) % 200; print line "\"}" } }' > "$WORK/c.jsonl"
timeout 120 "$MPIEXEC" -n 2 "$SRC/app/preprocess_data" --input "$WORK/c.jsonl" --output-prefix "$WORK/c" \
    --tokenizer-type NullTokenizer --vocab-size 255 > "$WORK/out" 2> "$WORK/err"
status=$?; sanitized; ok $(( status + $? )) "2-rank preprocess_data, clean"
run_app 2 --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 2 \
    --global-batch-size 4 --train-iters 2 --lr 1e-3 --eval-iters 0 --split 90,10,0 --tokenizer-type NullTokenizer \
    --vocab-size 255 --data-path "$WORK/c_text_document"
status=$?; sanitized; ok $(( status + $? )) "training on that corpus (checked at the door), clean"
done_testing
