#!/bin/sh
# coverage.sh [--quick] - what the tests reach (`make coverage`): builds the
# program with gcov's counters (build-cov/), runs the suite on it as the
# sanitizer pass does (every unit-test binary, then tests/t_*.sh with
# K3=build-cov/k3; --quick: the unit tests and `make check`'s forward
# pass only), then prints the lines executed per folder and the least
# covered files. The counters of concurrent processes add up (libgcov locks
# each .gcda file). Figures only: nothing here passes or fails.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
BIN=build-cov
ROOT=$(pwd)
OUT=tests/out/coverage
mkdir -p $OUT
if ! make -s -j2 BUILD=$BIN K3BIN=$BIN/k3 OPT="-O1 -g --coverage -Wno-error=format-truncation" all >$OUT/build.log 2>&1; then
    echo "coverage: the build failed: $(grep -m1 'error:' $OUT/build.log)" >&2
    exit 1
fi
find $BIN -name '*.gcda' -delete
export K3=$BIN/k3 K3_TESTBIN=$BIN/tests
for t in $BIN/tests/test_*; do [ -x "$t" ] && "$t" >/dev/null 2>&1; done
if [ "$1" = --quick ]; then
    FORWARD_MODELS="tiny_bf16_1 py_mixed" sh tests/t_forward.sh >/dev/null 2>&1
else
    scripts=""
    for s in tests/t_*.sh; do
        case $s in   # other builds of their own, or measurements of this machine
        tests/t_sanitize.sh|tests/t_serve_asan.sh|tests/t_tsan.sh|tests/t_fuzz.sh|tests/t_door.sh|tests/t_arch.sh|tests/t_numerics_key.sh) continue ;;
        esac
        scripts="$scripts $s"
    done
    # shellcheck disable=SC2086
    run_pool "${K3_TEST_JOBS:-2}" $OUT/parts $scripts
fi
# gcov's summary of each object: "File 'x.c'" then "Lines executed:P% of N"
for d in engine/base engine/kernels engine/text engine/formats engine/io engine/weights engine/model engine/plan \
         offline app chat ui history; do
    [ -d $BIN/$d ] || continue
    (cd $BIN/$d && gcov -n -o . "$ROOT"/$d/*.c 2>/dev/null) |
        awk -v dir=$d '/^File .*\.c.$/ { f = $2; gsub(/\047/, "", f); next }
                      /^Lines executed:/ && f != "" { split($2, a, "%"); p = substr(a[1], 10); n = $4
                          hit += p * n / 100; all += n; printf "%s %.1f %d\n", f, p, n > "/dev/stderr"; f = "" }
                      END { if (all) printf "%-16s %6.1f%% of %6d lines\n", dir, 100 * hit / all, all }'
done 2>$OUT/files.txt
echo "least covered files (lines executed, of):"
sort -k2 -n $OUT/files.txt | awk '$3 >= 40' | head -12 | awk '{ printf "  %-40s %5.1f%% of %d\n", $1, $2, $3 }'
