#!/bin/sh
# t_endpoint.sh - `k3 chat --endpoint` / `k3 run --endpoint` / `k3 bench
# --endpoint` against `k3 serve` and against tests/fake_openai.py, a tiny
# server that misbehaves on purpose. Servers listen on 127.0.0.1 on a free
# port, stop by themselves (timeout / their own timer) and are killed by the trap.
#  - an answer streams from k3 serve, equal to a local `k3 run` of the same chat;
#  - the conversation is in the local SQLite with its backend recorded, and
#    `--resume` (no --endpoint) goes back to the server, whose kept state
#    makes the resumed turn prefill only its new tokens;
#  - failures, one clear line each, the conversation intact, the partial
#    answer stored with status error: connection refused, 401, 404 model, 500,
#    429 with Retry-After (retried visibly, then answered; or given up),
#    malformed SSE, a stream cut mid-answer, a slow server (timeout), the
#    server killed mid-stream;
#  - TLS (python's https server, an openssl self-signed certificate): an
#    untrusted certificate is refused with one line, --ca-cert trusts it;
#    (the full-screen view in tmux is tests/t_endpoint_tui.sh)
#  - k3 bench --endpoint prints TTFT, tokens/s and inter-token percentiles.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/endpoint
rm -rf $OUT
mkdir -p $OUT
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
PIDS=""
cleanup() {
    for p in $PIDS; do kill $p 2>/dev/null; done
}
trap cleanup EXIT INT TERM
ok() {  # ok FLAG NAME WHY: FLAG is 1 on success (an empty FLAG vanishes, leaving NAME WHY)
    if [ $# -ge 3 ] && [ "$1" = 1 ]; then echo "PASS $2"; elif [ $# -ge 3 ]; then echo "FAIL $2: $3"; else echo "FAIL $1: $2"; fi
}

# serve NAME: a k3 serve in the background; sets PORT and SPID
serve() {
    timeout 600 $K3 serve $M --port 0 "$@" > $OUT/serve.log 2>&1 &
    SPID=$!
    PIDS="$PIDS $SPID"
    PORT=""
    for i in $(seq 1 100); do
        PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/serve.log)
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "FAIL endpoint: k3 serve did not start: $(cat $OUT/serve.log)"
    exit 0
}
# fake MODE [--tls CERT KEY]: sets FPORT
fake() {
    NFAKE=$((${NFAKE:-0} + 1))         # a file per server: never the previous one's port
    $PY tests/fake_openai.py "$@" > $OUT/fake$NFAKE.out 2>&1 &
    PIDS="$PIDS $!"
    FPORT=""
    for i in $(seq 1 50); do
        FPORT=$(sed -n 's/^port //p' $OUT/fake$NFAKE.out 2>/dev/null)
        [ -n "$FPORT" ] && return 0
        sleep 0.1
    done
    echo "FAIL endpoint: the fake server did not start"
}
# the last conversation of a database as JSON
last_json() { $K3 history export last --db $1 --format json > $OUT/last.json 2>/dev/null; }
jget() { $PY -c "import json,sys; d=json.load(open('$OUT/last.json')); print($1)"; }

serve
URL=http://127.0.0.1:$PORT
DB=$OUT/chat.db
printf 'Tell me about the sea\nAnd the sky?\n' | $K3 chat --lines --endpoint $URL --db $DB --json -n 12 --temp 0 > $OUT/c1.jsonl 2> $OUT/c1.err
rc=$?
N=$(grep -c '"status":"complete"' $OUT/c1.jsonl)
T1=$($PY -c "import json; print(json.loads(open('$OUT/c1.jsonl').readline())['text'])")
$K3 run $M --chat -p "Tell me about the sea" -n 12 > $OUT/local.txt 2>/dev/null
ok $([ $rc = 0 ] && [ "$N" = 2 ] && [ "$T1" = "$(cat $OUT/local.txt)" ] && echo 1) \
   "endpoint: two turns from k3 serve; the answer equals a local k3 run of the same chat" "rc $rc, $N complete, [$T1] vs [$(cat $OUT/local.txt)]: $(cat $OUT/c1.err)"
