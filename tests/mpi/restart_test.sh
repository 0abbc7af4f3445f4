#!/bin/sh
# restart_test.sh: jobs/run_with_restarts (in-job restart) with mpiexec on 2 ranks (DP2), saving
# a checkpoint every 6 iterations and a local one (--non-persistent-ckpt-type local) every 2:
#  - a rank SIGKILLed at iteration 5 (MTC_FAULT_KILL_AT_LOG, first attempt only): the launcher
#    restarts the step, which resumes from the newest checkpoint and logs the unbroken run's
#    losses bit for bit; a restart line in the log and a restart record in the metrics;
#  - a rank SIGSTOPped at iteration 5 (MTC_FAULT_STOP_AT_LOG): no progress on the step's output
#    for --rank-heartbeat-timeout seconds is a hang: the step is ended (the stopped rank too) and
#    restarted, bitwise again;
#  - a rank killed in every attempt: the launcher gives up after --max-restarts with a message and
#    a non-zero status;
#  - a node srun names as failed is excluded (srun --exclude) when the allocation has a spare one
#    (a stand-in srun: the loopback Slurm has one node), and --load SAVE is added;
#  - a usage error of pretrain_gpt before training is not restarted;
#  - bad launcher options stop it with one message.
. "${top_srcdir:-.}/tests/lib.sh"
RESTARTS="$top_srcdir/jobs/run_with_restarts"
command -v setsid >/dev/null 2>&1 || { echo "1..0 # SKIP setsid (util-linux) is missing"; exit 77; }

MODEL="--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
       --deterministic-mode --hidden-dropout 0.1 --use-distributed-optimizer --mock-data
       --vocab-size 127 --tokenizer-type NullTokenizer --train-iters 8"

iteration_losses() { grep '"split": "train"' "$1" | sed -e 's/.*"iteration": \([0-9]*\).*"lm_loss": \([^,}]*\).*/\1 \2/'; }
fail_details() { sed 's/^/#   /' "$WORK/err" | tail -8; }
check() { ok "$1" "$2"; [ "$1" -eq 0 ] || fail_details; }

run_app 2 $MODEL --metrics-file "$WORK/ref.jsonl"
status=$?
iteration_losses "$WORK/ref.jsonl" > "$WORK/ref.loss"
[ $status -eq 0 ] && [ "$(wc -l < "$WORK/ref.loss")" -eq 8 ]
check $? "reference: the unbroken run logs 8 losses"

# supervised NAME [LAUNCHER OPTIONS]: the run under run_with_restarts; losses in $WORK/NAME.loss
supervised() {
    name=$1; shift
    rm -rf "$WORK/$name" && mkdir "$WORK/$name"
    timeout 240 "$RESTARTS" "$@" -- "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --save "$WORK/$name/ckpt" \
        --load "$WORK/$name/ckpt" --save-interval 6 --non-persistent-save-interval 2 --non-persistent-ckpt-type local \
        --non-persistent-local-ckpt-dir "$WORK/$name/local" --metrics-file "$WORK/$name.jsonl" >"$WORK/out" 2>"$WORK/err"
    status=$?
    iteration_losses "$WORK/$name.jsonl" > "$WORK/$name.loss"
    return $status
}

MTC_FAULT_KILL_AT_LOG=1:5 supervised killed --max-restarts 2 --rank-heartbeat-timeout 60 &&
    cmp -s "$WORK/ref.loss" "$WORK/killed.loss" &&
    grep -q "^run_with_restarts: restart 1 of at most 2 at .*: the step failed (exit status [0-9]*); no node excluded; resuming from the newest checkpoint in $WORK/killed/ckpt" "$WORK/err" &&
    grep -q '^{"event": "restart", "restart": 1, "max_restarts": 2, "reason": "failure", "exit_status": [1-9][0-9]*, "excluded_nodes": \[\], "time": ' "$WORK/killed.jsonl" &&
    grep -q "^> loaded local checkpoint of iteration 4 " "$WORK/out"
check $? "a SIGKILLed rank: one restart, resumed from the local checkpoint of iteration 4, the unbroken run's losses bitwise, a restart line and record"

