#!/bin/sh
# t_servers.sh - `k3 chat/run/bench --endpoint` against replays of what real
# servers send (issue 29), from tests/fake_openai.py's profiles, each citing
# the upstream file its format comes from:
#   vllm      vLLM >= 0.10, delta.reasoning (vllm/entrypoints/openai/protocol.py,
#             serving_chat.py): role-only first chunk, usage-only last chunk
#   vllm_old  vLLM 0.8/0.9, delta.reasoning_content (the same files, older)
#   sglang    SGLang, reasoning_content (python/sglang/srt/entrypoints/openai/serving_chat.py)
#   llama     llama-server, reasoning_content and "timings" (tools/server/server.cpp)
# and the /metrics fixtures of tests/fixtures/metrics_*.txt (vLLM >= 0.9,
# 0.8 V1, V0: vllm/v1/metrics/loggers.py and the V0 engine's metrics.py; SGLang
# and SGLang hybrid: python/sglang/srt/metrics/collector.py; llama-server:
# tools/server/server.cpp). Checks: the reasoning shown (marked), in --json,
# stored beside the answer, exported, never re-sent; an old database
# migrated; TTFT from the first reasoning token; a budget spent thinking
# exits non-zero; tool_calls give a notice; only the sampling the user set
# is sent, as typed; a raw prompt uses /v1/completions; history list shows
# the model's name; rates not measurable are said so; a server that ignores
# max_tokens or sends an endless body is cut off. Loopback only; every
# server stops by itself (its 120 s timer) and is killed by the trap.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/servers
rm -rf $OUT
mkdir -p $OUT
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
PIDS=""
cleanup() { for p in $PIDS; do kill $p 2>/dev/null; done; }
trap cleanup EXIT INT TERM
ok() {  # ok FLAG NAME WHY
    if [ $# -ge 3 ] && [ "$1" = 1 ]; then echo "PASS $2"; elif [ $# -ge 3 ]; then echo "FAIL $2: $3"; else echo "FAIL $1: $2"; fi
}
fake() {  # fake MODE [options]: sets FPORT and URL
    NFAKE=$((${NFAKE:-0} + 1))
    $PY tests/fake_openai.py "$@" > $OUT/fake$NFAKE.out 2>&1 &
    PIDS="$PIDS $!"
    FPORT=""
    for i in $(seq 1 50); do
        FPORT=$(sed -n 's/^port //p' $OUT/fake$NFAKE.out 2>/dev/null)
        [ -n "$FPORT" ] && break
        sleep 0.1
    done
    URL=http://127.0.0.1:$FPORT
}
jq_() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# 1. the reasoning of each thinking server: --json field, stored beside the
# answer, exported, and not re-sent as answer text on the next turn
for prof in vllm vllm_old sglang llama; do
    fake $prof --record $OUT/$prof.req
    db=$OUT/$prof.db
    printf 'Hi\nAgain\n' | $K3 chat --lines --endpoint $URL --db $db --json > $OUT/$prof.jsonl 2> $OUT/$prof.err
    rc=$?
    T=$($PY -c "import json; d=json.loads(open('$OUT/$prof.jsonl').readline()); print(repr(d['text'] + '|' + d.get('reasoning', '-')))" 2>/dev/null)
    $K3 history export last --db $db --format json > $OUT/$prof.json 2>/dev/null
    S=$(jq_ $OUT/$prof.json "repr(d['messages'][1]['content'] + '|' + d['messages'][1].get('reasoning', '-'))")
    R=$($PY -c "
import json; reqs=[json.loads(l) for l in open('$OUT/$prof.req')]
m=reqs[1]['body']['messages']; print('|'.join(x['role'] + ':' + x['content'] for x in m))" 2>/dev/null)
    want="'Hello there.|The user greets me; answer briefly.\\nKeep it short.'"
    ok $([ $rc = 0 ] && [ "$T" = "$want" ] && [ "$S" = "$want" ] && [ "$R" = "user:Hi|assistant:Hello there.|user:Again" ] && echo 1) \
       "servers: $prof reasoning: own --json field, stored beside the answer, exported, not re-sent ($R)" \
       "rc $rc, json [$T], stored [$S], second request [$R]: $(head -3 $OUT/$prof.err)"
done

# 2. plain text marks the reasoning; markdown export and history show keep it apart
fake vllm
printf 'Hi\n' | $K3 chat --lines --endpoint $URL --db $OUT/plain.db > $OUT/plain.out 2> $OUT/plain.err
$K3 history export last --db $OUT/plain.db --format markdown > $OUT/plain.md 2>&1
$K3 history show last --db $OUT/plain.db > $OUT/plain.show 2>&1
$K3 history export last --db $OUT/plain.db --format json > $OUT/plain.json 2>&1
$K3 history import $OUT/plain.json --db $OUT/imported.db > /dev/null 2>&1
IR=$(sqlite3 $OUT/imported.db "select count(*) from messages where reasoning like 'The user greets me;%Keep it short.'" 2>/dev/null)
ok $([ "$IR" = 1 ] && grep -q '^\[reasoning\] The user greets me; answer briefly\.$' $OUT/plain.out && grep -q '^Keep it short\.$' $OUT/plain.out &&
     grep -q '^\[/reasoning\]$' $OUT/plain.out &&
     grep -q '^Hello there\.$' $OUT/plain.out && grep -q '<summary>reasoning</summary>' $OUT/plain.md &&
     grep -q '(reasoning) The user greets me' $OUT/plain.show && echo 1) \
   "servers: plain mode marks the reasoning [reasoning] ... [/reasoning]; markdown export, history show and a JSON import keep it apart" \
   "imported [$IR]: $(cat $OUT/plain.out $OUT/plain.md $OUT/plain.show | head -30)"

# 3. a database from before the reasoning column (schema 5) is migrated and then keeps reasoning
cp $OUT/plain.db $OUT/old.db
sqlite3 $OUT/old.db "ALTER TABLE messages DROP COLUMN reasoning; ALTER TABLE conversations DROP COLUMN model_type;
                    PRAGMA user_version = 5;" 2>$OUT/old.err
printf 'Hi\n' | $K3 chat --lines --endpoint $URL --db $OUT/old.db --json > $OUT/old.jsonl 2>> $OUT/old.err
V=$(sqlite3 $OUT/old.db "PRAGMA user_version" 2>/dev/null)
N=$(sqlite3 $OUT/old.db "select count(*) from messages where reasoning like 'The user greets me; answer briefly.%Keep it short.'" 2>/dev/null)
ok $([ "$V" = 7 ] && [ "$N" = 1 ] && echo 1) "servers: a schema-5 database is migrated (version $V) and stores the reasoning" \
   "version [$V], $N rows: $(cat $OUT/old.err)"

# 4. TTFT from the first token of either kind; a budget spent thinking exits non-zero; tool calls
fake think_length
$K3 run --endpoint $URL -p hi -n 4 > $OUT/len.out 2> $OUT/len.err
rc=$?
ok $([ $rc != 0 ] && grep -q "ran out of tokens while still reasoning" $OUT/len.err && echo 1) \
   "servers: finish_reason length while reasoning: said, k3 run exits $rc" "rc $rc: $(cat $OUT/len.err)"
fake tools
$K3 run --endpoint $URL -p "weather?" > $OUT/tools.out 2> $OUT/tools.err
ok $(grep -q "the model asked to call the tool 'get_weather', but k3 offers no tools: there is no answer text" $OUT/tools.err && echo 1) \
   "servers: tool_calls deltas give a clear notice" "$(cat $OUT/tools.err)"
fake sglang
$K3 run --endpoint $URL -p hi > $OUT/ttft.out 2> $OUT/ttft.err
TT=$(sed -n 's/.*ttft \([0-9]*\) ms.*/\1/p' $OUT/ttft.err)
ok $([ -n "$TT" ] && [ "$TT" -lt 250 ] && grep -q '^\[reasoning\] The user' $OUT/ttft.err && [ "$(cat $OUT/ttft.out)" = "Hello there." ] && echo 1) \
   "servers: k3 run: TTFT ($TT ms, the answer 300 ms later) from the first reasoning token, reasoning on stderr, the answer alone on stdout" \
   "ttft [$TT]: $(cat $OUT/ttft.out $OUT/ttft.err)"

# 5. only what the user set is sent, as typed; a raw prompt goes to /v1/completions
fake ok --record $OUT/ok.req
$K3 run --endpoint $URL -p hi > /dev/null 2>&1
$K3 run --endpoint $URL -p hi --temp 0.7 --top-p 0.9 --seed 5 > /dev/null 2>&1
$K3 run --endpoint $URL -p hi --chat > $OUT/okchat.out 2>&1
P=$($PY -c "
import json; r=[json.loads(l) for l in open('$OUT/ok.req')]
b0, b1 = r[0]['body'], r[1]['body']
print(r[0]['path'], 'temperature' in b0, 'seed' in b0, 'top_p' in b0, b1.get('temperature'), b1.get('top_p'), b1.get('seed'), r[2]['path'])")
printf 'hi\n/set temp=0.7\nagain\n' | $K3 chat --lines --endpoint $URL --db $OUT/sampling.db > /dev/null 2>&1
SP=$($PY -c "
import json; r=[json.loads(l) for l in open('$OUT/ok.req')]
print('temperature' in r[-2]['body'], r[-1]['body'].get('temperature'))")
SS=$(sqlite3 $OUT/sampling.db "select group_concat(sampling_json, ' ') from messages where role = 'assistant'" 2>/dev/null)
ok $([ "$P" = "/v1/completions False False False 0.7 0.9 5 /v1/chat/completions" ] && [ "$SP" = "False 0.7" ] &&
     [ "$SS" = '{} {"temperature":0.7}' ] && echo 1) \
   "servers: only the sampling typed (or /set) is sent and recorded, as typed (0.7, not 0.699999988); k3 run without --chat uses /v1/completions" \
   "[$P] chat [$SP] recorded [$SS]"
$K3 run --endpoint $URL -p hi > $OUT/raw.out 2>&1
fake nocompletions
$K3 run --endpoint $URL -p hi > $OUT/nocmpl.out 2> $OUT/nocmpl.err
ok $(grep -q "^raw completion$" $OUT/raw.out && grep -q "no /v1/completions (HTTP 404): the prompt goes as one chat message" $OUT/nocmpl.err &&
     grep -q "^Hello from the fake server.$" $OUT/nocmpl.out && echo 1) \
   "servers: a raw prompt is completed by /v1/completions, or sent as chat with a notice where there is none" \
   "$(cat $OUT/raw.out $OUT/nocmpl.out $OUT/nocmpl.err)"
$K3 history list --db $OUT/plain.db > $OUT/list.out 2>&1
ok $(grep -q " fake  " $OUT/list.out && ! grep -q "127.0.0.1" $OUT/list.out && echo 1) \
   "servers: history list shows an endpoint conversation's model name" "$(cat $OUT/list.out)"

# 6. rates: one chunk is not measurable (run and bench); llama-server's own timing is used
fake onechunk
$K3 run --endpoint $URL -p hi > /dev/null 2> $OUT/one.err
$K3 bench --endpoint $URL --requests 2 --tokens 8 --json > $OUT/one.json 2>&1
fake llama
$K3 run --endpoint $URL -p hi > /dev/null 2> $OUT/llama_run.err
ok $(grep -q "tok/s not measurable (the answer came in 1 pieces)" $OUT/one.err && grep -q '"tok_s":null' $OUT/one.json &&
     grep -q "42.00 tok/s (the server's timing)" $OUT/llama_run.err && echo 1) \
   "servers: a rate that cannot be measured is said so (run and bench); llama-server's timings give the rate" \
   "$(cat $OUT/one.err $OUT/one.json $OUT/llama_run.err)"

# 7. a server that ignores max_tokens, an endless /v1/models: bounded, what arrived kept
fake flood --record $OUT/flood.req
printf 'Hi\n' | timeout 60 $K3 chat --lines --endpoint $URL --db $OUT/flood.db --json -n 50 > $OUT/flood.jsonl 2> $OUT/flood.err
rc=$?
L=$(sqlite3 $OUT/flood.db "select length(content) from messages where role = 'assistant'" 2>/dev/null)
MT=$(grep -o '"max_tokens": [0-9]*' $OUT/flood.req)
ok $([ $rc = 0 ] && [ "$L" = $((50 * 65536)) ] && [ "$MT" = '"max_tokens": 50' ] &&
     grep -q "sent more than max_tokens 50 pieces: stopped reading there" $OUT/flood.err && echo 1) \
   "servers: a server ignoring max_tokens 50 is cut at 50 pieces ($L bytes kept)" "rc $rc, $L bytes, [$MT]: $(head -c 600 $OUT/flood.err)"
fake models_flood
timeout 60 $K3 run --endpoint $URL -p hi > /dev/null 2> $OUT/mflood.err
rc=$?
ok $([ $rc = 1 ] && grep -q "/v1/models: the response is larger than 1048576 bytes: refused" $OUT/mflood.err && echo 1) \
   "servers: an endless /v1/models body is refused past 1 MiB" "rc $rc: $(cat $OUT/mflood.err)"

# 8. each server's gauges end to end (the plain chat's line after a turn)
fake ok --metrics tests/fixtures/metrics_sglang_hybrid.txt
printf 'Hi\n' | $K3 chat --lines --endpoint $URL --db $OUT/g1.db > /dev/null 2> $OUT/g1.err
fake ok --metrics tests/fixtures/metrics_llama.txt
printf 'Hi\n' | $K3 chat --lines --endpoint $URL --db $OUT/g2.db > /dev/null 2> $OUT/g2.err
fake ok --metrics tests/fixtures/metrics_vllm08.txt
printf 'Hi\n' | $K3 chat --lines --endpoint $URL --db $OUT/g3.db > /dev/null 2> $OUT/g3.err
ok $(grep -q "SGLang: running 1, waiting 0, KV cache 12%, state pool 85%, prefix cache hit 75%" $OUT/g1.err &&
     grep -q "llama-server: running 1, waiting 2, 1.0 tok/s; not available: KV cache use, prefix-cache hit rate" $OUT/g2.err &&
     grep -q "vLLM: running 2, waiting 1, KV cache 25%, prefix cache hit 60%" $OUT/g3.err && echo 1) \
   "servers: the gauges of SGLang hybrid, llama-server and vLLM 0.8 as each exports them" \
   "$(grep -h 'k3: [A-Za-z-]*:' $OUT/g1.err $OUT/g2.err $OUT/g3.err)"
