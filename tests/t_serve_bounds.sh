#!/bin/sh
# t_serve_bounds.sh - `k3 serve` against hostile and sloppy clients (issue 29,
# items 10-12 and 14), on 127.0.0.1 (and 127.0.0.2 as a second address),
# each server under `timeout`, killed by the trap; every attack is bounded
# in count and time:
#  - fields real clients send that change nothing (tools: [], tool_choice
#    none, response_format text, parallel_tool_calls, logprobs false,
#    presence_penalty 0, store, metadata) are accepted; a non-empty tools or
#    a JSON schema is a clear 400;
#  - the memory plan is printed at start, with the state cache and what
#    requests may hold, counted against --mem;
#  - 8 clients POSTing ~1 MB bodies of {"messages":[{},{},...]} at once are
#    refused before the parse: the server's peak RSS grows by less than
#    40 MB (on 18c9cfb each body became 77 MB of jansson objects, measured);
#  - slowloris: 40 connections sending a header byte every 0.5 s from one
#    address: another address still gets /health at once (per-address
#    limit), and after --request-timeout 2 they are cut off and the first
#    address is answered again;
#  - a non-stream client that sends one more byte after its request and
#    closes is seen to be gone: its generation is cancelled; one that only
#    half-closes (shutdown(SHUT_WR)) gets its answer.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/serve_bounds
rm -rf $OUT
mkdir -p $OUT
K3=${K3:-./k3}
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT INT TERM
ok() {  # ok FLAG NAME WHY
    if [ $# -ge 3 ] && [ "$1" = 1 ]; then echo "PASS $2"; elif [ $# -ge 3 ]; then echo "FAIL $2: $3"; else echo "FAIL $1: $2"; fi
}
start() {  # start NAME ARGS...: sets PORT and KPID (the k3 process)
    name=$1; shift
    timeout 300 $K3 serve $M --port 0 "$@" > $OUT/$name.log 2>&1 &
    PIDS="$PIDS $!"
    TPID=$!
    PORT=""
    for i in $(seq 1 100); do
        PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/$name.log)
        [ -n "$PORT" ] && break
        sleep 0.1
    done
    KPID=$(pgrep -P $TPID | head -1)
    [ -n "$PORT" ] || echo "FAIL serve bounds: server $name did not start: $(cat $OUT/$name.log)"
}
post() { curl -s -o $4 -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$3" "http://127.0.0.1:$1$2"; }

start a --mem 400M --request-timeout 2
A=$PORT
H='"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":4'
s1=$(post $A /v1/chat/completions "{$H,\"tools\":[],\"tool_choice\":\"none\",\"parallel_tool_calls\":false}" $OUT/h1.json)
s2=$(post $A /v1/chat/completions "{$H,\"response_format\":{\"type\":\"text\"},\"logprobs\":false,\"presence_penalty\":0,\"frequency_penalty\":0.0}" $OUT/h2.json)
s3=$(post $A /v1/chat/completions "{$H,\"store\":false,\"metadata\":{\"app\":\"x\"},\"top_logprobs\":0}" $OUT/h3.json)
s4=$(post $A /v1/chat/completions '{"model":"small","max_tokens":4,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello.","reasoning_content":"They greet me.","tool_calls":[]},{"role":"user","content":"again"}]}' $OUT/h4.json)
ok $([ "$s1$s2$s3$s4" = 200200200200 ] && echo 1) \
   "serve bounds: harmless fields real clients send are accepted (tools [], response_format text, an answer's reasoning_content sent back, ...)" \
   "$s1 $s2 $s3 $s4: $(cat $OUT/h1.json $OUT/h2.json $OUT/h3.json $OUT/h4.json | head -c 800)"
s1=$(post $A /v1/chat/completions "{$H,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}" $OUT/t1.json)
s2=$(post $A /v1/chat/completions "{$H,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}" $OUT/t2.json)
ok $([ "$s1$s2" = 400400 ] && grep -q "cannot call tools" $OUT/t1.json && grep -q "json_schema' is not supported" $OUT/t2.json && echo 1) \
   "serve bounds: a non-empty tools list or a JSON schema is a clear 400" "$s1 $s2: $(cat $OUT/t1.json $OUT/t2.json)"
ok $(grep -q "memory plan (--mem 400 MiB): engine: trunk .* expert cache .* state cache (prompt-state reuse) .* requests [0-9.]* MiB (4 bodies of --max-body 1.0 MiB in flight, 2 parses at once); connections 48, 24 per address, a request must arrive within 2 s" $OUT/a.log && echo 1) \
   "serve bounds: the memory plan is printed at start (state cache, requests counted against --mem)" "$(head -3 $OUT/a.log)"

# 8 bodies of ~1 MB of empty objects at once
HWM0=$(sed -n 's/^VmHWM: *\([0-9]*\) kB/\1/p' /proc/$KPID/status)
$PY - $A > $OUT/flood.out 2>&1 <<'PYEOF'
import socket, sys, threading
port = int(sys.argv[1])
body = b'{"model":"small","messages":[' + b'{},' * 349000 + b'{}]}'
codes = []
def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    codes.append(s.recv(100).split(b" ")[1].decode())
    s.close()
ts = [threading.Thread(target=one) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print(" ".join(sorted(codes)))
PYEOF
HWM1=$(sed -n 's/^VmHWM: *\([0-9]*\) kB/\1/p' /proc/$KPID/status)
s=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$A/health)
GROW=$(( (HWM1 - HWM0) / 1024 ))
ok $([ "$s" = 200 ] && [ "$GROW" -lt 40 ] && ! grep -q 200 $OUT/flood.out && echo 1) \
   "serve bounds: 8 x 1 MB bodies of {} at once are refused before the parse (statuses $(cat $OUT/flood.out)), peak RSS +$GROW MB" \
   "health $s, peak RSS grew $GROW MB, statuses $(cat $OUT/flood.out)"

# slowloris from 127.0.0.1; /health from 127.0.0.2 meanwhile, and from 127.0.0.1 after the deadline
$PY - $A > $OUT/slow.out 2>&1 <<'PYEOF'
import socket, sys, time, threading
port = int(sys.argv[1])
socks = []
for i in range(40):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    except OSError:
        pass
def health(src):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(src, 0))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.recv(100).split(b" ")[1].decode()
    except OSError as e:
        return "none"
