#!/bin/sh
# fp8_native_cpu_test.sh: the fp8 GEMMs on codes (app/model/fp8_linear.h's "native" path, the one
# the CUDA backend takes) run on the CPU backend's reference of them (kernels/cpu/cpu_fp8_gemm.c)
# with MTC_FP8_NATIVE=1, against the CPU's default fp8 emulation, on fp8_training_test's tiny GPT
# and on the tiny Mixtral (configs/mixtral-tiny.args with a shared expert):
#  - the native losses are within 3e-4 relative of the emulation's over 10 (GPT) or 6 (MoE)
#    iterations, for delayed and tensorwise scaling (hybrid), and not bitwise theirs: both
#    compute the same fp8 operands, but the emulation rounds each dequantized operand (code x
#    scale_inv) to fp32 before its GEMM while the fp8 GEMM sums the exact code products and scales
#    the sum once; the last-bit differences then move an occasional later operand across an fp8
#    rounding boundary (one fp8 step, 2^-3 or 2^-2 of the value), which is why the tolerance is
#    that of fp8_training_test's tensor-parallel runs (3e-4; 2e-5 measured) and not a few ulps;
#  - the start-up line names the path; a run where the path must differ (the emulation, or
#    MTC_FP8_EXPERTS_EMULATE=1 for the experts alone) gives other parameters, so a native path
#    silently off fails the test;
#  - TP2 + SP and DP2 with the native path: the one-rank native losses within 3e-4 (the
#    tolerance of fp8_training_test's parallel runs, for its reasons);
#  - the step's weight codes (MTC_FP8_WEIGHT_CACHE transposed, both, off) with 4 micro-batches a
#    step: bitwise the same parameters;
#  - the MoE experts as one fp8 GEMM per expert row block (EP1, EP2, TP2 + SP with
#    --expert-tensor-parallel-size 1 and EP2, the shared expert, --no-fp8-wgrad): within 3e-4 of
#    the emulation (EP1) and of the one-rank native run (the parallel layouts);
#  - MTC_FP8_NATIVE=yes is refused with one line.
. "${top_srcdir:-.}/tests/lib.sh"

. "$top_srcdir/tests/mpi/fp8_corpus.sh"
GPT="$BASE --bf16"
NATIVE_LINE="(the GEMMs as fp8 GEMMs on codes (the CPU's reference of cuBLASLt's: MTC_FP8_NATIVE=1)"
hash_of() { grep "final parameter hash" "$WORK/out" | sed 's/.*: //'; }
# run NAME NRANKS FLAGS... : a run, its losses in $WORK/NAME and its parameter hash in $WORK/NAME.hash
run() {
    name=$1; n=$2; shift 2
    run_app "$n" "$@"
    status=$?
    [ $status -eq 0 ] || tail -3 "$WORK/err" | sed 's/^/#   /'
    losses > "$WORK/$name"; hash_of > "$WORK/$name.hash"
    return $status
}
differs() { [ -s "$WORK/$1.hash" ] && [ -s "$WORK/$2.hash" ] && ! cmp -s "$WORK/$1.hash" "$WORK/$2.hash"; }

# ---- a GPT: native against the emulation -------------------------------------------------------
for recipe in delayed tensorwise; do
    run emu_$recipe 1 $GPT $FP8 --fp8-recipe $recipe
    MTC_FP8_NATIVE=1 run nat_$recipe 1 $GPT $FP8 --fp8-recipe $recipe
    ok $? "$recipe: MTC_FP8_NATIVE=1 trains 10 iterations"
    grep -qF "$NATIVE_LINE)" "$WORK/out" && differs emu_$recipe nat_$recipe
    ok $? "$recipe: the start-up line names the fp8 GEMMs and the parameters are not the emulation's"
    worst=$(within "$WORK/emu_$recipe" "$WORK/nat_$recipe" 3e-4)
    ok $? "$recipe: the native losses within 3e-4 of the emulation's (largest difference $worst)"
done

