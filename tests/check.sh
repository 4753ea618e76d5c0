#!/bin/sh
# check.sh - the fast subset (`make check`, well under a minute on 2 cores):
# every unit-test binary, then the forward pass against the numpy reference
# on one generated preset and one independently written checkpoint. `make
# test` stays the whole suite. Ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out
mkdir -p $OUT
LOG=$OUT/check.log
: > $LOG
for t in build/tests/test_*; do
    [ -x "$t" ] || continue
    "$t" 2>>$OUT/check.stderr | tee -a $LOG
done
FORWARD_MODELS="tiny_bf16_1 py_mixed" sh tests/t_forward.sh 2>>$OUT/check.stderr | tee -a $LOG
passed=$(grep -c '^PASS ' $LOG)
failed=$(grep -c '^FAIL ' $LOG)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