last_json $DB
B=$(sqlite3 $DB "select backend_endpoint || ' ' || backend_model from conversations" 2>/dev/null)
NM=$(jget "len(d['messages'])")
ok $([ "$B" = "$URL small" ] && [ "$NM" = 4 ] && echo 1) "endpoint: conversation stored locally with its backend ($B), 4 messages" "backend [$B], $NM messages"
ID=$($PY -c "import json; print(json.loads(open('$OUT/c1.jsonl').readline())['conversation_id'])")
printf 'One more thing\n' | $K3 chat --lines --db $DB --resume $ID --json -n 12 > $OUT/c2.jsonl 2> $OUT/c2.err
P=$($PY -c "import json; print(json.loads(open('$OUT/c2.jsonl').readline())['prefilled_tokens'])")
TURN=$($PY -c "import json; print(json.loads(open('$OUT/c2.jsonl').readline())['turn'])")
LOGC=$(tail -1 $OUT/serve.log | sed -n 's/.*prompt \([0-9]*\) tokens (\([0-9]*\) from a kept state.*/\2/p')
ok $([ "$TURN" = 3 ] && grep -q "resumed conversation $ID against $URL" $OUT/c2.err && [ -n "$LOGC" ] && [ "$LOGC" -gt 0 ] && echo 1) \
   "endpoint: --resume goes back to the recorded server; turn 3 sent $P new prompt tokens past the server's kept state ($LOGC cached)" \
   "turn $TURN, cached $LOGC: $(cat $OUT/c2.err)"

