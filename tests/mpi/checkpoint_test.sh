#!/bin/sh
# checkpoint_test.sh: distributed checkpoints (io/CHECKPOINT_FORMAT.md) through pretrain_gpt.
#  - bitwise resume: with --deterministic-mode, 10 iterations straight equal 5, save, exit
#    (--exit-interval), load, 5 more: same losses and same final parameters, bit for bit;
#  - resharding: a checkpoint saved with TP2xPP2xDP2 and the distributed optimizer holds the
#    run's global tensors exactly, loads into TP1, TP4, PP4 and TP2xPP2 (DP1) exactly (saving
#    right after loading gives the same tensors, optimizer state included), and training goes on
#    with the losses of the original layout within 1e-5;
#  - crash safety: a rank killed with SIGKILL in the middle of a save leaves the previous
#    checkpoint as the latest; the next start loads it and training goes on; a partial file is
#    never loaded;
#  - transfers cut into pieces (MTC_CKPT_PIECE_ELEMENTS) load and save the same tensors;
#  - options and errors: --finetune, --no-save-optim/--no-load-optim, shape mismatches naming the
#    tensor and both shapes, a corrupt tracker, a missing tracker (start from scratch).
. "${top_srcdir:-.}/tests/lib.sh"
VS_DUMP="$top_builddir/tests/tools/checkpoint_vs_dump"
# (runs that go on from a checkpoint to more --train-iters change the LR decay: they say so)
MODEL="--args-file $TINY_ARGS --num-layers 4 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --hidden-dropout 0.1 --attention-dropout 0.1 --micro-batch-size 2 --global-batch-size 16
       --override-opt-param-scheduler"

losses() { json_field "$1" train lm_loss; }
fail_details() { sed 's/^/#   /' "$WORK/err" | tail -5; sed 's/^/#   /' "$WORK/out" | tail -3; }

# ---- bitwise resume ----
RESUME="$MODEL --deterministic-mode --pipeline-model-parallel-size 2 --use-distributed-optimizer --train-iters 10"
run_app 4 $RESUME --metrics-file "$WORK/straight.jsonl" --dump-parameters "$WORK/straight.bin"
ok $? "resume: 10 iterations straight (PP2 x DP2, distributed optimizer)"
run_app 4 $RESUME --exit-interval 5 --save "$WORK/resume" --metrics-file "$WORK/first.jsonl"
status=$?
grep -q "exiting program at iteration 5" "$WORK/out" && [ "$(cat "$WORK/resume/latest_checkpointed_iteration.txt")" = 5 ]
ok $(( status + $? )) "resume: --exit-interval 5 saves iteration 5 and exits"
run_app 4 $RESUME --load "$WORK/resume" --save "$WORK/resume" --metrics-file "$WORK/second.jsonl" \
    --dump-parameters "$WORK/resumed.bin"
status=$?
grep -q "loaded checkpoint .*iter_0000005.h5: iteration 5, consumed samples 80" "$WORK/out"
ok $(( status + $? )) "resume: the second run loads iteration 5 and trains to 10"
losses "$WORK/straight.jsonl" > "$WORK/straight.loss"
cat "$WORK/first.jsonl" "$WORK/second.jsonl" > "$WORK/resumed.jsonl"
losses "$WORK/resumed.jsonl" > "$WORK/resumed.loss"
[ "$(wc -l < "$WORK/straight.loss")" -eq 10 ] && cmp -s "$WORK/straight.loss" "$WORK/resumed.loss"
ok $? "resume: the losses of iterations 1-10 are bitwise identical"
cmp -s "$WORK/straight.bin" "$WORK/resumed.bin"
ok $? "resume: the final parameters are bitwise identical"

# ---- resharding ----
ORIGINAL="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --use-distributed-optimizer"
run_app 8 $MODEL $ORIGINAL --train-iters 3 --save "$WORK/original" --dump-parameters "$WORK/original.bin"
ok $? "reshard: TP2 x PP2 x DP2 (distributed optimizer) saves iteration 3"
SAVED="$WORK/original/iter_0000003.h5"
result=$("$VS_DUMP" "$SAVED" "$WORK/original.bin"); status=$?
diag "$result"
ok $status "reshard: the checkpoint's tensors are the run's global parameters, bit for bit"
h5ls -r "$SAVED" > "$WORK/h5ls.txt" 2>&1
grep -q "/model/decoder.layers.3.self_attention.linear_qkv.weight Dataset {192, 64}" "$WORK/h5ls.txt" &&
    grep -q "/optimizer/exp_avg_sq/embedding.word_embeddings.weight Dataset {256, 64}" "$WORK/h5ls.txt"
ok $? "reshard: h5ls lists the global tensors under their Megatron names"
run_app 8 $MODEL $ORIGINAL --train-iters 6 --load "$WORK/original" --metrics-file "$WORK/continued.jsonl"
ok $? "reshard: the original layout continues to iteration 6"
losses "$WORK/continued.jsonl" > "$WORK/continued.loss"

