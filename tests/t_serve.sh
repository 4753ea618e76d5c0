#!/bin/sh
# t_serve.sh - `k3 serve` with real clients: curl and the official `openai`
# npm package (node). Every server listens on 127.0.0.1 on a free port
# (--port 0, the port read from its log), runs under `timeout` so it stops by
# itself, and is killed by the trap.
#  - /health, /v1/models, chat (non-stream and SSE: same greedy text), completions;
#  - usage exact: prompt_tokens = the chat's tokens (k3 tokenize), completion
#    tokens = max_tokens on a length finish, total = sum;
#  - stop strings cut the answer (stream and not), seed makes sampling repeatable;
#  - errors: invalid JSON, oversized body (413), oversized header, bad and unknown
#    fields, n=2, unknown model (404), context overflow, wrong method, unknown path,
#    a path that looks like a file: a clear JSON error each, the server still up;
#  - API key: 401 without or with a wrong key, 200 with it; non-loopback --host
#    without a key is refused;
#  - state reuse: the follow-up request with the first one's history restores the
#    kept state (cached_tokens >= the first prompt) and prefills only the rest,
#    and gives the same greedy answer as a server with state reuse off;
#  - a client that disconnects mid-stream cancels its generation (metrics,
#    log), and the next request is served;
#  - 8 concurrent clients with --queue 2: 1 runs, 2 wait, 5 get 429 with Retry-After;
#  - /metrics is valid Prometheus text with consistent histograms and counters
#    that match the requests made.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/serve
rm -rf $OUT
mkdir -p $OUT
K3=./k3
CHK="$PY tests/serve_check.py"
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT INT TERM