MTC_FAULT_STOP_AT_LOG=1:5 supervised stopped --max-restarts 2 --rank-heartbeat-timeout 4 &&
    cmp -s "$WORK/ref.loss" "$WORK/stopped.loss" &&
    grep -q "^run_with_restarts: no progress for [0-9]* s (no line on the step's stdout; limit 4 s): the step hangs, ending it" "$WORK/err" &&
    grep -q "^run_with_restarts: restart 1 of at most 2 at .*: the step hung (no progress for 4 s)" "$WORK/err" &&
    grep -q '"reason": "hang"' "$WORK/stopped.jsonl"
check $? "a SIGSTOPped rank: the hang is detected, the step ended and restarted, the losses bitwise"
sleep 1
pgrep -f "$WORK/stopped/ckpt" > /dev/null
[ $? -ne 0 ]
check $? "no rank of the hung step is left behind"

MTC_FAULT_KILL_AT_LOG=1:3:every-attempt supervised always --max-restarts 1 --rank-heartbeat-timeout 60
status=$?
[ $status -ne 0 ] &&
    grep -q "^run_with_restarts: error: the step failed (exit status [0-9]*), and --max-restarts 1 restarts are used up: giving up" "$WORK/err" &&
    [ "$(grep -c '"event": "restart"' "$WORK/always.jsonl")" -eq 1 ]
check $? "a rank killed in every attempt: one restart, then the launcher gives up with a message (status $status)"

# node exclusion, with a stand-in srun (the loopback Slurm has one node): attempt 0 fails naming
# node02, attempt 1 records its arguments; 3 nodes allocated for a step of 2 -> --exclude=node02,
# 2 allocated -> no spare node, the same nodes
mkdir -p "$WORK/bin"
cat > "$WORK/bin/srun" <<'SRUN'
#!/bin/sh
if [ "$MTC_RESTART_ATTEMPT" = 0 ]; then echo "srun: error: node02: task 3: Killed" >&2; exit 137; fi
echo "$@" > "$SRUN_ARGS"
SRUN
chmod +x "$WORK/bin/srun"
SRUN_ARGS="$WORK/srun3.args" SLURM_JOB_NUM_NODES=3 "$RESTARTS" --max-restarts 1 --restart-delay 0 -- \
    "$WORK/bin/srun" --nodes=2 app --save "$WORK/x" > "$WORK/out" 2> "$WORK/err"
[ $? -eq 0 ] && [ "$(cat "$WORK/srun3.args")" = "--exclude=node02 --nodes=2 app --save $WORK/x --load $WORK/x" ] &&
    grep -q "^run_with_restarts: restart 1 of at most 1 at .*: the step failed (exit status 137); excluding node(s) node02; " "$WORK/err"
status1=$?
SRUN_ARGS="$WORK/srun2.args" SLURM_JOB_NUM_NODES=2 "$RESTARTS" --max-restarts 1 --restart-delay 0 -- \
    "$WORK/bin/srun" --nodes=2 app --save "$WORK/x" > "$WORK/out" 2>> "$WORK/err"
[ $? -eq 0 ] && [ "$(cat "$WORK/srun2.args")" = "--nodes=2 app --save $WORK/x --load $WORK/x" ] &&
    grep -q "node(s) node02 failed, but no spare node remains in the allocation (2 allocated, 0 excluded, 2 needed): restarting on the same nodes" "$WORK/err"
[ $status1 -eq 0 ] && [ $? -eq 0 ]
check $? "srun names a failed node: the restart excludes it where a spare node remains (and adds --load SAVE), not otherwise"

timeout 60 "$RESTARTS" --max-restarts 3 -- "$MPIEXEC" -n 2 "$PRETRAIN_GPT" $MODEL --hidden-size 33 > "$WORK/out" 2> "$WORK/err"
status=$?
[ $status -ne 0 ] && grep -q "^run_with_restarts: error: the step stopped on a usage error before training (.*--hidden-size.*): not restarting" "$WORK/err" &&
    ! grep -q "restart 1 of" "$WORK/err"
check $? "a usage error before training (--hidden-size 33 with 2 heads) is not restarted (status $status)"

"$RESTARTS" --max-restarts x -- true > "$WORK/out" 2> "$WORK/err"
[ $? -eq 2 ] && grep -q "^run_with_restarts: error: --max-restarts x: expected a non-negative whole number" "$WORK/err" &&
    "$RESTARTS" --max-restarts 1 > "$WORK/out" 2> "$WORK/err"; [ $? -eq 2 ] && grep -q "no command to run" "$WORK/err"
check $? "bad options: a count that is not one, no command"

done_testing