# reshard NAME NRANKS FLAGS...: load, save at once (tensors equal the saved ones exactly), then
# train 3 more iterations (losses equal the original layout's within 1e-5)
reshard() {
    name=$1; n=$2; shift 2
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_app "$n" $MODEL "$@" --train-iters 3 --load "$WORK/original" --save "$WORK/$tag"
    status=$?
    [ $status -eq 0 ] || { ok 1 "reshard to $name: load failed ($status)"; fail_details; return; }
    h5diff -q "$SAVED" "$WORK/$tag/iter_0000003.h5" /model /model &&
        h5diff -q "$SAVED" "$WORK/$tag/iter_0000003.h5" /optimizer /optimizer
    ok $? "reshard to $name: every loaded tensor (model and optimizer) equals the saved one exactly"
    run_app "$n" $MODEL "$@" --train-iters 6 --load "$WORK/original" --metrics-file "$WORK/$tag.jsonl"
    status=$?
    losses "$WORK/$tag.jsonl" > "$WORK/$tag.loss"
    paste "$WORK/continued.loss" "$WORK/$tag.loss" | awk -v s=$status 'BEGIN { worst = 0; n = 0 }
        { n++; d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > worst) worst = d }
        END { printf "# losses after loading: worst relative difference %g over %d iterations\n", worst, n
              exit !(s == 0 && n == 3 && worst < 1e-5) }'
    ok $? "reshard to $name: training continues with the original layout's losses (1e-5)"
}
reshard "TP1 (one rank)" 1
reshard "TP4" 4 --tensor-model-parallel-size 4
reshard "PP4" 4 --pipeline-model-parallel-size 4
reshard "TP2 x PP2 (DP1)" 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
# transfers are cut into pieces of whole rows (32 MiB by default; MTC_CKPT_PIECE_ELEMENTS): small
# pieces cut every tensor, also the distributed optimizer's ranges that start inside a row, into
# many, a different number on each rank, which collective transfers must still match up
# pieces NAME ELEMENTS FLAGS...: load the original, save at once, compare the tensors
pieces() {
    name=$1; elements=$2; shift 2
    export MTC_CKPT_PIECE_ELEMENTS=$elements
    run_app 4 $MODEL --tensor-model-parallel-size 2 --use-distributed-optimizer --train-iters 3 \
        --load "$WORK/original" --save "$WORK/pieces$elements" "$@"
    status=$?
    unset MTC_CKPT_PIECE_ELEMENTS
    [ $status -eq 0 ] || fail_details
    h5diff -q "$SAVED" "$WORK/pieces$elements/iter_0000003.h5" /model /model &&
        h5diff -q "$SAVED" "$WORK/pieces$elements/iter_0000003.h5" /optimizer /optimizer
    ok $(( status + $? )) "$name load and save the same tensors"
}
pieces "independent transfers in pieces of at most 7 elements" 7
pieces "--ckpt-collective-io (MPI-IO collective buffering) in pieces of 4096 elements" 4096 --ckpt-collective-io

# ---- crash safety: SIGKILL in the middle of a save ----
CRASH="$MODEL --tensor-model-parallel-size 2 --save $WORK/crash --load $WORK/crash"
run_app 4 $CRASH --train-iters 2
ok $? "crash: a first run saves iteration 2"
MTC_FAULT_PAUSE_IN_SAVE=60 timeout 300 "$MPIEXEC" -n 4 "$PRETRAIN_GPT" $CRASH --train-iters 6 --save-interval 4 \
    >"$WORK/crash.out" 2>"$WORK/crash.err" &
launcher=$!
waited=0
until grep -q "pausing" "$WORK/crash.err" 2>/dev/null || [ $waited -ge 120 ]; do sleep 1; waited=$((waited + 1)); done
victim=$(pgrep -f "pretrain_gpt.*$WORK/crash" | tail -1)
[ -n "$victim" ] && [ -e "$WORK/crash/iter_0000004.h5.partial" ] && kill -KILL "$victim"
ok $? "crash: a rank is killed with SIGKILL while iteration 4 is being saved"
wait $launcher
status=$?
cp "$WORK/crash/iter_0000004.h5.partial" "$WORK/partial.h5"
[ $status -ne 0 ] && [ "$(cat "$WORK/crash/latest_checkpointed_iteration.txt")" = 2 ] && [ ! -e "$WORK/crash/iter_0000004.h5" ]
ok $? "crash: the job fails ($status), the tracker still names iteration 2, no iter_0000004.h5 appears"
run_app 4 $CRASH --train-iters 6 --save-interval 4
status=$?
grep -q "loaded checkpoint .*iter_0000002.h5: iteration 2" "$WORK/out" && grep -q "iteration        6/       6" "$WORK/out" &&
    [ "$(cat "$WORK/crash/latest_checkpointed_iteration.txt")" = 6 ]
