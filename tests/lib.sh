# lib.sh - what the shell suites share (sourced: `. tests/lib.sh`).
# Every check prints one line, "PASS name" or "FAIL name: why"; tests/run.sh
# counts them.
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
