# tests/tools/fault_table.sh: the record and the closing table of a fault-injection suite
# (tests/mpi/fault_injection_test.sh; issue 22's I/O-error suite reuses it). Sourced after
# tests/lib.sh. A suite runs each case as trials and reports each trial:
#     fault_trial "SIGKILL during training" 0     # 0: the job survived as the case expects
#     fault_trial "SIGKILL during training" 1 "restart lost iteration 7"   # a failure, why
# fault_case_ok "CASE" "what is expected" closes a case with one TAP line (ok when every trial
# survived, and at least one ran); fault_skip_case "CASE" "why" records a TAP skip.
# fault_print_table prints the table (case, trials, survived) as TAP comments, one row per case
# in the order the cases first appeared.
FAULT_RECORD="$WORK/fault_record.tsv"
: > "$FAULT_RECORD"

fault_trial() {  # fault_trial CASE STATUS [WHY]
    why=$(printf '%s' "${3:-no reason given}" | tr '\t\n' '  ')
    printf '%s\t%s\t%s\n' "$1" "$2" "$why" >> "$FAULT_RECORD"
    [ "$2" -eq 0 ] || diag "$1: trial failed: $why"
}

# a failed case's TAP line carries its first failure's reason (a CI log shows only TAP lines)
fault_case_ok() {  # fault_case_ok CASE EXPECTATION
    trials=$(awk -F'\t' -v c="$1" '$1 == c' "$FAULT_RECORD" | wc -l)
    failed=$(awk -F'\t' -v c="$1" '$1 == c && $2 != 0' "$FAULT_RECORD" | wc -l)
    first_why=$(awk -F'\t' -v c="$1" '$1 == c && $2 != 0 { print $3; exit }' "$FAULT_RECORD" | cut -c1-400)
    [ "$trials" -gt 0 ] && [ "$failed" -eq 0 ]
    ok $? "$1: $2 ($((trials - failed))/$trials trials survived)${first_why:+; first failure: $first_why}"
}

fault_skip_case() {  # fault_skip_case CASE WHY
    printf '%s\tskip\n' "$1" >> "$FAULT_RECORD"
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - $1 # SKIP $2"
}

fault_print_table() {
    awk -F'\t' '
        !($1 in trials) { order[n++] = $1; trials[$1] = 0; survived[$1] = 0; skipped[$1] = 0 }
        $2 == "skip" { skipped[$1] = 1; next }
        { trials[$1]++; if ($2 == 0) survived[$1]++ }
        END {
            printf "# %-58s %7s %9s\n", "case", "trials", "survived"
            for (i = 0; i < n; i++) {
                c = order[i]
                if (skipped[c]) printf "# %-58s %7s %9s\n", c, "-", "skipped"
                else printf "# %-58s %7d %9d\n", c, trials[c], survived[c]
            }
        }' "$FAULT_RECORD"
}
