# tests/slurm/cluster.sh: a private single-node Slurm cluster on loopback for the Slurm tests,
# sourced after tests/lib.sh: checks that munged, slurmctld and slurmd are installed (Bail out
# otherwise), starts munged (its own key and socket), slurmctld and slurmd with every file under
# $WORK/slurm (S), ports derived from the pid, and stops them at exit (stop_cluster, through the
# EXIT trap; job_ids lists jobs to cancel first). The node declares 8 CPUs. Provides wait_job ID.
SBIN_PATH="$PATH:/usr/sbin:/sbin"

# --- the daemons are required: CI installs slurm-wlm and munge ---
missing=
for b in munged munge slurmctld slurmd sbatch srun scontrol scancel; do
    PATH=$SBIN_PATH command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
done
if [ -n "$missing" ]; then
    echo "Bail out! slurm/munge binaries missing:$missing (apt-get install slurm-wlm munge)"
    exit 1
fi
PATH=$SBIN_PATH

# --- a private cluster under $WORK/slurm ---
S="$WORK/slurm"
mkdir -p "$S/state" "$S/spool" "$S/log" "$S/jobs"
export SLURM_CONF="$S/slurm.conf"
base=$((20000 + ($$ % 10000) * 3))   # ports derived from the pid: parallel runs do not collide
job_ids=

stop_cluster() {
    for id in $job_ids; do scancel "$id" 2>/dev/null; done
    if [ -n "$job_ids" ]; then   # let slurmd end the steps it started before it goes
        i=0; while [ $i -lt 20 ] && scontrol show job 2>/dev/null | grep -q "JobState=\(RUNNING\|COMPLETING\)"; do
            sleep 0.5; i=$((i + 1)); done
    fi
    for d in slurmd slurmctld munged; do
        [ -s "$S/$d.pid" ] && kill "$(cat "$S/$d.pid")" 2>/dev/null
    done
    for d in slurmd slurmctld munged; do   # wait (bounded) for each to go
        pid=$(cat "$S/$d.pid" 2>/dev/null) || continue
        i=0; while [ $i -lt 20 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.25; i=$((i + 1)); done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    done
}
trap 'stop_cluster; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM HUP

# munge with its own key and socket; --force because the temp dir is not munge's usual layout
dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 2>/dev/null && chmod 600 "$S/munge.key"
munged --force --key-file="$S/munge.key" --socket="$S/munge.sock" --pid-file="$S/munged.pid" \
    --log-file="$S/log/munged.log" --seed-file="$S/munge.seed" 2>"$S/log/munged.err"
munge -S "$S/munge.sock" -n | unmunge -S "$S/munge.sock" >/dev/null 2>&1
ok $? "munged runs with a private key and socket"

# 8 fake GPUs (plain files: only sbatch --test-only uses them, slurmd logs that they are not devices)
for i in 0 1 2 3 4 5 6 7; do : > "$S/gpu$i"; done
cat > "$S/gres.conf" <<EOF
AutoDetect=off
NodeName=localhost Name=gpu File=$S/gpu[0-7]
EOF
# The node declares 8 CPUs whatever the machine has (config_overrides): two 4-rank jobs fit at once.
# No cgroups (proctrack/pgid, task/none), no accounting daemon: job states come from scontrol,
# kept for an hour by MinJobAge. KillWait=2: a cancelled step's tasks get SIGKILL 2 s after SIGTERM (a rank
# blocked in a collective with --exit-signal-handler would otherwise hold the node for 30 s).
cat > "$SLURM_CONF" <<EOF
# slurm.conf of tests/slurm/slurm_test.sh: one node on loopback, everything under $S
ClusterName=mtctest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
PlugStackConfig=$S/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
MinJobAge=3600
KillWait=2
ReturnToService=2
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 Gres=gpu:8 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
: > "$S/plugstack.conf"   # no SPANK plugins (the system's plugstack may name pyxis)
slurmctld -i 2>"$S/log/slurmctld.err" && slurmd -N localhost 2>"$S/log/slurmd.err"
i=0; while [ $i -lt 60 ] && ! sinfo -h -N -o '%T' 2>/dev/null | grep -q idle; do sleep 0.5; i=$((i + 1)); done
sinfo -h -N -o '%T' 2>/dev/null | grep -q idle
ok $? "slurmctld and slurmd run; the node is idle ($(sinfo -h -N -o '%N %c CPUs %G %T' 2>&1 | head -1))"
if ! sinfo -h -N -o '%T' 2>/dev/null | grep -q idle; then
    diag "the cluster did not start; logs:"; tail -n 5 "$S"/log/* 2>/dev/null | sed 's/^/#   /'
    done_testing; exit 1
fi

diag "MPI plugins of srun: $(srun --mpi=list 2>&1 | tr -d '\t' | tr '\n' ' ')"

# wait_job ID: wait (bounded) until the job leaves the queue; prints its state and exit code
wait_job() {
    i=0
    while [ $i -lt 300 ]; do
        state=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case $state in PENDING|CONFIGURING|RUNNING|COMPLETING|REQUEUED|"") sleep 1; i=$((i + 1)) ;; *) break ;; esac
    done
    code=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    echo "$state $code"
}
