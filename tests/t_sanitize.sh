#!/bin/sh
# t_sanitize.sh - the unit tests and the main command paths again, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/). Any report
# fails the run: bad input must give a clean error, never memory errors.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/asan
mkdir -p $OUT
if ! make -s BUILD=build-asan K3BIN=build-asan/k3 OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
        build-asan/k3 build-asan/tests/tool_engine build-asan/tests/test_kernels build-asan/tests/test_k3_ops \
        build-asan/tests/test_tokenizer build-asan/tests/test_history build-asan/tests/test_manifest build-asan/tests/test_sampler >$OUT/build.log 2>&1; then
    echo "FAIL sanitizer build: $(grep -m1 error $OUT/build.log)"
    exit 0
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=99
K=build-asan/k3
check() { # NAME EXPECTED_CODE command...
    name=$1 want=$2
    shift 2
    "$@" >$OUT/out 2>$OUT/err
    code=$?
    if grep -q "Sanitizer\|runtime error" $OUT/err; then
        echo "FAIL asan $name: $(grep -m1 -E 'ERROR|runtime error' $OUT/err)"
    elif [ $code -ne $want ]; then
        echo "FAIL asan $name: exit $code, want $want: $(head -c 200 $OUT/err)"
    else
        echo "PASS asan $name"
    fi
}
for t in test_kernels test_k3_ops test_tokenizer test_history test_manifest test_sampler; do
    check "$t" 0 build-asan/tests/$t
done
M=tests/out/asan/tiny
[ -f $M/config.json ] || ./k3 gen $M --preset tiny >/dev/null 2>&1
K3M=tests/out/asan/k3tiny
[ -f $K3M/config.json ] || ./k3 gen $K3M --preset k3-tiny >/dev/null 2>&1
IDS=$(seq -s ' ' 3 5 200)
check "eval tiny" 0 $K eval $M --ids "$IDS" --logits $OUT/x.f32
check "eval tiny streamed" 0 $K eval $M --ids "$IDS" --logits $OUT/x.f32 --mem 80M
check "eval k3-tiny streamed" 0 $K eval $K3M --ids "$IDS" --logits $OUT/x.f32 --mem 80M --io-backend uring
check "run chat k3-tiny" 0 $K run $K3M -p "hello there" -n 6 --chat
check "tokenize" 0 $K tokenize $M --text "Hello, 世界 123 🙂"
printf 'hi\nhow are you?\n' > $OUT/in.txt
check "chat plain" 0 sh -c "$K chat $M --plain --db $OUT/h.db -n 5 < $OUT/in.txt"
for mode in truncated header_past_end overlap missing_tensor config_bad_json; do
    /usr/bin/python3 tests/ref/corrupt_ckpt.py $M $OUT/bad_$mode $mode
    check "bad checkpoint $mode" 1 $K eval $OUT/bad_$mode --ids "1 2" --logits $OUT/x.f32
done
check "too small budget" 1 $K eval $M --ids "1 2" --logits $OUT/x.f32 --mem 2M
K3_TEST_FAIL_READ=30 check "injected EIO" 1 $K eval $M --ids "$IDS" --logits $OUT/x.f32 --mem 80M