ok $(( status + $? )) "crash: the next start loads iteration 2 and trains to 6"
cp "$WORK/partial.h5" "$WORK/crash/iter_0000004.h5" && printf '4\n' > "$WORK/crash/latest_checkpointed_iteration.txt"
run_app 1 $MODEL --train-iters 6 --load "$WORK/crash"
[ $? -ne 0 ] && grep -q "iter_0000004.h5 is \(incomplete\|not a readable HDF5 file\).*refusing to load it" "$WORK/err"
ok $? "crash: the killed save's partial file, even renamed and named by the tracker, is refused"
cp "$WORK/crash/iter_0000006.h5" "$WORK/crash/iter_0000004.h5" && "$top_builddir/tests/tools/h5_set_attribute" "$WORK/crash/iter_0000004.h5" complete 0
run_app 1 $MODEL --train-iters 6 --load "$WORK/crash"
[ $? -ne 0 ] && grep -q "iter_0000004.h5 is incomplete (its save did not finish): refusing to load it" "$WORK/err"
ok $? "crash: a file whose 'complete' attribute is 0 is refused"

# ---- Hugging Face interchange, end to end: export, import, same forward pass ----
CONVERT="$top_builddir/app/convert_checkpoint"
LOGITS_ARGS="--args-file $TINY_ARGS --num-layers 4 --micro-batch-size 1 --global-batch-size 1 --hidden-dropout 0
             --attention-dropout 0 --eval-iters 0 --lr-warmup-iters 0 --override-opt-param-scheduler"
"$CONVERT" --to-hf --load "$WORK/original" --output "$WORK/hf" >"$WORK/out" 2>"$WORK/err" &&
    "$CONVERT" --from-hf --input "$WORK/hf" --save "$WORK/from-hf" >>"$WORK/out" 2>>"$WORK/err"
ok $? "convert_checkpoint exports the TP2 x PP2 x DP2 checkpoint to Hugging Face GPT-2 and imports it back"
timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/model_logits" "$WORK/logits-original" $LOGITS_ARGS \
    --load "$WORK/original" >"$WORK/out" 2>"$WORK/err" &&
    timeout 120 "$MPIEXEC" -n 1 "$top_builddir/tests/tools/model_logits" "$WORK/logits-imported" $LOGITS_ARGS \
    --load "$WORK/from-hf" --finetune >>"$WORK/out" 2>>"$WORK/err" &&
    cmp -s "$WORK/logits-original.logits" "$WORK/logits-imported.logits"
ok $? "the model imported from the export gives bitwise the same logits as the original"

# ---- options and errors ----
run_app 1 $MODEL --train-iters 2 --load "$WORK/original" --finetune --metrics-file "$WORK/finetune.jsonl"
status=$?
grep -q "(weights only: --finetune)" "$WORK/out" && [ "$(json_field "$WORK/finetune.jsonl" train iteration | head -1)" = 1 ]
ok $(( status + $? )) "--finetune loads the weights and starts at iteration 1"
run_app 2 $MODEL --train-iters 4 --load "$WORK/original" --save "$WORK/noopt" --no-save-optim
status=$?
h5ls "$WORK/noopt/iter_0000004.h5" | grep -q optimizer
[ $? -ne 0 ] && [ $status -eq 0 ] && [ -e "$WORK/noopt/iter_0000004.h5" ]
ok $? "--no-save-optim writes no /optimizer group"
run_app 1 $MODEL --train-iters 5 --load "$WORK/noopt"
[ $? -ne 0 ] && grep -q "holds no optimizer state (saved with --no-save-optim): pass --no-load-optim" "$WORK/err"
ok $? "loading it without --no-load-optim stops with a message"
run_app 1 $MODEL --train-iters 5 --load "$WORK/noopt" --no-load-optim
ok $? "--no-load-optim loads it"
run_app 1 $MODEL --train-iters 4 --hidden-size 32 --load "$WORK/original"
[ $? -ne 0 ] && grep -q "tensor /model/embedding.word_embeddings.weight has shape \[256, 64\], but this model's is \[256, 32\]" "$WORK/err"
ok $? "a different hidden size names the tensor and both shapes"
run_app 1 $MODEL --train-iters 4 --num-layers 6 --load "$WORK/original"
[ $? -ne 0 ] && grep -q "has no tensor /model/decoder.layers.4.input_layernorm.weight" "$WORK/err"
ok $? "more layers than the checkpoint names the missing tensor"
mkdir -p "$WORK/bad" && echo "latest" > "$WORK/bad/latest_checkpointed_iteration.txt"
run_app 1 $MODEL --train-iters 2 --load "$WORK/bad"
[ $? -ne 0 ] && grep -q "latest_checkpointed_iteration.txt: expected an iteration number or 'release', found 'latest'" "$WORK/err"
ok $? "a corrupt tracker file is named"
run_app 1 $MODEL --train-iters 2 --load "$WORK/empty-dir"
[ $? -eq 0 ] && grep -q "WARNING: could not find the metadata file" "$WORK/out"
ok $? "no tracker: a warning, and training starts from scratch"
run_app 1 $MODEL --train-iters 2 --save-interval 5
[ $? -ne 0 ] && grep -q "save-interval needs --save DIR" "$WORK/err"
ok $? "--save-interval without --save is refused"

done_testing
