#!/bin/sh
# restart_slurm_test.sh: in-job restart under a real Slurm (the private loopback cluster of
# tests/slurm/cluster.sh). Jobs rendered by jobs/mkjob --max-restarts (srun --mpi=pmi2, 2 tasks,
# DP2, local checkpoints every 2 iterations) run jobs/run_with_restarts inside the allocation:
#  - a rank SIGKILLed at iteration 5 (MTC_FAULT_KILL_AT_LOG, first attempt only): srun names the
#    node, which cannot be left out (the allocation has no spare node: the restart line says so);
#    the step restarts, resumes from the local checkpoint of iteration 4 and logs the unbroken
#    run's losses bit for bit; the job completes;
#  - a rank SIGSTOPped at iteration 5: the hang is detected (--rank-heartbeat-timeout 4; 30 for the others), srun's
#    step is cancelled and restarted, bitwise again;
#  - a rank killed in every attempt: the job fails after --max-restarts 1 with the launcher's
#    message.
# The three jobs run at once (the node has 8 CPUs).
. "${top_srcdir:-.}/tests/lib.sh"

MKJOB="python3 $top_srcdir/jobs/mkjob"
abs() { case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
PRETRAIN_GPT_ABS=$(abs "$PRETRAIN_GPT")
command -v setsid >/dev/null 2>&1 || { echo "1..0 # SKIP setsid (util-linux) is missing"; exit 77; }
. "$top_srcdir/tests/slurm/cluster.sh"

FLAGS="--train-iters 8 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0 --deterministic-mode --use-distributed-optimizer"
iteration_losses() { grep '"split": "train"' "$1" | sed -e 's/.*"iteration": \([0-9]*\).*"lm_loss": \([^,}]*\).*/\1 \2/'; }

run_app 2 --args-file "$TINY_ARGS" $FLAGS --metrics-file "$WORK/ref.jsonl"
status=$?
iteration_losses "$WORK/ref.jsonl" > "$WORK/ref.loss"
[ $status -eq 0 ] && [ "$(wc -l < "$WORK/ref.loss")" -eq 8 ]
ok $? "reference (mpiexec): the unbroken run logs 8 losses"

cd "$S/jobs" || exit 1
# render NAME FAULT=SPEC RESTARTS [HEARTBEAT_TIMEOUT]: the job script NAME.sbatch
render() {
    $MKJOB --preset "$TINY_ARGS" --cpu-only --nodes 1 --ntasks-per-node 2 --launcher srun --mpi pmi2 \
        --executable "$PRETRAIN_GPT_ABS" --job-name "$1" --time 00:10:00 --save "$WORK/$1/ckpt" \
        --max-restarts "$3" --rank-heartbeat-timeout "${4:-30}" --export "$2" -o "$1.sbatch" -- $FLAGS \
        --non-persistent-save-interval 2 --non-persistent-ckpt-type local \
        --non-persistent-local-ckpt-dir "$WORK/$1/local" --metrics-file "$WORK/$1.jsonl" 2>>"$WORK/mkjob.err"
}
render killed MTC_FAULT_KILL_AT_LOG=1:5 2 && render stopped MTC_FAULT_STOP_AT_LOG=1:5 2 4 &&
    render always MTC_FAULT_KILL_AT_LOG=1:3:every-attempt 1 &&
    grep -q "run_with_restarts --max-restarts 2 --rank-heartbeat-timeout 30 -- \"\${LAUNCH\[@\]}\"" killed.sbatch
ok $? "mkjob --max-restarts renders the step under jobs/run_with_restarts" || sed 's/^/#   /' "$WORK/mkjob.err"

started=$(date +%s)
for j in killed stopped always; do
    id=$(sbatch --parsable "$j.sbatch" 2>"$WORK/sbatch.err")
    if [ -n "$id" ]; then job_ids="$job_ids $id"; eval "id_$j=$id"; else diag "sbatch failed: $(cat "$WORK/sbatch.err")"; eval "id_$j=none"; fi
done
for j in killed stopped always; do
    eval "id=\$id_$j"
    if [ "$id" = none ]; then eval "result_$j=none"; else eval "result_$j=\"\$(wait_job $id)\""; fi
    iteration_losses "$WORK/$j.jsonl" > "$WORK/$j.loss" 2>/dev/null
    diag "$j: $(grep -h '^job \|step ended\|restart 1 \|no progress' "$S/jobs/$j-$id.out" 2>/dev/null | sed 's/.*T\([0-9:]*\)+.*/\1/' | tr '\n' ' ')"
done
diag "the three jobs took $(( $(date +%s) - started )) s"
details() { [ -f "$1" ] && grep "run_with_restarts\|error\|loaded\|step ended\|^job" "$1" | tail -n 8 | sed 's/^/#   /'; }

log="$S/jobs/killed-$id_killed.out"
[ "$result_killed" = "COMPLETED 0:0" ] && cmp -s "$WORK/ref.loss" "$WORK/killed.loss" &&
    grep -q "^run_with_restarts: restart 1 of at most 2 at .*: the step failed (exit status [0-9]*); node(s) localhost failed, but no spare node remains in the allocation (1 allocated, 0 excluded, 1 needed): restarting on the same nodes; resuming from the newest checkpoint in $WORK/killed/ckpt" "$log" &&
    grep -q "^> loaded local checkpoint of iteration 4 " "$log" && grep -q '"event": "restart", "restart": 1' "$WORK/killed.jsonl"
status=$?; ok $status "a SIGKILLed rank under srun: restarted in the allocation, resumed from the local checkpoint, losses bitwise ($result_killed)"
[ $status -eq 0 ] || details "$log"

log="$S/jobs/stopped-$id_stopped.out"
[ "$result_stopped" = "COMPLETED 0:0" ] && cmp -s "$WORK/ref.loss" "$WORK/stopped.loss" &&
    grep -q "^run_with_restarts: restart 1 of at most 2 at .*: the step hung (no progress for 4 s)" "$log"
status=$?; ok $status "a SIGSTOPped rank under srun: the hang is detected, the step cancelled and restarted, losses bitwise ($result_stopped)"
[ $status -eq 0 ] || details "$log"

log="$S/jobs/always-$id_always.out"
case $result_always in FAILED*) failed=0 ;; *) failed=1 ;; esac
[ $failed -eq 0 ] &&
    grep -q "^run_with_restarts: error: the step failed (exit status [0-9]*), and --max-restarts 1 restarts are used up: giving up" "$log"
status=$?; ok $status "a rank killed in every attempt: the job fails after --max-restarts 1 with the launcher's message ($result_always)"
[ $status -eq 0 ] || details "$log"

done_testing