# k3 bench --endpoint
$K3 bench --endpoint $URL --requests 3 --tokens 16 --json > $OUT/bench.json 2>$OUT/bench.err
ok $($PY -c "
import json,sys; d=json.load(open('$OUT/bench.json'))
rate_ok = (d['tok_s'] is None and d['tok_s_requests'] == 0) or (d['tok_s'] > 0 and 1 <= d['tok_s_requests'] <= 3)
# the server's own sampling (no temperature is sent): an answer may end before its 16 tokens
sys.exit(0 if d['requests']==3 and 0 < d['tokens'] <= 48 and d['ttft_ms_p50']>0 and rate_ok and d['itl_ms_p90']>=d['itl_ms_p50']>=0 else 1)" && echo 1) \
   "endpoint: k3 bench --endpoint reports TTFT, tok/s and inter-token percentiles: $(cat $OUT/bench.json)" "$(cat $OUT/bench.err)"

# failures: one line each, the conversation intact, exit 3 (a message not
# answered: docs/COMMANDS.md, "Exit codes")
fault() {  # fault SLUG DESCRIPTION URL PATTERN [extra options]
    slug=$1; name=$2; url=$3; pat=$4; shift 4
    db=$OUT/f_$slug.db
    printf 'first message\nsecond message\n' | $K3 chat --lines --endpoint $url --db $db --json -n 12 "$@" > $OUT/f_$slug.out 2> $OUT/f_$slug.err
    rc=$?
    last_json $db
    st=$(jget "','.join(m['role'][0]+':'+m['status'] for m in d['messages'])" 2>/dev/null)
    lines=$(grep -c "$pat" $OUT/f_$slug.err)
    ok $([ $rc = 3 ] && [ "$lines" = 2 ] && [ "$st" = "u:complete,a:error,u:complete,a:error" ] && echo 1) \
       "endpoint fault: $name: exit 3 (not answered), one line per turn ($(grep -m1 "$pat" $OUT/f_$slug.err | cut -c1-110)), both turns stored" \
       "rc $rc, $lines lines matching '$pat', stored [$st]: $(head -3 $OUT/f_$slug.err)"
}
fake ok; FOK=$FPORT
$K3 run --endpoint http://127.0.0.1:$FOK --chat -p hi > $OUT/fok.txt 2>$OUT/fok.err
ok $([ "$(cat $OUT/fok.txt)" = "Hello from the fake server." ] && echo 1) "endpoint: k3 run --endpoint streams a plain OpenAI server's answer" "$(cat $OUT/fok.txt $OUT/fok.err)"
printf '/set\n/show\n' | $K3 chat --lines --endpoint http://127.0.0.1:$FOK --db $OUT/cmds.db > $OUT/cmds.out 2>&1
rc=$?
ok $([ $rc = 0 ] && grep -q "context: the server's" $OUT/cmds.out && grep -q "served by *http://127.0.0.1:$FOK" $OUT/cmds.out && echo 1) \
   "endpoint: /set and /show answer for a remote backend (no local session or model)" "rc $rc: $(cat $OUT/cmds.out)"
fake 401; fault 401 "401" http://127.0.0.1:$FPORT "HTTP 401: Incorrect API key provided (check the key"
# the key goes in from the environment, never the command line
printf 'hi\n' | K3_TEST_KEY=right-key $K3 chat --endpoint http://127.0.0.1:$FPORT --api-key-env K3_TEST_KEY --db $OUT/key.db --json > $OUT/key.out 2>&1
ok $(grep -q '"status":"complete"' $OUT/key.out && echo 1) "endpoint: --api-key-env sends the key (401 without it, answered with it)" "$(cat $OUT/key.out)"
fake 500; fault 500 "500" http://127.0.0.1:$FPORT "HTTP 500: the GPUs are on fire (server error)"
fake malformed; fault malformed "malformed SSE" http://127.0.0.1:$FPORT "malformed event stream: unexpected line"
last_json $OUT/f_malformed.db
ok $([ "$(jget "d['messages'][1]['content']")" = "Hello from" ] && echo 1) "endpoint fault: malformed SSE keeps the partial answer" "$(jget "d['messages'][1]['content']")"
fake cut; fault cut "stream cut" http://127.0.0.1:$FPORT "the stream was cut mid-answer"
fake slow; fault slow "slow server" http://127.0.0.1:$FPORT "no data from the server for 2 s (timeout)" --timeout 2
fake 429forever; fault 429gaveup "429 given up" http://127.0.0.1:$FPORT "HTTP 429: Rate limit reached (gave up after 1 retries)" --retries 1
fake 429
printf 'hi\n' | $K3 chat --lines --endpoint http://127.0.0.1:$FPORT --db $OUT/f429.db --json > $OUT/f429.out 2> $OUT/f429.err
ok $([ "$(grep -c 'busy (HTTP 429): retrying in 1 s' $OUT/f429.err)" = 2 ] && grep -q '"status":"complete"' $OUT/f429.out && echo 1) \
   "endpoint: 429 with Retry-After: retried twice, visibly, then answered" "$(cat $OUT/f429.err)"
FREE=$($PY -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
printf 'hi\n' | $K3 chat --lines --endpoint http://127.0.0.1:$FREE --db $OUT/refused.db --json > /dev/null 2> $OUT/refused.err
rc=$?
ok $([ $rc = 1 ] && grep -q "connection refused (is the server running?)" $OUT/refused.err && echo 1) "endpoint fault: connection refused: $(cat $OUT/refused.err | head -1)" "rc $rc"
printf 'hi\n' | $K3 chat --lines --endpoint $URL --model gpt-4 --db $OUT/nomodel.db > /dev/null 2> $OUT/nomodel.err
ok $(grep -q "the server has no model 'gpt-4' (it has: small)" $OUT/nomodel.err && echo 1) "endpoint fault: unknown model: $(head -1 $OUT/nomodel.err)" "$(cat $OUT/nomodel.err)"

# the server killed mid-stream
printf 'Tell me a very long story\n' | $K3 chat --lines --endpoint $URL --db $OUT/kill.db --plain -n 3000 --temp 0 > $OUT/kill.out 2> $OUT/kill.err &
CP=$!
for i in $(seq 1 600); do [ -s $OUT/kill.out ] && break; sleep 0.05; done   # the answer (1213 tokens) has begun
kill -9 $(pgrep -P $SPID) 2>/dev/null   # the k3 serve under timeout
wait $CP
rc=$?
last_json $OUT/kill.db
st=$(jget "d['messages'][1]['status']" 2>/dev/null); part=$(jget "len(d['messages'][1]['content'])" 2>/dev/null)
ok $([ $rc = 3 ] && [ "$st" = error ] && [ -n "$part" ] && grep -q "cut mid-answer\|connection\|Failure when receiving" $OUT/kill.err && echo 1) \
   "endpoint fault: server killed mid-stream: $(grep -m1 'k3: http' $OUT/kill.err | cut -c1-100); partial answer ($part bytes) stored as error" \
   "rc $rc status $st part $part: $(cat $OUT/kill.err)"

# TLS: a self-signed certificate (openssl) on a python https server on 127.0.0.1
openssl req -x509 -newkey rsa:2048 -nodes -keyout $OUT/tls_key.pem -out $OUT/tls_cert.pem -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 > $OUT/openssl.log 2>&1
fake ok --tls $OUT/tls_cert.pem $OUT/tls_key.pem
TLS=https://127.0.0.1:$FPORT
$K3 run --endpoint $TLS -p hi -n 5 > $OUT/tls1.out 2> $OUT/tls1.err
rc=$?
ok $([ $rc = 1 ] && [ "$(wc -l < $OUT/tls1.err)" = 1 ] && grep -q "^k3: $TLS: TLS error: .*certificate.*give its CA with --ca-cert FILE" $OUT/tls1.err && [ ! -s $OUT/tls1.out ] && echo 1) \
   "endpoint tls: an untrusted (self-signed) certificate is refused with one line: $(cut -c1-140 $OUT/tls1.err)" "rc $rc: $(cat $OUT/tls1.err $OUT/openssl.log)"
$K3 run --endpoint $TLS --chat -p hi -n 5 --ca-cert $OUT/tls_cert.pem > $OUT/tls2.out 2> $OUT/tls2.err
rc=$?
ok $([ $rc = 0 ] && [ "$(cat $OUT/tls2.out)" = "Hello from the fake server." ] && echo 1) \
   "endpoint tls: with --ca-cert the same server is trusted and answers" "rc $rc: $(cat $OUT/tls2.out $OUT/tls2.err)"
printf 'hi\n' | $K3 chat --lines --endpoint $TLS --ca-cert $OUT/tls_cert.pem --db $OUT/tls.db --json > $OUT/tls3.out 2> $OUT/tls3.err
ok $(grep -q '"status":"complete"' $OUT/tls3.out && grep -q -- "--ca-cert $OUT/tls_cert.pem --resume" $OUT/tls3.err && echo 1) \
   "endpoint tls: k3 chat --endpoint https:// --ca-cert answers, and the resume hint carries --ca-cert" "$(cat $OUT/tls3.out $OUT/tls3.err)"
$K3 run --endpoint $TLS -p hi --ca-cert $OUT/nothere.pem > /dev/null 2> $OUT/tls4.err
rc1=$?
$K3 run --endpoint $TLS -p hi --ca-cert tests/t_endpoint.sh > /dev/null 2> $OUT/tls5.err
rc2=$?
ok $([ $rc1 = 1 ] && [ $rc2 = 1 ] && grep -q "^k3: --ca-cert $OUT/nothere.pem: No such file or directory$" $OUT/tls4.err &&
     grep -q "^k3: --ca-cert tests/t_endpoint.sh: not a PEM certificate file$" $OUT/tls5.err && echo 1) \
   "endpoint tls: a missing or non-PEM --ca-cert is one clear line" "rc $rc1 $rc2: $(cat $OUT/tls4.err $OUT/tls5.err)"