# ---- tensor and data parallelism on the native path ----------------------------------------------
for layout in "TP2 + SP:--tensor-model-parallel-size 2 --sequence-parallel" "DP2:--use-distributed-optimizer"; do
    MTC_FP8_NATIVE=1 run nat_par 2 $GPT $FP8 ${layout#*:}
    worst=$(within "$WORK/nat_delayed" "$WORK/nat_par" 3e-4)
    ok $? "${layout%%:*} (${layout#*:}), native: the one-rank native losses within 3e-4 (largest difference $worst)"
done

# ---- the step's weight codes: bitwise whichever are kept -----------------------------------------
MTC_FP8_NATIVE=1 MTC_FP8_WEIGHT_CACHE=transposed run cache_transposed 1 $GPT $FP8 --train-iters 4
MTC_FP8_NATIVE=1 MTC_FP8_WEIGHT_CACHE=both run cache_both 1 $GPT $FP8 --train-iters 4
MTC_FP8_NATIVE=1 MTC_FP8_WEIGHT_CACHE=off run cache_off 1 $GPT $FP8 --train-iters 4
[ -s "$WORK/cache_off.hash" ] && cmp -s "$WORK/cache_off.hash" "$WORK/cache_transposed.hash" &&
    cmp -s "$WORK/cache_off.hash" "$WORK/cache_both.hash" && cmp -s "$WORK/cache_off" "$WORK/cache_both"
ok $? "MTC_FP8_WEIGHT_CACHE transposed, both and off (4 micro-batches a step): the same bits ($(cat "$WORK/cache_off.hash"))"

MTC_FP8_NATIVE=yes run_app 1 $GPT $FP8 --train-iters 1 --lr-warmup-iters 1
[ $? -ne 0 ] && [ "$(grep -c 'error:' "$WORK/err")" -eq 1 ] && grep -q "MTC_FP8_NATIVE=yes: expected 0 or 1" "$WORK/err"
ok $? "refused: MTC_FP8_NATIVE=yes -> $(grep -m1 'error:' "$WORK/err" | cut -c1-100)"

# ---- the experts as fp8 GEMMs ---------------------------------------------------------------------
MOE="--args-file $top_srcdir/configs/mixtral-tiny.args --train-iters 6 --lr-warmup-iters 2 --log-interval 1 --eval-iters 0
     --bf16 --device cpu --deterministic-mode $FP8 --moe-shared-expert-intermediate-size 32"
run moe_emu 1 $MOE
MTC_FP8_NATIVE=1 run moe_nat 1 $MOE
ok $? "the tiny Mixtral (a shared expert) with MTC_FP8_NATIVE=1 trains"
grep -qF "$NATIVE_LINE, the experts' as one fp8 GEMM per expert)" "$WORK/out"
ok $? "the start-up line says the experts run as one fp8 GEMM per expert"
MTC_FP8_NATIVE=1 MTC_FP8_EXPERTS_EMULATE=1 run moe_nat_emu_experts 1 $MOE
grep -qF "the experts' emulated (MTC_FP8_EXPERTS_EMULATE=1)" "$WORK/out" && differs moe_nat moe_nat_emu_experts &&
    differs moe_emu moe_nat_emu_experts
ok $? "the experts' fp8 GEMMs change the parameters against MTC_FP8_EXPERTS_EMULATE=1 (and that run's against the emulation's)"
worst=$(within "$WORK/moe_emu" "$WORK/moe_nat" 3e-4)
ok $? "MoE native: the emulation's losses within 3e-4 (largest difference $worst)"
worst=$(within "$WORK/moe_nat_emu_experts" "$WORK/moe_nat" 3e-4)
ok $? "MoE native: the run with the experts emulated within 3e-4 (largest difference $worst)"
MTC_FP8_NATIVE=1 run moe_ep2 2 $MOE --expert-model-parallel-size 2
worst=$(within "$WORK/moe_nat" "$WORK/moe_ep2" 3e-4)
ok $? "MoE native EP2: the one-rank native losses within 3e-4 (largest difference $worst)"
MTC_FP8_NATIVE=1 run moe_etp1 2 $MOE --tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 \
    --expert-model-parallel-size 2
grep -qF "the experts' as one fp8 GEMM per expert)" "$WORK/out"
status=$?
worst=$(within "$WORK/moe_nat" "$WORK/moe_etp1" 3e-4)
[ $? -eq 0 ] && [ $status -eq 0 ]
ok $? "MoE native TP2 + SP x ETP1 x EP2 (each expert whole): the one-rank native losses within 3e-4 (largest difference $worst)"
MTC_FP8_NATIVE=1 run moe_tp2 2 $MOE --tensor-model-parallel-size 2 --sequence-parallel
grep -qF "the experts' fc1 as one fp8 GEMM per expert, their fc2 emulated (its widths are not multiples of 16)" "$WORK/out"
status=$?
worst=$(within "$WORK/moe_nat" "$WORK/moe_tp2" 3e-4)
[ $? -eq 0 ] && [ $status -eq 0 ]
ok $? "MoE native TP2 + SP (experts split: fc2's input width 24 keeps it emulated, the log says so): within 3e-4 of one rank ($worst)"
run moe_emu_nowgrad 1 $MOE --no-fp8-wgrad
MTC_FP8_NATIVE=1 run moe_nat_nowgrad 1 $MOE --no-fp8-wgrad
MTC_FP8_NATIVE=1 MTC_FP8_EXPERTS_EMULATE=1 run moe_nat_nowgrad_emu 1 $MOE --no-fp8-wgrad
worst=$(within "$WORK/moe_emu_nowgrad" "$WORK/moe_nat_nowgrad" 3e-4)
[ $? -eq 0 ] && differs moe_nat_nowgrad moe_nat_nowgrad_emu && differs moe_nat_nowgrad moe_nat
ok $? "MoE native --no-fp8-wgrad: the emulation's losses within 3e-4 ($worst), the experts' fp8 GEMMs change the result"

done_testing
