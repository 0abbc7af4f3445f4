# tests/mpi/parallel_compare.sh: the parallel-equivalence checks shared by parallel_test.sh (GPT)
# and llama_parallel_test.sh (Llama), sourced after tests/lib.sh with $MODEL set to the flags of
# the model under test. `reference NAME FLAGS...` runs one rank; `layout NAME NRANKS FLAGS...`
# runs a parallel layout and checks that its losses over 5 iterations match the reference's
# within $TOLERANCE relative (default 1e-5) and every parameter after 5 steps within
# $PARAM_TOLERANCE (default 1e-5; max |difference| / max |value| per tensor). The reference compared with is $base (set by reference; may be reset).
# Key biases (zero gradient: compare_params.c) are held apart, at most $KEY_BIAS_BOUND (1e-4); a
# model of 4 heads of $KV_CHANNELS channels (default 16) in $QUERY_GROUPS groups (default 4:
# multi-head) lays its qkv rows out by group.
COMPARE="$top_builddir/tests/tools/compare_params"
TOLERANCE=${TOLERANCE:-1e-5}              # losses: a test may ask for a tighter match
PARAM_TOLERANCE=${PARAM_TOLERANCE:-1e-5}  # parameters after 5 AdamW steps
# the scale a tensor's differences are measured against is at least what 5 AdamW steps at the
# tests' learning rates (1e-3 and below) move a parameter: a bias 5 steps from its zero
# initialization holds values of a few 1e-3, where rounding differences of the layouts' summation
# orders, normalized by Adam, reach 1e-5 of its own largest value (a pre-MLP norm bias: 2.9e-8
# absolute, 1.04e-5 relative under OpenBLAS's Haswell kernels, 3e-6 under Prescott's); a layout
# that lost a gradient moves it by the learning rate, 1e-1 of this floor
export COMPARE_PARAMS_FLOOR=${COMPARE_PARAMS_FLOOR:-1e-2}

losses() { json_field "$1" train lm_loss; }

# losses_match A B ROWS TOLERANCE: A and B hold losses, one iteration a line in the same columns;
# true when they have ROWS lines and every value of B is within TOLERANCE (relative) of A's
# (a value 0 in A: absolute); prints the worst relative difference
losses_match() {
    paste "$1" "$2" | awk -v rows="$3" -v tol="$4" '{ half = NF / 2; n++
        for (i = 1; i <= half; i++) { d = ($i - $(i + half)) / ($i != 0 ? $i : 1); if (d < 0) d = -d; if (d > worst) worst = d } }
        END { printf "# losses: worst relative difference %g over %d iterations\n", worst, n
              exit !(n == rows && worst < tol) }'
}

# reference NAME FLAGS... : the single-rank run the layouts that follow are compared with
reference() {
    base=$1; shift
    run_app 1 $MODEL "$@" --metrics-file "$WORK/$base.jsonl" --dump-parameters "$WORK/$base.bin"
    ok $? "single-rank reference run ($base)"
    losses "$WORK/$base.jsonl" > "$WORK/$base.loss"
}

# layout NAME NRANKS FLAGS... : train, then compare losses and parameters with the reference
layout() {
    name=$1; n=$2; shift 2
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run_app "$n" $MODEL "$@" --metrics-file "$WORK/$tag.jsonl" --dump-parameters "$WORK/$tag.bin"
    status=$?
    [ $status -eq 0 ] || { ok 1 "$name: run failed ($status)"; sed 's/^/#   /' "$WORK/err" | tail -5; return; }
    losses "$WORK/$tag.jsonl" > "$WORK/$tag.loss"
    losses_match "$WORK/$base.loss" "$WORK/$tag.loss" 5 "$TOLERANCE"
    ok $? "$name: losses over 5 iterations match one rank within $TOLERANCE"
    result=$("$COMPARE" "$WORK/$base.bin" "$WORK/$tag.bin" "$PARAM_TOLERANCE" 4 "${KV_CHANNELS:-16}" "${QUERY_GROUPS:-4}" "${KEY_BIAS_BOUND:-1e-4}"); status=$?
    diag "$result"
    ok $status "$name: every parameter after 5 steps matches one rank within $PARAM_TOLERANCE"
}