# start NAME ARGS...: a server in the background; sets PORT (or fails)
start() {
    name=$1; shift
    timeout 600 $K3 serve $M --port 0 "$@" > $OUT/$name.log 2>&1 &
    PIDS="$PIDS $!"
    LASTPID=$!
    PORT=""
    for i in $(seq 1 100); do
        PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/$name.log)
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "FAIL serve: server $name did not start: $(cat $OUT/$name.log)"
    return 1
}
# post PORT PATH BODY OUTFILE -> prints the HTTP status
post() { curl -s -o $4 -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$3" "http://127.0.0.1:$1$2"; }
get() { curl -s -o $3 -w '%{http_code}' "http://127.0.0.1:$1$2"; }
ok() {  # ok FLAG NAME WHY: FLAG is 1 on success (an empty FLAG vanishes, leaving NAME WHY)
    if [ $# -ge 3 ] && [ "$1" = 1 ]; then echo "PASS $2"; elif [ $# -ge 3 ]; then echo "FAIL $2: $3"; else echo "FAIL $1: $2"; fi
}

start a || exit 0
A=$PORT
s=$(get $A /health $OUT/health.json)
ok $([ "$s" = 200 ] && grep -q '"ok"' $OUT/health.json && echo 1) "serve: /health" "status $s"
s=$(get $A /v1/models $OUT/models.json)
ok $([ "$s" = 200 ] && [ "$($CHK field $OUT/models.json data.0.id)" = '"small"' ] && echo 1) "serve: /v1/models lists the model" "$s $(cat $OUT/models.json)"

Q='{"model":"small","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me about the sea"}],"max_tokens":12,"temperature":0}'
printf '[{"role":"system","content":"Be brief."},{"role":"user","content":"Tell me about the sea"}]' > $OUT/q.json
NPROMPT=$($K3 tokenize $M --chat $OUT/q.json | wc -w)
s=$(post $A /v1/chat/completions "$Q" $OUT/chat.json)
PT=$($CHK field $OUT/chat.json usage.prompt_tokens); CT=$($CHK field $OUT/chat.json usage.completion_tokens)
TT=$($CHK field $OUT/chat.json usage.total_tokens); FR=$($CHK field $OUT/chat.json choices.0.finish_reason)
ok $([ "$s" = 200 ] && [ "$PT" = "$NPROMPT" ] && [ "$CT" = 12 ] && [ "$TT" = $((NPROMPT + 12)) ] && [ "$FR" = '"length"' ] && echo 1) \
   "serve: chat non-stream, usage exact (prompt $PT = k3 tokenize, completion 12, total $TT)" "status $s: $(cat $OUT/chat.json)"
TEXT=$($CHK field $OUT/chat.json choices.0.message.content)
SQ=$(echo "$Q" | sed 's/}$/,"stream":true,"stream_options":{"include_usage":true}}/')
curl -sN -o $OUT/chat.sse -H 'Content-Type: application/json' --data-binary "$SQ" http://127.0.0.1:$A/v1/chat/completions
$CHK sse $OUT/chat.sse > $OUT/chat.sse.txt 2>$OUT/chat.sse.err
ST=$(sed -n 1p $OUT/chat.sse.txt); SF=$(sed -n 2p $OUT/chat.sse.txt)
ok $([ -n "$ST" ] && [ "$ST" = "$TEXT" ] && [ "$SF" = length ] && grep -q '"completion_tokens": 12' $OUT/chat.sse.txt && echo 1) \
   "serve: chat SSE stream ($(grep -c '^data: ' $OUT/chat.sse) events) = the non-stream text, usage chunk, [DONE]" "[$ST] vs [$TEXT] $(cat $OUT/chat.sse.err)"
s=$(post $A /v1/completions '{"model":"small","prompt":"The capital of France is","max_tokens":6,"temperature":0}' $OUT/cmpl.json)
CP=$($K3 tokenize $M --text "The capital of France is" | wc -w)
ok $([ "$s" = 200 ] && [ "$($CHK field $OUT/cmpl.json usage.prompt_tokens)" = "$CP" ] && [ "$($CHK field $OUT/cmpl.json object)" = '"text_completion"' ] && echo 1) \
   "serve: /v1/completions (prompt $CP tokens)" "$s $(cat $OUT/cmpl.json)"
curl -sN -o $OUT/cmpl.sse --data-binary '{"model":"small","prompt":"The capital of France is","max_tokens":6,"temperature":0,"stream":true}' http://127.0.0.1:$A/v1/completions
ok $([ "$($CHK sse $OUT/cmpl.sse | sed -n 1p)" = "$($CHK field $OUT/cmpl.json choices.0.text)" ] && echo 1) "serve: /v1/completions stream = non-stream" "$(cat $OUT/cmpl.sse | head -3)"

# stop strings: cut at the first occurrence of a piece of the greedy answer
STOP=$($PY -c "import json,sys; t=json.loads(sys.argv[1]); print(json.dumps(t[3:5]))" "$TEXT")
WANT=$($PY -c "import json,sys; t=json.loads(sys.argv[1]); s=json.loads(sys.argv[2]); print(json.dumps(t[:t.find(s)]))" "$TEXT" "$STOP")
QS=$(echo "$Q" | sed "s/}\$/,\"stop\":[$(echo "$STOP" | sed 's/[\\&/]/\\&/g')]}/")
s=$(post $A /v1/chat/completions "$QS" $OUT/stop.json)
curl -sN -o $OUT/stop.sse --data-binary "$(echo "$QS" | sed 's/}$/,"stream":true}/')" http://127.0.0.1:$A/v1/chat/completions
ok $([ "$($CHK field $OUT/stop.json choices.0.message.content)" = "$WANT" ] && [ "$($CHK field $OUT/stop.json choices.0.finish_reason)" = '"stop"' ] && \
     [ "$($CHK sse $OUT/stop.sse | sed -n 1p)" = "$WANT" ] && echo 1) "serve: stop string $STOP cuts the answer (stream and not), finish stop" \
   "want $WANT got $(cat $OUT/stop.json) / $($CHK sse $OUT/stop.sse 2>&1 | sed -n 1p)"
R='{"model":"small","prompt":"Once upon a time","max_tokens":8,"temperature":1.0,"top_p":0.9,"seed":1234}'
post $A /v1/completions "$R" $OUT/seed1.json >/dev/null; post $A /v1/completions "$R" $OUT/seed2.json >/dev/null
post $A /v1/completions "$(echo "$R" | sed 's/1234/99/')" $OUT/seed3.json >/dev/null
T1=$($CHK field $OUT/seed1.json choices.0.text); T3=$($CHK field $OUT/seed3.json choices.0.text)
ok $([ "$T1" = "$($CHK field $OUT/seed2.json choices.0.text)" ] && [ "$T1" != "$T3" ] && echo 1) "serve: same seed, same sampled text; another seed differs" "$T1 / $T3"

# errors: one clear JSON error each, the server stays up
err() {  # err NAME WANT_STATUS BODY [PARAM]
    s=$(post $A /v1/chat/completions "$3" $OUT/err.json)
    m=$($CHK field $OUT/err.json error.message 2>/dev/null)
    p=$($CHK field $OUT/err.json error.param 2>/dev/null)
    ok $([ "$s" = "$2" ] && [ -n "$m" ] && { [ -z "$4" ] || [ "$p" = "\"$4\"" ]; } && echo 1) "serve error: $1 -> $2 $m" "status $s: $(cat $OUT/err.json)"
}
err "invalid JSON" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}'
err "not an object" 400 '[1,2,3]'
err "temperature a string" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}' temperature
err "top_p 0" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"top_p":0}' top_p
err "max_tokens -1" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}' max_tokens
err "n=2" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"n":2}' n
err "unknown field" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"frobnicate":[]}' frobnicate
err "bad role" 400 '{"model":"small","messages":[{"role":"wizard","content":"hi"}]}' messages
err "empty messages" 400 '{"model":"small","messages":[]}' messages
err "image content part" 400 '{"model":"small","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}' messages
err "five stop strings" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e"]}' stop
err "missing model" 400 '{"messages":[{"role":"user","content":"hi"}]}' model
err "unknown model" 404 '{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}' model
err "duplicate key" 400 '{"model":"small","model":"small","messages":[{"role":"user","content":"hi"}]}'
err "max_tokens past the context" 400 '{"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":4090}' max_tokens
$PY -c "print('{\"model\":\"small\",\"messages\":[{\"role\":\"user\",\"content\":\"' + 'x' * 2000000 + '\"}]}')" > $OUT/big.json
s=$(curl -s -o $OUT/big.out -w '%{http_code}' --data-binary @$OUT/big.json http://127.0.0.1:$A/v1/chat/completions)
ok $([ "$s" = 413 ] && grep -q "exceeds" $OUT/big.out && echo 1) "serve error: 2 MB body -> 413" "status $s $(head -c 300 $OUT/big.out)"
s=$(curl -s -o $OUT/hdr.out -w '%{http_code}' -H "X-Big: $($PY -c "print('h' * 100000)")" http://127.0.0.1:$A/v1/models)
ok $([ "$s" != 200 ] && echo 1) "serve error: 100 kB header refused (status $s)" "status $s"
s=$(get $A /v1/chat/completions $OUT/e.json); ok $([ "$s" = 405 ] && echo 1) "serve error: GET on chat -> 405" "$s"
s=$(get $A /v2/nothing $OUT/e.json); ok $([ "$s" = 404 ] && echo 1) "serve error: unknown path -> 404" "$s"
s=$(curl -s --path-as-is -o $OUT/trav.out -w '%{http_code}' "http://127.0.0.1:$A/../../../etc/passwd")
ok $([ "$s" = 404 ] && ! grep -q root: $OUT/trav.out && echo 1) "serve error: /../../../etc/passwd -> 404, no file read" "$s $(head -c 200 $OUT/trav.out)"
s=$(get $A /health $OUT/health2.json)
ok $([ "$s" = 200 ] && kill -0 $LASTPID 2>/dev/null && echo 1) "serve: still healthy after the bad requests" "$s"

# state reuse: follow-up with the first answer in the history
start fresh --state-cache 0 || exit 0
F=$PORT
Q1='{"model":"small","messages":[{"role":"user","content":"What is a mixture of experts?"}],"max_tokens":16,"temperature":0}'
post $A /v1/chat/completions "$Q1" $OUT/r1.json >/dev/null
ANS=$($CHK field $OUT/r1.json choices.0.message.content); P1=$($CHK field $OUT/r1.json usage.prompt_tokens)
Q2="{\"model\":\"small\",\"messages\":[{\"role\":\"user\",\"content\":\"What is a mixture of experts?\"},{\"role\":\"assistant\",\"content\":$ANS},{\"role\":\"user\",\"content\":\"And why is it fast?\"}],\"max_tokens\":16,\"temperature\":0}"
post $A /v1/chat/completions "$Q2" $OUT/r2.json >/dev/null
post $F /v1/chat/completions "$Q2" $OUT/r2fresh.json >/dev/null
C2=$($CHK field $OUT/r2.json usage.prompt_tokens_details.cached_tokens); P2=$($CHK field $OUT/r2.json usage.prompt_tokens)
CF=$($CHK field $OUT/r2fresh.json usage.prompt_tokens_details.cached_tokens)
A2=$($CHK field $OUT/r2.json choices.0.message.content); AF=$($CHK field $OUT/r2fresh.json choices.0.message.content)
LOGP=$(grep -c "prompt $P2 tokens ($C2 from a kept state, $((P2 - C2)) prefilled" $OUT/a.log)
ok $([ -n "$C2" ] && [ "$C2" -ge "$P1" ] && [ "$CF" = 0 ] && [ "$LOGP" = 1 ] && [ -n "$A2" ] && [ "$A2" = "$AF" ] && echo 1) \
   "serve: follow-up restores the kept state ($C2 of $P2 prompt tokens cached, $((P2 - C2)) prefilled; first prompt $P1), same greedy answer as a fresh server" \
   "cached $C2 (first prompt $P1), fresh cached $CF, log $LOGP, [$A2] vs [$AF]"

# a client that goes away mid-stream: its generation is cancelled
curl -sN -m 1 -o $OUT/cut.sse --data-binary '{"model":"small","prompt":"Go on and on","max_tokens":3500,"temperature":0,"stream":true,"ignore_eos":true}' http://127.0.0.1:$A/v1/completions
t0=$(date +%s)
s=$(post $A /v1/completions '{"model":"small","prompt":"next","max_tokens":2,"temperature":0}' $OUT/after.json)
t1=$(date +%s)
get $A /metrics $OUT/metrics.txt >/dev/null
NC=$(grep '^k3_requests_total{outcome="cancelled"}' $OUT/metrics.txt | cut -d' ' -f2)
GEN=$(sed -n 's/.*prompt [0-9]* tokens.*, \([0-9]*\) generated.*client gone: cancelled.*/\1/p' $OUT/a.log | head -1)
ok $([ "$NC" = 1 ] && [ -n "$GEN" ] && [ "$GEN" -lt 3500 ] && [ "$s" = 200 ] && [ $((t1 - t0)) -lt 20 ] && echo 1) \
   "serve: client gone mid-stream: generation cancelled after $GEN of 3500 tokens, next request served" "cancelled=$NC gen=$GEN status=$s"

$CHK metrics $OUT/metrics.txt > $OUT/metrics.vals 2>$OUT/metrics.err
mv() { grep "^$1 " $OUT/metrics.vals | cut -d' ' -f2; }
ok $([ -s $OUT/metrics.vals ] && [ "$(mv k3_prefix_cache_hits_total)" -ge 1 ] && [ "$(mv k3_generation_tokens_total)" -gt 0 ] && \
     [ "$(mv k3_time_to_first_token_seconds_count)" -ge 10 ] && [ "$(mv 'k3_expert_cache_lookups_total')" -gt 0 ] && \
     grep -q '^k3_memory_bytes{use="expert_cache"}' $OUT/metrics.vals && echo 1) \
   "serve: /metrics is valid Prometheus text (histograms cumulative, +Inf = count), counters moved" "$(cat $OUT/metrics.err)"

# the official openai package (node)
if [ -f build/node/node_modules/openai/package.json ] && command -v node >/dev/null; then
    node tests/serve_openai.cjs http://127.0.0.1:$A small 2>&1
else
    echo "FAIL openai npm: package not installed (make deps runs tools/node_deps.sh)"
fi

# API key
export K3_TEST_KEY=sekret-123
start keyed --api-key-env K3_TEST_KEY || exit 0
K=$PORT
s1=$(get $K /v1/models $OUT/k1.json)
s2=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' http://127.0.0.1:$K/v1/models)
s3=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sekret-123' http://127.0.0.1:$K/v1/models)
s4=$(get $K /health /dev/null)
ok $([ "$s1" = 401 ] && [ "$s2" = 401 ] && [ "$s3" = 200 ] && [ "$s4" = 200 ] && echo 1) "serve: API key: none 401, wrong 401, right 200, /health open" "$s1 $s2 $s3 $s4"
$K3 serve $M --host 0.0.0.0 --port 0 > $OUT/open.log 2>&1
rc=$?
ok $([ $rc = 2 ] && grep -q "api-key-env" $OUT/open.log && echo 1) "serve: --host 0.0.0.0 without a key is refused" "rc $rc $(cat $OUT/open.log)"

# 8 concurrent clients, queue of 2: one runs, two wait, five get 429
start queued --queue 2 || exit 0
Qd=$PORT
# every client is waited for to the end (the three served run one after the
# other: under ASan on a loaded machine that took over a minute, which a
# fixed poll of the output files had cut short)
qpids=""
for i in 1 2 3 4 5 6 7 8; do
    curl -s --max-time 900 -D $OUT/q$i.hdr -o $OUT/q$i.json --data-binary '{"model":"small","prompt":"Queue '$i'","max_tokens":300,"temperature":0}' http://127.0.0.1:$Qd/v1/completions &
    qpids="$qpids $!"
done
wait $qpids
n200=0; n429=0; nra=0
for i in 1 2 3 4 5 6 7 8; do
    head -1 $OUT/q$i.hdr | grep -q ' 200' && n200=$((n200 + 1))
    head -1 $OUT/q$i.hdr | grep -q ' 429' && n429=$((n429 + 1))
    grep -qi '^retry-after: 1' $OUT/q$i.hdr && nra=$((nra + 1))
done
ok $([ $n200 = 3 ] && [ $n429 = 5 ] && [ $nra = 5 ] && echo 1) "serve: 8 concurrent clients, --queue 2: 3 served in turn, 5 got 429 with Retry-After" "200: $n200, 429: $n429, Retry-After: $nra"
