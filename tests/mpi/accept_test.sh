#!/bin/sh
# accept_test.sh: the cluster acceptance suite's CPU variant (perf/accept/accept --machine cpu
# --quick) with 2 MPI ranks: every check prints a measured number, the collective table has no
# wrong element, the report is written; thresholds the test sets itself decide PASS and FAIL
# lines and the exit status (0 when every line passes, 1 when one fails); the shipped [cpu]
# thresholds are applied and each verdict agrees with its number; one rank skips the collective
# checks; a threshold for an unknown check is refused; the sbatch template
# (jobs/templates/accept.sbatch) runs the suite through a stand-in srun.
# The verdicts never depend on this machine's speed: the test's thresholds file is the shipped
# [cpu] section (its sizes and its correctness checks: no wrong element, finite losses) with every
# rate floor at 0, and a rate is checked to be measured and positive, never to reach a figure.
# (The shipped floors themselves are what an admin's run checks; a slow or shared CI machine may
# miss them: 5 GFLOP/s GEMM failed with 1 rank on a 2-core VM whose OpenBLAS ran Prescott kernels.)
. "${top_srcdir:-.}/tests/lib.sh"
ACCEPT="python3 $top_srcdir/perf/accept/accept"
SHIPPED="$top_srcdir/perf/accept/thresholds.conf"
export top_builddir

# the test's thresholds: the shipped [cpu] section with every rate floor (NAME_min but
# train_loss_finite_min) set to 0
awk '/^\[/ { in_cpu = ($0 == "[cpu]") } in_cpu' "$SHIPPED" |
    sed 's/^\([a-z0-9_]*_min\) *=.*/\1 = 0/; s/^train_loss_finite_min = 0$/train_loss_finite_min = 1/' > "$WORK/test.conf"
grep -q "^gemm_tflops_min = 0$" "$WORK/test.conf" && grep -q "^train_loss_finite_min = 1$" "$WORK/test.conf" &&
    grep -q "^gemm_wrong_max = 0$" "$WORK/test.conf" && grep -q "^quick_train_warmup_iters = " "$WORK/test.conf"
ok $? "the test's thresholds: [cpu] with $(grep -c '_min = 0$' "$WORK/test.conf") rate floors at 0, the correctness checks and sizes kept"
OWN="--thresholds $WORK/test.conf"

# --- the whole CPU suite, quick sizes, 2 ranks ---
timeout 300 $ACCEPT --machine cpu --quick --np 2 $OWN --dir "$WORK" --report "$WORK/report.md" \
    >"$WORK/out" 2>"$WORK/err"; status=$?
ok $status "perf/accept/accept --machine cpu --quick with 2 ranks exits 0 (status $status)"
[ $status -eq 0 ] || { tail -20 "$WORK/out" | sed 's/^/# /'; sed 's/^/# /' "$WORK/err" | tail -5; }
awk '$1 == "PASS" || $1 == "FAIL" || $1 == "SKIP"' "$WORK/out" > "$WORK/checks"
diag "$(wc -l < "$WORK/checks") check lines:"
sed 's/^/#   /' "$WORK/checks"
[ "$(wc -l < "$WORK/checks")" -ge 15 ]
ok $? "at least 15 check lines ($(wc -l < "$WORK/checks"))"
awk '$1 != "PASS" { bad = 1 } END { exit bad }' "$WORK/checks"
ok $? "every check passes the test's thresholds (rates measured, nothing wrong, losses finite)"
awk '$3 !~ /^[0-9.eE+-]+$/ { bad = 1 } $2 !~ /_wrong$/ && !($3 > 0) { bad = 1 } END { exit bad }' "$WORK/checks"
ok $? "every check line carries a measured number, every rate a positive one"
missing=""
for check in gemm_tflops gemm_wrong allreduce_busbw_gbs allgather_busbw_gbs reducescatter_busbw_gbs \
    alltoall_busbw_gbs sendrecv_busbw_gbs comm_wrong hdf5_write_gbs hdf5_read_gbs hdf5_wrong \
    membw_rank_gbs membw_total_gbs train_tokens_per_s train_tflops_per_gpu train_loss_finite; do
    awk -v c="$check" '$2 == c { found = 1 } END { exit !found }' "$WORK/checks" || missing="$missing $check"
