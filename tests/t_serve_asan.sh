#!/bin/sh
# t_serve_asan.sh - k3 serve and k3 chat --endpoint built with AddressSanitizer
# + UndefinedBehaviorSanitizer (build-asan/, as tests/t_sanitize.sh): good
# requests, bad ones (invalid JSON, oversized body, bad fields), a client
# that disconnects mid-stream, a malformed and a cut stream on the client
# side, then a clean shutdown with leak checking; then tests/t_serve_bounds.sh (slowloris,
# oversized bodies) and tests/t_servers.sh with this k3. Any sanitizer report fails.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/serve_asan
rm -rf $OUT
mkdir -p $OUT
if ! make -s BUILD=build-asan K3BIN=build-asan/k3 OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
        build-asan/k3 >$OUT/build.log 2>&1; then
    echo "FAIL asan serve: build: $(grep -m1 error $OUT/build.log)"
    exit 0
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=99
export XDG_DATA_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
K=build-asan/k3
M=$OUT/tiny
./k3 gen $M --preset tiny >/dev/null 2>&1
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT INT TERM
timeout 600 $K serve $M --port 0 --queue 2 > $OUT/serve.log 2>&1 &
SP=$!
PIDS="$SP"
PORT=""
for i in $(seq 1 300); do
    PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/serve.log)
    [ -n "$PORT" ] && break
    sleep 0.1
done
if [ -z "$PORT" ]; then echo "FAIL asan serve: did not start: $(head -3 $OUT/serve.log)"; exit 0; fi
U=http://127.0.0.1:$PORT
C="curl -s -o /dev/null"
$C --data-binary '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":5}' $U/v1/chat/completions
$C --data-binary '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stop":["a","bb"]}' $U/v1/chat/completions
$C --data-binary '{"model":"tiny","prompt":[1,2,3],"max_tokens":3}' $U/v1/completions
$C --data-binary '{"model":"tiny","messages":[{"role":"user","content":"hi"}' $U/v1/chat/completions
$C --data-binary '{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image"}]}],"temperature":"x"}' $U/v1/chat/completions
head -c 1500000 /dev/zero | tr '\0' 'a' > $OUT/big.txt
$C --data-binary @$OUT/big.txt $U/v1/chat/completions
$C -H "X-Big: $(head -c 70000 /dev/zero | tr '\0' 'h')" $U/v1/models
$C $U/metrics
curl -s -N -m 1 -o /dev/null --data-binary '{"model":"tiny","prompt":"go","max_tokens":3000,"stream":true}' $U/v1/completions
printf 'hello\nagain\n' | $K chat --lines --endpoint $U --db $OUT/c.db --json -n 4 > $OUT/chat.out 2> $OUT/chat.err
rc_chat=$?
$C --data-binary '{"model":"tiny","messages":[{"role":"user","content":"after"}],"max_tokens":2}' $U/v1/chat/completions
kill -TERM $SP
wait $SP
rc=$?
PIDS=""
if grep -q "Sanitizer\|runtime error" $OUT/serve.log; then
    echo "FAIL asan serve: $(grep -m1 -E 'ERROR|runtime error' $OUT/serve.log)"
elif [ $rc -ne 0 ]; then
    echo "FAIL asan serve: exit $rc after SIGTERM: $(tail -2 $OUT/serve.log)"
else
    echo "PASS asan serve: good and bad requests, a disconnect mid-stream, clean shutdown, no leaks"
fi
if grep -q "Sanitizer\|runtime error" $OUT/chat.err || [ $rc_chat -ne 0 ]; then
    echo "FAIL asan chat --endpoint: rc $rc_chat $(grep -m1 -E 'ERROR|runtime error|k3:' $OUT/chat.err)"
else
    echo "PASS asan chat --endpoint: two streamed turns, clean exit, no leaks"
fi
# the client on a malformed and a cut stream
for mode in malformed cut; do
    python3 tests/fake_openai.py $mode > $OUT/fake_$mode.out 2>&1 &
    FP=$!
    PIDS="$FP"
    for i in $(seq 1 50); do FPORT=$(sed -n 's/^port //p' $OUT/fake_$mode.out 2>/dev/null); [ -n "$FPORT" ] && break; sleep 0.1; done
    printf 'hi\n' | $K chat --lines --endpoint http://127.0.0.1:$FPORT --db $OUT/f.db --json > /dev/null 2> $OUT/f.err
    rc=$?
    kill $FP 2>/dev/null
    PIDS=""
    # a stream that breaks leaves the message unanswered: exit 3 (docs/COMMANDS.md, "Exit codes")
    if grep -q "Sanitizer\|runtime error" $OUT/f.err || [ $rc -ne 3 ]; then
        echo "FAIL asan chat --endpoint $mode stream: rc $rc (want 3) $(grep -m1 -E 'ERROR|runtime error' $OUT/f.err)"
    else
        echo "PASS asan chat --endpoint $mode stream: exit 3 (not answered), no memory errors"
    fi
done
# the attacks and the server replays of issue 29 with this ASan k3: tests/t_serve_bounds.sh
# (a bounded slowloris, 8 oversized bodies at once, a client gone, harmless fields) and
# tests/t_servers.sh (reasoning of each server, a server ignoring max_tokens, an endless
# /v1/models); every check of theirs must pass and no sanitizer may report
for suite in serve_bounds servers; do
    K3=$K sh tests/t_$suite.sh > $OUT/$suite.txt 2>&1
    sleep 2                                   # the stopped servers' leak reports
    np=$(grep -c '^PASS' $OUT/$suite.txt); nf=$(grep -c '^FAIL' $OUT/$suite.txt)
    rep=$(grep -l "Sanitizer\|runtime error" tests/out/$suite/*.log tests/out/$suite/*.err 2>/dev/null | head -1)
    if [ -n "$rep" ] || [ "$nf" != 0 ] || [ "$np" = 0 ]; then
        echo "FAIL asan $suite: $np passed, $nf failed, sanitizer report in [$rep]: $(grep -m1 '^FAIL' $OUT/$suite.txt; [ -n "$rep" ] && grep -m1 -E 'ERROR|runtime error' $rep)"
    else
        echo "PASS asan $suite: its $np checks pass with the ASan k3, no sanitizer report"
    fi
done
