# parity_tools.sh: sourced by the Hugging Face parity scripts (perf/*_hf_parity.sh). tool NAME
# prints the executable NAME from the build tree ($bin/app, $bin/tests/tools, $bin), else from
# PATH (a devpack on the GPU machine), else names what is missing and exits; step LOG COMMAND...
# runs a step with its output in LOG and, on failure, prints the step's last lines and exits 1.
tool() {
    for candidate in "$bin/app/$1" "$bin/tests/tools/$1" "$bin/$1"; do
        [ -x "$candidate" ] && [ ! -d "$candidate" ] && { echo "$candidate"; return; }
    done
    command -v "$1" || { echo "$(basename "$0"): $1 is neither in $bin nor on PATH (make $1; or pack it)" >&2; exit 1; }
}
step() {
    log=$1; shift
    "$@" > "$log" 2>&1 || { echo "FAIL: $(basename "$log" .out) step failed ($log):"; tail -5 "$log"; exit 1; }
}