done
[ -z "$missing" ]
ok $? "GEMM, collectives, HDF5, memory and training are all checked (missing:${missing:- none})"
grep -q "^# [0-9]* checks: [0-9]* PASS, 0 FAIL, 0 SKIP; acceptance PASS" "$WORK/out"
ok $? "summary line says acceptance PASS"
# nccl-tests' table: size count type redop time algbw busbw #wrong
awk '$3 == "float" && NF == 8 { rows++; if ($8 != 0) bad = 1 } END { exit bad || rows < 50 }' "$WORK/out"
ok $? "collective table: $(awk '$3 == "float" && NF == 8' "$WORK/out" | wc -l) rows over five collectives, #wrong 0 in each"
for collective in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    grep -q "^# $collective: bus bandwidth at the largest size" "$WORK/out" || missing="$missing $collective"
done
[ -z "$missing" ]
ok $? "all-reduce, all-gather, reduce-scatter, all-to-all and send/recv measured (missing:${missing:- none})"
grep -q "^- commit: " "$WORK/report.md" && grep -q "^- machine type: cpu" "$WORK/report.md" &&
    grep -q "^PASS   gemm_tflops" "$WORK/report.md" && grep -q "gemm_bench --device cpu" "$WORK/report.md"
ok $? "report written with commit, machine, checks and commands"

grep -q "^# fp8: not measured (the CPU backend has no fp8)" "$WORK/out" && ! grep -q "gemm_fp8" "$WORK/checks"
ok $? "the fp8 GEMM is reported as not measured on the CPU, with the reason, and not checked"

# --- the shipped [cpu] thresholds: applied, and each verdict agrees with its number (whether
# this machine reaches them is not the test's business) ---
timeout 120 $ACCEPT --machine cpu --quick --np 2 --only gemm,membw --no-report >"$WORK/out" 2>"$WORK/err"; status=$?
awk '$1 == "PASS" || $1 == "FAIL"' "$WORK/out" > "$WORK/checks"
diag "shipped thresholds (status $status):"
sed 's/^/#   /' "$WORK/checks"
consistent=0
for check in gemm_tflops gemm_wrong membw_rank_gbs membw_total_gbs membw_wrong; do
    key=$(awk -v c="$check" '/^\[/ { in_cpu = ($0 == "[cpu]") } in_cpu && ($1 == c "_min" || $1 == c "_max") { print $1, $3 }' "$SHIPPED")
    bound=${key#* }
    [ "$check" = membw_total_gbs ] && bound=$(awk -v b="$bound" 'BEGIN { printf "%g", 2 * b }')  # per rank x 2 ranks
    case $key in *_min*) op=">=";; *) op="<=";; esac
    awk -v c="$check" -v op="$op" -v b="$bound" '$2 == c {
            found = 1; good = (op == ">=") ? ($3 >= b) : ($3 <= b)
            if ($4 != op || $5 + 0 != b + 0 || $1 != (good ? "PASS" : "FAIL")) bad = 1 }
        END { exit bad || !found }' "$WORK/checks" || { diag "$check: expected $op $bound and a verdict to match"; consistent=1; }
done
fails=$(grep -c "^FAIL" "$WORK/checks")
if [ "$fails" -eq 0 ]; then expected_status=0 verdict=PASS; else expected_status=1 verdict=FAIL; fi
[ $consistent -eq 0 ] && [ "$(wc -l < "$WORK/checks")" -eq 5 ] && [ $status -eq $expected_status ] &&
    grep -q "^# 5 checks: $((5 - fails)) PASS, $fails FAIL, 0 SKIP; acceptance $verdict" "$WORK/out"
ok $? "the shipped [cpu] thresholds are applied, each verdict agrees with its number, the status and summary with the verdicts"

# --- an impossible threshold fails its line and the run ---
timeout 120 $ACCEPT --machine cpu --quick --np 2 $OWN --only gemm --no-report --set gemm_tflops_min=1e9 \
    >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -eq 1 ]