other = health("127.0.0.2")
alive_after = 0
t0 = time.time()
while time.time() - t0 < 4:                      # a byte every 0.5 s: the idle timeout never fires
    for s in socks:
        try: s.sendall(b"X")
        except OSError: pass
    time.sleep(0.5)
for s in socks:
    try:
        s.settimeout(0.2)
        if s.recv(10) != b"": alive_after += 1
    except socket.timeout:
        alive_after += 1
    except OSError:
        pass
same = health("127.0.0.1")
print(other, alive_after, same)
PYEOF
read O ALIVE SAME < $OUT/slow.out
ok $([ "$O" = 200 ] && [ "$ALIVE" = 0 ] && [ "$SAME" = 200 ] && echo 1) \
   "serve bounds: slowloris (40 slow connections): /health from another address at once, all cut after --request-timeout, then answered" \
   "health from 127.0.0.2 [$O], still open after 4 s [$ALIVE], health from 127.0.0.1 after [$SAME]"

# a non-stream client that sends one more byte and closes
$PY - $A > $OUT/gone.out 2>&1 <<'PYEOF'
import socket, sys, time
port = int(sys.argv[1])
body = b'{"model":"small","messages":[{"role":"user","content":"Tell me a very long story"}],"max_tokens":3000,"temperature":0,"ignore_eos":true}'
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"Z")
time.sleep(0.3)
s.close()
PYEOF
sleep 2
C=$(curl -s http://127.0.0.1:$A/metrics | sed -n 's/^k3_requests_total{outcome="cancelled"} //p')
ok $([ "$C" = 1 ] && grep -q "client gone: cancelled" $OUT/a.log && echo 1) \
   "serve bounds: a non-stream client that sends one more byte and closes is seen gone, its generation cancelled" \
   "cancelled [$C]: $(tail -3 $OUT/a.log)"

# a client that half-closes after its request (shutdown(SHUT_WR), as nc -N does) still gets its answer
$PY - $A > $OUT/half.out 2>&1 <<'PYEOF'
import socket, sys
port = int(sys.argv[1])
body = b'{"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}'
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b: break
    got += b
print(len(got), b"HTTP/1.1 200" in got, b'"choices"' in got)
PYEOF
ok $([ "$(cut -d' ' -f2- $OUT/half.out)" = "True True" ] && echo 1) \
   "serve bounds: a non-stream client that half-closes after its request gets its answer ($(cut -d' ' -f1 $OUT/half.out) bytes)" \
   "$(cat $OUT/half.out)"
