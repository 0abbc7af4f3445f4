#!/bin/bash
# {{JOB_NAME}}: trains a GPT with pretrain_gpt {{VARIANT}} under Slurm.
# {{LAYOUT}}
# Rendered by jobs/mkjob from jobs/templates/sbatch.sh; render again rather than edit:
#   {{COMMAND}}
# Submit: {{SUBMIT}}
# Log: {{LOG}} (%x = job name, %j = job id)
#SBATCH --job-name={{JOB_NAME}}
#SBATCH --nodes={{NODES}}
#SBATCH --ntasks-per-node={{TASKS_PER_NODE}}
#SBATCH --cpus-per-task={{CPUS_PER_TASK}}
#SBATCH --time={{TIME}}
#SBATCH --output={{LOG}}
{{SBATCH_EXTRA}}

set -u

# --- environment ---
{{ENV}}

# --- the run: the preset's flags are written out so that this script is self-contained ---
PRETRAIN_GPT={{EXECUTABLE}}
TRAIN_ARGS=(
    {{TRAIN_ARGS}}
)

# --- launch: {{LAUNCH_SHAPE}}, bound by local rank ---
# Ranks start with {{LAUNCHER_NOTE}}. srun does not inherit --cpus-per-task
# from sbatch since Slurm 22.05, so the step repeats the shape.
LAUNCH=(
    {{LAUNCH}}
)

echo "job ${SLURM_JOB_ID:-?} ({{JOB_NAME}}) on ${SLURM_JOB_NODELIST:-?} at $(date -Is); restart ${SLURM_RESTART_COUNT:-0}"
echo "layout: {{LAYOUT}}"

# With checkpointing, Slurm sends USR1 to this shell --exit-warning seconds before the time limit;
# the handler forwards SIG{{EXIT_SIGNAL}} to the ranks (pretrain_gpt --exit-signal-handler saves a
# checkpoint and exits cleanly), then the job requeues itself and the next run resumes with --load.
CHECKPOINTING={{CHECKPOINTING}}
warned=0
on_warning() {
    warned=1
    echo "time limit warning at $(date -Is): asking the ranks to checkpoint and exit"
    {{FORWARD_SIGNAL}}
}
trap on_warning USR1

# {{RESTART_NOTE}}
{{RESTART}}"${LAUNCH[@]}" "$PRETRAIN_GPT" "${TRAIN_ARGS[@]}" &
step_pid=$!
# wait returns early (status > 128) when a trapped signal arrives: wait again until the step ends
while :; do
    wait "$step_pid"; status=$?
    kill -0 "$step_pid" 2>/dev/null || break
done
echo "training step ended with status $status at $(date -Is)"

if [ "$CHECKPOINTING" = 1 ] && [ "$warned" = 1 ] && [ "$status" = 0 ]; then
    echo "requeueing job $SLURM_JOB_ID: the next run resumes from the latest checkpoint"
    scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