ok $? "--set gemm_tflops_min=1e9: exit status 1 ($status)"
grep -q "^FAIL   gemm_tflops .* >= 1e+09" "$WORK/out" && grep -q "^PASS   gemm_wrong" "$WORK/out" &&
    grep -q "acceptance FAIL" "$WORK/out"
ok $? "the gemm_tflops line says FAIL with the threshold, the other line still PASS"

# --- a [TYPE.Ngpus] section applies to N ranks on one node, and only to them ---
{ cat "$WORK/test.conf"; printf '[cpu.2gpus]\ngemm_tflops_min = 1e9\n'; } > "$WORK/pair.conf"
timeout 120 $ACCEPT --machine cpu --quick --np 2 --only gemm --no-report --thresholds "$WORK/pair.conf" \
    >"$WORK/out" 2>"$WORK/err"; s2=$?
timeout 120 $ACCEPT --machine cpu --quick --np 1 --only gemm --no-report --thresholds "$WORK/pair.conf" \
    >"$WORK/out1" 2>"$WORK/err1"; s1=$?
[ $s2 -eq 1 ] && grep -q "^FAIL   gemm_tflops .* >= 1e+09" "$WORK/out" && [ $s1 -eq 0 ]
ok $? "[cpu.2gpus] thresholds apply with 2 ranks (status $s2) and not with 1 (status $s1)"

# --- a benchmark that fails says its own error line; --dir is created when missing ---
timeout 120 $ACCEPT --machine cpu --quick --np 2 $OWN --only hdf5 --no-report --dir "$WORK/new/dir" \
    >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -eq 0 ] && [ -d "$WORK/new/dir" ]
ok $? "--dir that does not exist yet is created (status $status)"
: > "$WORK/file"
timeout 120 $ACCEPT --machine cpu --quick --np 2 $OWN --only hdf5 --no-report --dir "$WORK/file/sub" \
    >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -eq 2 ] && grep -q "cannot create it" "$WORK/err"
ok $? "--dir that cannot be created is refused with one line (status $status: $(head -1 "$WORK/err"))"

# --- one rank: no collective to measure ---
timeout 120 $ACCEPT --machine cpu --quick --np 1 $OWN --only comm --no-report >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -eq 0 ] && grep -q "^SKIP   allreduce_busbw_gbs" "$WORK/out"
ok $? "one rank: collective checks SKIP, exit 0 ($status)"

# --- a threshold for an unknown check is refused before any benchmark runs ---
$ACCEPT --machine cpu --quick --no-report --set gemm_tflopz_min=1 >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -ne 0 ] && [ $status -ne 1 ] && grep -q "unknown check 'gemm_tflopz'" "$WORK/err"
ok $? "an unknown check in --set is refused (status $status: $(cat "$WORK/err"))"
$ACCEPT --machine tpu-v9 --no-report >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -ne 0 ] && [ $status -ne 1 ] && grep -q "no section \[tpu-v9\]" "$WORK/err"
ok $? "an unknown machine type is refused (status $status)"

# --- the sbatch template, with a stand-in for srun (--ntasks=N becomes mpiexec -n N) ---
mkdir -p "$WORK/bin"
cat > "$WORK/bin/srun" <<SRUN
#!/bin/sh
n=1
while [ \$# -gt 0 ]; do case "\$1" in --ntasks=*) n=\${1#--ntasks=};; -*) ;; *) break;; esac; shift; done
exec $MPIEXEC -n "\$n" "\$@"
SRUN
chmod +x "$WORK/bin/srun"
PATH="$WORK/bin:$PATH" SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1 SLURM_CPUS_PER_TASK=1 MTC_TOP="$top_srcdir" \
    ACCEPT_DIR="$WORK" ACCEPT_FLAGS="--machine cpu --quick --only gemm,membw --no-report $OWN" \
    timeout 120 bash "$top_srcdir/jobs/templates/accept.sbatch" >"$WORK/out" 2>"$WORK/err"; status=$?
[ $status -eq 0 ] && grep -q "^PASS   membw_rank_gbs" "$WORK/out" && grep -q "acceptance ended with status 0" "$WORK/out" &&
    grep -q "^# \$ srun --ntasks=2 " "$WORK/out"
ok $? "jobs/templates/accept.sbatch runs the suite through srun and exits with its status ($status)"

done_testing
