#!/bin/sh
# run.sh - the whole test suite: unit-test binaries, then the shell-driven
# suites (tests/t_*.sh). Every test prints "PASS name" or "FAIL name: why";
# this script counts them and ends with the line "N passed, N failed".
#
# The scripts that share no state (each writes only under its own
# tests/out/NAME folder) run K3_TEST_JOBS at a time (default 2, the cores
# here); the ones in lib.sh's K3_SERIAL_SCRIPTS run alone after them. The
# log keeps the scripts' order whatever finished first. K3_TEST_JOBS=1 runs
# everything one after another.
#
# A suite that silently runs fewer checks (a script that stops early, a loop
# that finds no models, a binary that is not built) must not pass: the
# number of checks run (passed + failed) must reach the count in
# tests/expected_count. When you add checks, raise that number to the new
# total printed at the end ("N checks run"); lower it only with a reason in
# the commit message.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
# k3 run reads a piped stdin as its prompt (after -p TEXT): a suite started
# with stdin on a pipe that never closes (ssh, a CI runner) must not wait on it
exec < /dev/null
OUT=tests/out
mkdir -p $OUT
LOG=$OUT/run.log
PARTS=$OUT/parts
rm -rf $PARTS
: > $LOG
: > $OUT/stderr.log
t0=$(date +%s)
# the unit tests plan at the default speeds, whatever this machine cached
rm -rf $OUT/unit.cache
export XDG_CACHE_HOME=$PWD/$OUT/unit.cache
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $t" | tee -a $LOG
    "$t" > $OUT/current.txt 2>>$OUT/stderr.log
    rc=$?
    tee -a $LOG < $OUT/current.txt
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' $OUT/current.txt; then
        echo "FAIL $t: exited with status $rc" | tee -a $LOG
    fi
done
parallel="" serial=""
for s in tests/t_*.sh; do
    [ -f "$s" ] || continue
    if is_serial_script "$s"; then serial="$serial $s"; else parallel="$parallel $s"; fi
done
# The longest scripts start first, so the two lanes end together (seconds
# each took in a two-lane run on a loaded machine: t_draft 449, t_chat 213,
# t_stream 174, t_serve 119, t_endpoint_tui 96).
start=""
for s in tests/t_draft.sh tests/t_chat.sh tests/t_stream.sh tests/t_serve.sh tests/t_endpoint_tui.sh $parallel; do
    case " $start " in *" $s "*) ;; *) case " $parallel " in *" $s "*) start="$start $s" ;; esac ;; esac
done
# report SCRIPT: its output into the log, and a FAIL when it exited badly
# without saying why
report() {
    n=$(basename "$1" .sh)
    echo "== $1 ($(cat $PARTS/$n.secs 2>/dev/null || echo '?') s)" | tee -a $LOG
    tee -a $LOG < $PARTS/$n.out
    cat $PARTS/$n.err >> $OUT/stderr.log
    rc=$(cat $PARTS/$n.rc 2>/dev/null || echo 127)
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' $PARTS/$n.out; then
        echo "FAIL $1: exited with status $rc" | tee -a $LOG
    fi
}
# shellcheck disable=SC2086
run_pool "${K3_TEST_JOBS:-2}" $PARTS $start
for s in $parallel; do report "$s"; done
for s in $serial; do
    run_pool 1 $PARTS "$s"
    report "$s"
done
expected=$(cat tests/expected_count 2>/dev/null || echo 1)
passed=$(grep -c '^PASS ' $LOG)
failed=$(grep -c '^FAIL ' $LOG)
if [ $((passed + failed)) -lt "$expected" ]; then
    echo "FAIL tests/run.sh: only $((passed + failed)) checks ran, tests/expected_count wants at least $expected" | tee -a $LOG
    failed=$((failed + 1))
fi
echo "$((passed + failed)) checks run (tests/expected_count: $expected) in $(( $(date +%s) - t0 )) s, K3_TEST_JOBS=${K3_TEST_JOBS:-2}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
