#!/bin/sh
# t_tsan.sh - the threaded paths on a ThreadSanitizer build (gcc
# -fsanitize=thread, build-tsan/; `make tsan`):
#  - the statistics: counters and the record ring written by one thread and
#    read by another (tool_trust stats-torn), and read while an evaluation
#    streams experts through the I/O threads (stats-stream);
#  - the I/O engine: a streamed evaluation with the pread pool and with
#    io_uring (completions on its own thread), with router-lookahead
#    prefetch too; the logits must equal a fully resident evaluation's;
#  - an evaluation on a thread other than the model's creator (the
#    full-screen chat's worker thread; tool_trust threads);
#  - the full-screen chat (t_tui.sh on this build): the UI thread draws
#    and takes Ctrl-C while its worker thread runs the turn;
#  - `k3 serve` with concurrent clients (streamed and not, one that
#    disconnects mid-stream, /metrics while generating), then SIGTERM.
# libgomp is not instrumented for ThreadSanitizer (its barriers are futexes
# it cannot see, so every parallel region would be reported), so OpenMP runs
# one thread here: OMP_NUM_THREADS=1, and tool_trust threads with a count of
# 1. No suppressions. Races between OpenMP threads inside a kernel are
# covered by the bit-identical logits at 1, 2, 3 and 5 threads (t_trust.sh,
# t_forward.sh) instead. Reports are written to files (log_path), so a report
# from a command whose stderr is thrown away still fails the run.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/tsan
mkdir -p $OUT
rm -rf $OUT/reports && mkdir -p $OUT/reports
BIN=build-tsan
if ! make -s -j2 BUILD=$BIN K3BIN=$BIN/k3 OPT="-O1 -g -fsanitize=thread -Wno-error=format-truncation" all >$OUT/build.log 2>&1; then
    echo "FAIL tsan: ThreadSanitizer build: $(grep -m1 error $OUT/build.log)"
    exit 0
fi
REPORTS=$(cd $OUT/reports && pwd)
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:log_path=$REPORTS/tsan"
export OMP_NUM_THREADS=1
TOOL=$BIN/tests/tool_trust
M=$OUT/small
[ -f $M/config.json ] || ./k3 gen $M --preset small --seed 31 >/dev/null 2>&1
IDS=$(seq -s ' ' 5 7 600 | cut -d' ' -f1-40)
MIN=$(./k3 eval $M --ids "$IDS" --logits $OUT/x.f32 --mem 1M 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
[ -n "$MIN" ] || MIN=40
K=$BIN/k3
# under ThreadSanitizer the process itself is larger (its runtime and
# shadow): a budget just above the sanitized binary's own minimum streams
TMIN=$(OMP_NUM_THREADS=1 $K eval $M --ids "$IDS" --logits $OUT/x.f32 --mem 1M 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
TMEM=$((${TMIN:-$((MIN + 20))} + 2))

# relabel one part's PASS/FAIL lines
run_part() { # NAME command...
    name=$1
    shift
    "$@" >$OUT/part.out 2>>$OUT/stderr.log
    rc=$?
    sed -n 's/^\(PASS\|FAIL\) /\1 tsan: /p' $OUT/part.out
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' $OUT/part.out; then echo "FAIL tsan: $name exited with status $rc"; fi
}
: > $OUT/stderr.log

# ---- statistics ----
run_part stats-torn $TOOL stats-torn
run_part stats-stream $TOOL stats-stream $M "$(echo $IDS | cut -d' ' -f1-8)" $TMEM

# ---- another thread than the creator's ----
run_part threads $TOOL threads $M "$IDS" 1

# ---- the full-screen chat: the UI thread and its engine worker ----
# (t_tui.sh drives it in tmux: streaming, gauges, Ctrl-C mid-answer, /resume)
run_part t_tui.sh env K3=$K sh tests/t_tui.sh

# ---- the I/O engine: pread pool, io_uring, prefetch ----
./k3 eval $M --ids "$IDS" --logits $OUT/ref.f32 2>/dev/null
for io in "pool" "uring" "pool --prefetch" "uring --prefetch"; do
    # shellcheck disable=SC2086
    $K eval $M --ids "$IDS" --logits $OUT/io.f32 --mem ${TMEM}M --io-backend $io >/dev/null 2>$OUT/io.err
    code=$?
    if [ $code -eq 0 ] && grep -q "expert cache" $OUT/io.err && ! grep -q "fully resident" $OUT/io.err && \
       cmp -s $OUT/io.f32 $OUT/ref.f32; then
        echo "PASS tsan: streamed eval with --io-backend $io: logits = fully resident"
    else
        echo "FAIL tsan: streamed eval with --io-backend $io: exit $code, $(grep -m1 'k3:' $OUT/io.err)"
    fi
done

# ---- k3 serve with concurrent clients ----
SM=$OUT/tiny
[ -f $SM/config.json ] || ./k3 gen $SM --preset tiny --seed 3 >/dev/null 2>&1
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT INT TERM
timeout 300 $K serve $SM --port 0 --queue 8 > $OUT/serve.log 2>&1 &
SP=$!
PIDS=$SP
PORT=""
for i in $(seq 1 600); do
    PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/serve.log)
    [ -n "$PORT" ] && break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    echo "FAIL tsan: serve did not start: $(head -3 $OUT/serve.log)"
else
    U=http://127.0.0.1:$PORT
    CP=""
    for i in 1 2 3 4 5 6; do
        if [ $((i % 2)) = 0 ]; then stream=true; else stream=false; fi
        curl -s -o $OUT/c$i.out -w '%{http_code}\n' --data-binary \
            '{"model":"tiny","messages":[{"role":"user","content":"hello '$i'"}],"max_tokens":6,"temperature":0,"stream":'$stream'}' \
            $U/v1/chat/completions > $OUT/c$i.code &
        CP="$CP $!"
    done
    curl -s -N -m 2 -o /dev/null --data-binary '{"model":"tiny","prompt":"go","max_tokens":3000,"stream":true}' $U/v1/completions &
    CP="$CP $!"
    for i in 1 2 3; do curl -s -o /dev/null $U/metrics & CP="$CP $!"; done
    # shellcheck disable=SC2086
    wait $CP
    ok=0
    for i in 1 2 3 4 5 6; do [ "$(cat $OUT/c$i.code)" = 200 ] && ok=$((ok + 1)); done
    kill -TERM $SP
    wait $SP
    rc=$?
    PIDS=""
    if [ $ok = 6 ] && [ $rc = 0 ]; then
        echo "PASS tsan: serve: 6 concurrent chat clients (3 streamed) answered, a disconnect mid-stream, /metrics meanwhile, clean SIGTERM"
    else
        echo "FAIL tsan: serve: $ok of 6 clients got 200, exit $rc after SIGTERM: $(grep -m1 'k3' $OUT/serve.log)"
    fi
fi

n=$(ls $REPORTS | wc -l)
if [ "$n" -eq 0 ]; then
    echo "PASS tsan: no ThreadSanitizer reports (OMP_NUM_THREADS=1, no suppressions)"
else
    first=$(ls $REPORTS | head -1)
    echo "FAIL tsan: $n ThreadSanitizer reports ($OUT/reports): $(grep -m1 'SUMMARY' $REPORTS/$first)"
fi
exit 0
