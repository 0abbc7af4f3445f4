#!/bin/bash
# {{JOB_NAME}}: trains a GPT with pretrain_gpt on this machine with mpiexec (no Slurm).
# {{LAYOUT}}
# Rendered by jobs/mkjob --local from jobs/templates/local.sh; jobs/launch_local renders and runs it:
#   {{COMMAND}}
# MPIEXEC in the environment overrides the mpiexec command.
set -u

# --- environment ---
{{ENV}}

# --- the run: the preset's flags are written out so that this script is self-contained ---
PRETRAIN_GPT={{EXECUTABLE}}
TRAIN_ARGS=(
    {{TRAIN_ARGS}}
)

echo "{{JOB_NAME}} on $(hostname) at $(date -Is): {{WORLD}} ranks"
# {{RESTART_NOTE}}
exec {{RESTART}}${MPIEXEC:-{{MPIEXEC}}} -n {{WORLD}} "$PRETRAIN_GPT" "${TRAIN_ARGS[@]}"
