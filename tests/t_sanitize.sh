#!/bin/sh
# t_sanitize.sh - the whole suite again on an AddressSanitizer +
# UndefinedBehaviorSanitizer build (build-asan/): every unit-test binary and
# every tests/t_*.sh (K3=build-asan/k3, K3_TESTBIN=build-asan/tests), not a
# subset. Each check is reported again as "PASS asan: ..." / "FAIL asan:
# ...". Sanitizer reports are written to files (log_path), so a report from
# a command whose stderr a test throws away still fails the run: bad input
# must give a clean error, never a memory error.
# Skipped here: t_sanitize.sh itself, t_tsan.sh (its own sanitizer build), t_fuzz.sh (its targets are built with
# the sanitizers already; t_serve_asan.sh is its own sanitizer run), t_door.sh and t_arch.sh (build checks of other
# layouts and architectures), t_trust.sh and t_plan.sh (memory cgroups and
# RSS-based plans: ASan's shadow memory changes what they measure) and
# t_cli_misc.sh (checks the literal "./k3" hint), t_numerics_key.sh (a make
# variable, no binary). K3_SANITIZER=1 tells the
# other scripts to leave out their peak-RSS-within-budget checks only.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/asan
mkdir -p $OUT
rm -rf $OUT/reports && mkdir -p $OUT/reports
BIN=build-asan
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 makes gcc guess at snprintf truncation differently from -O2 (plan_model.c)
WARN="-Wno-error=format-truncation"
if ! make -s -j2 BUILD=$BIN K3BIN=$BIN/k3 OPT="-O1 -g $SAN $WARN" all >$OUT/build.log 2>&1; then
    echo "FAIL asan: sanitizer build: $(grep -m1 error $OUT/build.log)"
    exit 0
fi
REPORTS=$(cd $OUT/reports && pwd)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99:log_path=$REPORTS/ubsan"
export K3=$BIN/k3 K3_TESTBIN=$BIN/tests K3_SANITIZER=1
# one suite part; its PASS/FAIL lines are re-labelled
run_part() { # NAME command...
    name=$1
    shift
    "$@" >$OUT/part.out 2>>$OUT/stderr.log
    rc=$?
    sed -n 's/^\(PASS\|FAIL\) /\1 asan: /p' $OUT/part.out
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' $OUT/part.out; then echo "FAIL asan: $name exited with status $rc"; fi
}
: > $OUT/stderr.log
for t in $BIN/tests/test_*; do
    [ -x "$t" ] || continue
    run_part "$t" "$t"
done
# The scripts as run.sh runs them: those that share no state
# K3_TEST_JOBS at a time, each reported in the scripts' order.
. tests/lib.sh
scripts=""
for s in tests/t_*.sh; do
    case $s in
    tests/t_sanitize.sh|tests/t_serve_asan.sh|tests/t_tsan.sh|tests/t_fuzz.sh|tests/t_door.sh|tests/t_arch.sh|tests/t_trust.sh|tests/t_plan.sh|tests/t_cli_misc.sh|tests/t_numerics_key.sh) continue ;;
    esac
    scripts="$scripts $s"
done
rm -rf $OUT/parts
# shellcheck disable=SC2086
run_pool "${K3_TEST_JOBS:-2}" $OUT/parts $scripts
for s in $scripts; do
    n=$(basename "$s" .sh)
    sed -n 's/^\(PASS\|FAIL\) /\1 asan: /p' $OUT/parts/$n.out
    cat $OUT/parts/$n.err >> $OUT/stderr.log
    rc=$(cat $OUT/parts/$n.rc 2>/dev/null || echo 127)
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' $OUT/parts/$n.out; then echo "FAIL asan: $s exited with status $rc"; fi
done
n=$(ls $REPORTS | wc -l)
if [ "$n" -eq 0 ]; then
    echo "PASS asan: no sanitizer reports in the whole suite"
else
    first=$(ls $REPORTS | head -1)
    echo "FAIL asan: $n sanitizer reports ($OUT/reports): $(grep -m1 -E 'ERROR|runtime error' $REPORTS/$first)"
fi
exit 0
