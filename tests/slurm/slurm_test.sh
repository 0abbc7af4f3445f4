#!/bin/sh
# slurm_test.sh: the Slurm job tooling against a real Slurm. Starts a private single-node cluster
# (munged, slurmctld, slurmd; every file under a temp dir, nothing in /etc), renders jobs with
# jobs/mkjob, trains the tiny GPT in a batch job (srun --mpi=pmi2, and mpiexec inside the
# allocation), checks that the pyxis variant carries its container flags and is accepted by the
# controller (sbatch --test-only), that inconsistent numbers stop mkjob with a message naming
# them, that the example renders in jobs/examples/ are up to date, and that jobs/launch_local
# trains locally. Daemons are stopped and files removed at the end, also on failure.
. "${top_srcdir:-.}/tests/lib.sh"

MKJOB="python3 $top_srcdir/jobs/mkjob"
abs() { case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
PRETRAIN_GPT_ABS=$(abs "$PRETRAIN_GPT")
. "$top_srcdir/tests/slurm/cluster.sh"

# loss_falls LOG: the first logged lm loss is above 5, the last below 2.5
loss_falls() {
    grep -o 'lm loss: [0-9.E+-]*' "$1" | sed 's/lm loss: //' > "$1.loss"
    first=$(head -1 "$1.loss"); last=$(tail -1 "$1.loss")
    awk -v f="$first" -v l="$last" -v n="$(wc -l < "$1.loss")" 'BEGIN { exit !(n >= 5 && f > 5.0 && l < 2.5) }'
}

# --- the tiny GPT as a batch job: srun --mpi=pmi2, and mpiexec inside the allocation ---
# 4 tasks as TP2 x DP2
LAYOUT="--cpu-only --nodes 1 --ntasks-per-node 4 --tensor-model-parallel-size 2"
TRAIN="-- --train-iters 60 --eval-iters 1"
cd "$S/jobs" || exit 1
$MKJOB --preset "$TINY_ARGS" $LAYOUT --launcher srun --mpi pmi2 --executable "$PRETRAIN_GPT_ABS" \
    --job-name tiny-srun --time 00:05:00 -o tiny-srun.sbatch $TRAIN 2>"$WORK/mkjob.err"
ok $? "mkjob renders the bare-metal CPU job (srun --mpi=pmi2)"
$MKJOB --preset "$TINY_ARGS" $LAYOUT --launcher mpiexec --mpiexec "$MPIEXEC" --executable "$PRETRAIN_GPT_ABS" \
    --job-name tiny-mpiexec --time 00:05:00 -o tiny-mpiexec.sbatch $TRAIN 2>>"$WORK/mkjob.err"
ok $? "mkjob renders the bare-metal CPU job (mpiexec inside the allocation)"
sed -n '/^TRAIN_ARGS=(/,/^)/p' tiny-srun.sbatch > "$WORK/train_args"
grep -q -- "--num-layers 2" "$WORK/train_args" && grep -q -- "--tensor-model-parallel-size 2" "$WORK/train_args" && \
    ! grep -q -- "--pipeline-model-parallel-size\|--save\|--load\|--exit-signal-handler" "$WORK/train_args" && \
    ! grep -q "^#SBATCH --\(signal\|requeue\)" tiny-srun.sbatch
ok $? "a TP2 x DP2 run without --save passes the preset inline, the TP flag, and no checkpoint flags, signal or requeue"

started=$(date +%s)
for j in srun mpiexec; do
    id=$(sbatch --parsable "tiny-$j.sbatch" 2>"$WORK/sbatch.err")
    if [ -n "$id" ]; then job_ids="$job_ids $id"; eval "id_$j=$id"; else diag "sbatch failed: $(cat "$WORK/sbatch.err")"; eval "id_$j=none"; fi
done
for j in srun mpiexec; do
    eval "id=\$id_$j"
    result=$(wait_job "$id")
    log="$S/jobs/tiny-$j-$id.out"
    [ "$result" = "COMPLETED 0:0" ]; status=$?
    ok $status "the tiny GPT job ($j, job $id) ends COMPLETED with exit code 0:0 (got '$result')"
    [ $status -ne 0 ] && [ -f "$log" ] && tail -n 5 "$log" | sed 's/^/#   /'
    loss_falls "$log"
    ok $? "its log $(basename "$log") shows the loss falling ($(head -1 "$log.loss" 2>/dev/null) -> $(tail -1 "$log.loss" 2>/dev/null))"
done
[ "$(grep -cE '^ +[0-9]+ +[^ ]+ +[0-9]+ +[0-9]+ +cpu( +[0-9]+){4}$' "$S/jobs/tiny-srun-$id_srun.out" 2>/dev/null)" -eq 4 ] &&
    grep -q "tensor-parallel 2 x pipeline-parallel 1 x data-parallel 2" "$S/jobs/tiny-srun-$id_srun.out"
ok $? "the srun job ran 4 ranks as TP2 x DP2"
diag "both training jobs took $(( $(date +%s) - started )) s"

# --- a job warned before its time limit: checkpoint, clean exit, requeue, resume ---
# What Slurm does at --signal=B:USR1@SECONDS is sent by hand (scancel --batch --signal=USR1) once
# training is under way; the batch shell forwards SIGTERM to the ranks, pretrain_gpt
# (--exit-signal-handler) saves and exits 0, the script requeues the job, and the requeued run
# (--load) resumes from that checkpoint and trains to the end.
CKPT="$WORK/ckpt-requeue"
$MKJOB --preset "$TINY_ARGS" $LAYOUT --launcher srun --mpi pmi2 --executable "$PRETRAIN_GPT_ABS" \
    --job-name tiny-requeue --time 00:10:00 --save "$CKPT" --exit-warning 300 -o requeue.sbatch \
    -- --train-iters 300 --eval-iters 1 --eval-interval 1000 --log-interval 10 2>>"$WORK/mkjob.err"
grep -q "^#SBATCH --signal=B:USR1@300" requeue.sbatch && grep -q "^#SBATCH --requeue" requeue.sbatch &&
    grep -q -- "--exit-signal-handler" requeue.sbatch
ok $? "mkjob --save renders the warning signal, --requeue and the checkpoint flags"
id=$(sbatch --parsable requeue.sbatch 2>"$WORK/sbatch.err")
[ -n "$id" ] && job_ids="$job_ids $id"
log="$S/jobs/tiny-requeue-$id.out"
i=0; while [ $i -lt 240 ] && ! grep -q "iteration       20/" "$log" 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
scancel --batch --signal=USR1 "$id"
ok $? "job $id is warned (USR1 to the batch shell) while it trains"
# Slurm holds a requeued job for about two minutes (EligibleTime); release it at once
job_field() { scontrol show job "$id" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
i=0   # the requeue shows as Restarts=1 while the first run is still ending: wait for PENDING
while [ $i -lt 240 ] && ! { [ "$(job_field JobState)" = PENDING ] && [ "$(job_field Restarts)" = 1 ]; }; do
    sleep 0.5; i=$((i + 1)); done
i=0
while [ $i -lt 60 ] && [ "$(job_field JobState)" = PENDING ]; do
    scontrol update JobId="$id" StartTime=now 2>/dev/null; sleep 1; i=$((i + 1)); done
result=$(wait_job "$id")
saved=$(sed -n 's/.*saved checkpoint at iteration \([0-9]*\) .*/\1/p' "$log" | head -1)
grep -q "time limit warning" "$log" && grep -q "exiting program after receiving signal 15 at iteration $saved" "$log" &&
    [ -n "$saved" ] && [ "$saved" -ge 20 ] && [ "$saved" -lt 300 ]
ok $? "the ranks saved a checkpoint (iteration ${saved:-none}) and exited cleanly on the signal"
grep -q "requeueing job $id" "$log" && grep -q "restart 1" "$log"
ok $? "the job requeued itself and ran again (SLURM_RESTART_COUNT 1)"
grep -q "loaded checkpoint .*iter_$(printf %07d "${saved:-0}").h5: iteration ${saved:-none}," "$log" &&
    ! sed -n '/restart 1/,$p' "$log" | grep -q "iteration       10/"
ok $? "the requeued run resumed from iteration ${saved:-none}, not from zero"
[ "$result" = "COMPLETED 0:0" ] && grep -q "iteration      300/     300" "$log" &&
    [ "$(cat "$CKPT/latest_checkpointed_iteration.txt" 2>/dev/null)" = 300 ]
status=$?
ok $status "the requeued job trained to iteration 300 and ended COMPLETED 0:0 (got '$result')"
[ $status -eq 0 ] || { diag "tracker: $(cat "$CKPT/latest_checkpointed_iteration.txt" 2>&1); job: $(job_field JobState) $(job_field Reason); node: $(sinfo -h -N -o '%T %E' 2>&1 | head -1)"; tail -n 6 "$log" 2>/dev/null | cut -c1-160 | sed 's/^/#   /'; }

# --- the pyxis variant: container flags on srun, accepted by the controller ---
$MKJOB --preset "$top_srcdir/configs/gpt-1.3b.args" --nodes 1 --gpus-per-node 8 --cpus-per-task 1 \
    --container-image nvcr.io/nvidia/pytorch:24.01-py3 --container-mounts "/lustre/data:/data,$WORK:/work" \
    --container-workdir /work --time 00:30:00 --mpi pmi2 --save /work/checkpoints/gpt-1.3b --exit-warning 120 \
    -o pyxis.sbatch 2>>"$WORK/mkjob.err"
ok $? "mkjob renders the pyxis variant of the 1-node x 8-GPU GPT 1.3B job"
status=0
for pattern in "--container-image=nvcr.io/nvidia/pytorch:24.01-py3" "--container-mounts=/lustre/data:/data,$WORK:/work" \
    "--container-workdir=/work" "--no-container-mount-home" "--mpi=pmi2" "--gpus-per-node=8" \
    "--gpu-bind=map_gpu:0,1,2,3,4,5,6,7" "--cpu-bind=cores" "#SBATCH --gpus-per-node=8" "#SBATCH --ntasks-per-node=8" \
    "#SBATCH --signal=B:USR1@120" "#SBATCH --requeue" "#SBATCH --output=%x-%j.out" "#SBATCH --time=00:30:00" \
    "--save /work/checkpoints/gpt-1.3b" "--load /work/checkpoints/gpt-1.3b" "--exit-signal-handler" \
    "--num-layers 24" "--hidden-size 2048" "export NCCL_IB_DISABLE=1"; do
    grep -q -e "$pattern" pyxis.sbatch || { status=1; diag "missing: $pattern"; }
done
ok $status "the pyxis script carries the container, binding, signal/requeue and checkpoint flags and the preset inline"
bash -n pyxis.sbatch && bash -n tiny-srun.sbatch
ok $? "the rendered scripts are valid bash"
sbatch --test-only pyxis.sbatch >"$WORK/testonly" 2>&1
ok $? "the controller accepts the pyxis script (sbatch --test-only: $(head -1 "$WORK/testonly" | cut -c1-80))"

# --- inconsistent numbers stop mkjob with one message naming them ---
expect_mkjob_error() {  # DESCRIPTION PATTERN ARGS...
    desc=$1; pattern=$2; shift 2
    $MKJOB --dry-run "$@" >"$WORK/out" 2>"$WORK/err"; status=$?
    if [ $status -eq 2 ] && [ "$(wc -l < "$WORK/err")" -eq 1 ] && grep -q -e "$pattern" "$WORK/err" && [ ! -s "$WORK/out" ]; then
        ok 0 "$desc"
    else
        ok 1 "$desc"; diag "status $status:"; sed 's/^/#   /' "$WORK/err" | head -5
    fi
}
P175="--preset gpt3-175b"
expect_mkjob_error "world size not divisible by TP x PP" \
    "world size 1000 (= --nodes 125 x --gpus-per-node 8) is not divisible by TP x PP = 8 x 16 = 128" \
    $P175 --nodes 125 --gpus-per-node 8 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16
expect_mkjob_error "TP larger than the GPUs of a node" \
    "--tensor-model-parallel-size 16 is larger than --gpus-per-node 8" \
    $P175 --nodes 128 --gpus-per-node 8 --tensor-model-parallel-size 16 --pipeline-model-parallel-size 8
expect_mkjob_error "global batch not a multiple of micro batch x DP" \
    "--global-batch-size 1536 is not a multiple of --micro-batch-size 1 x data-parallel size 10 (= 10)" \
    $P175 --nodes 160 --gpus-per-node 8 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16
expect_mkjob_error "an override of the micro batch is checked too" \
    "--global-batch-size 16 is not a multiple of --micro-batch-size 3 x data-parallel size 4 (= 12)" \
    --preset gpt-tiny --cpu-only --ntasks-per-node 4 -- --micro-batch-size 3
expect_mkjob_error "GPU count that does not fill whole nodes" "12 GPUs do not fill whole nodes of --gpus-per-node 8" \
    --preset gpt-1.3b --gpus 12 --gpus-per-node 8
expect_mkjob_error "layers not divisible by PP" "--num-layers 24 is not divisible by --pipeline-model-parallel-size 16" \
    --preset gpt-1.3b --nodes 2 --gpus-per-node 8 --pipeline-model-parallel-size 16
expect_mkjob_error "TP x PP x DP that differs from the machine" \
    "world size 16 (= --nodes 2 x --gpus-per-node 8) differs from TP x PP x DP = 2 x 1 x 4 = 8" \
    --preset gpt-1.3b --nodes 2 --gpus-per-node 8 --tensor-model-parallel-size 2 --data-parallel-size 4
expect_mkjob_error "unknown preset is named" "no preset 'gpt-nope'" --preset gpt-nope --nodes 1

# --- the example renders in jobs/examples/ are what mkjob renders now ---
for example in "$top_srcdir"/jobs/examples/*.sbatch; do
    cmd=$(sed -n '5s/^#   jobs\/mkjob //p' "$example")
    eval "$MKJOB $cmd" > "$WORK/example" 2>"$WORK/err"
    cmp -s "$WORK/example" "$example"
    ok $? "jobs/examples/$(basename "$example") is up to date (mkjob $cmd)"
done
grep -q "TP 8 x PP 16 x DP 8" "$top_srcdir/jobs/examples/gpt3-175b-128x8.sbatch" && \
    grep -q -- "--tensor-model-parallel-size 8" "$top_srcdir/jobs/examples/gpt3-175b-128x8.sbatch" && \
    grep -q -- "--pipeline-model-parallel-size 16" "$top_srcdir/jobs/examples/gpt3-175b-128x8.sbatch"
ok $? "the GPT-3 175B example runs 128 nodes x 8 GPUs as TP 8 x PP 16 x DP 8 with its TP/PP flags"

# --- every preset flag is one pretrain_gpt knows ---
"$PRETRAIN_GPT" --help > "$WORK/help" 2>&1
status=0
for preset in "$top_srcdir"/configs/gpt-1.3b.args "$top_srcdir"/configs/gpt3-175b.args; do
    for flag in $(sed 's/#.*//' "$preset" | awk '{ print $1 }'); do
        grep -q -e "^  $flag " "$WORK/help" || { status=1; diag "$(basename "$preset"): pretrain_gpt --help lacks $flag"; }
    done
done
ok $status "the gpt-1.3b and gpt3-175b presets use only flags pretrain_gpt accepts"

# --- the local launcher trains from the same run description ---
MPIEXEC="$MPIEXEC" timeout 120 sh "$top_srcdir/jobs/launch_local" --preset "$TINY_ARGS" --cpu-only --ntasks-per-node 2 \
    --executable "$PRETRAIN_GPT_ABS" -- --train-iters 60 --eval-iters 1 >"$WORK/local.out" 2>&1
status=$?
loss_falls "$WORK/local.out"
ok $((status + $?)) "jobs/launch_local trains the tiny GPT with mpiexec -n 2 (exit $status, loss $(head -1 "$WORK/local.out.loss") -> $(tail -1 "$WORK/local.out.loss"))"

# --- a scaling study under Slurm: perf/harness renders one job per case, collects their metrics ---
H="$WORK/harness-study"
python3 "$top_srcdir/perf/harness" render "$top_srcdir/perf/studies/strong-cpu.study" --cpu-only --ntasks-per-node 4 \
    --out "$H" --mkjob-args "--launcher srun --mpi pmi2 --executable $PRETRAIN_GPT_ABS --time 00:05:00" \
    > "$WORK/harness-render.out" 2>&1
ok $? "perf/harness renders the strong-cpu study as $(grep -c '^sbatch ' "$WORK/harness-render.out") sbatch jobs"
ids=
for script in "$H"/*.sbatch; do
    id=$(sbatch --parsable "$script" 2>"$WORK/sbatch.err") && { ids="$ids $id"; job_ids="$job_ids $id"; } ||
        diag "sbatch $script failed: $(cat "$WORK/sbatch.err")"
done
status=0
for id in $ids; do
    result=$(wait_job "$id"); [ "$result" = "COMPLETED 0:0" ] || { status=1; diag "job $id: $result"; }
done
[ "$(echo $ids | wc -w)" -eq 3 ] && [ $status -eq 0 ]
ok $? "the study's 3 jobs (1, 2 and 4 ranks) end COMPLETED 0:0"
python3 "$top_srcdir/perf/harness" collect "$top_srcdir/perf/studies/strong-cpu.study" "$H" > "$WORK/harness-collect.out" 2>&1 &&
    [ "$(grep -c '^| [124]r-tp1-pp1-dp[124] | [124] | 1 | 1 | [124] | 4 | 16 | [0-9.,]* | [0-9,]* |' "$H"/strong-cpu-*.md)" -eq 3 ] &&
    grep -q "^- mode: slurm" "$H"/strong-cpu-*.md && [ -s "$H/machine/4r-tp1-pp1-dp4.txt" ]
ok $? "perf/harness collect reports the 3 jobs' steady-state figures, and the node each ran on"

done_testing
