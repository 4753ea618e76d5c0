#!/bin/sh
# t_endpoint_tui.sh - `k3 chat --endpoint` in the full-screen view, driven
# in a detached tmux pane (120x40) against `k3 serve` on 127.0.0.1 (a free
# port, under `timeout`, killed by the trap); and the durability of a
# remote answer. Checks:
#  - an answer streams on the full screen (not the line mode);
#  - the panel shows the stream (NETWORK, ANSWER: TTFT, tok/s, inter-token
#    p50/p90) and the server's own disk / expert-cache / memory figures from
#    its /metrics, and those move: two captures while the answer streams
#    differ in the server's bytes read, and the cache and memory sections
#    differ from the capture before the first message;
#  - Ctrl-C cancels the request: the partial answer stays on screen and in
#    the local SQLite, marked interrupted;
#  - `k3 chat --resume ID` (no --endpoint) reopens it on the full screen
#    against the same server and takes another turn;
#  - a server without /metrics: the panel says which figures are not
#    available, and shows no zero for them;
#  - kill -9 of the client while the answer streams: reopened, the partial
#    answer is in the store, marked interrupted and incomplete.
# Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/tmux.sh
PY=/usr/bin/python3
K3=${K3:-./k3}
OUT=tests/out/endpoint_tui
rm -rf $OUT
mkdir -p $OUT/home
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
PIDS=""
tmux_server k3ept
SCREEN=$OUT/screen.txt
cleanup() {
    for p in $PIDS; do kill $p 2>/dev/null; done
    tmux_stop
}
trap cleanup EXIT INT TERM
ok() {  # ok FLAG NAME WHY: FLAG is 1 on success (an empty FLAG vanishes, leaving NAME WHY)
    if [ $# -ge 3 ] && [ "$1" = 1 ]; then echo "PASS $2"; elif [ $# -ge 3 ]; then echo "FAIL $2: $3"; else echo "FAIL $1: $2"; fi
}
if ! command -v tmux >/dev/null 2>&1; then
    echo "FAIL endpoint tui: tmux is not installed"
    exit 0
fi

# a k3 serve just above its memory minimum, so its weights stream from disk
# (a quarter of a small --mem goes to the kept prompt states)
# (k3 serve's message ends with the whole --mem: the engine's minimum, the requests' reserve and
# the state cache's quarter)
MIN=$(timeout 60 $K3 serve $M --port 0 --mem 1M 2>&1 | grep -o 'use --mem [0-9]*M' | tail -1 | grep -o '[0-9]*')
timeout 600 $K3 serve $M --port 0 --mem $((${MIN:-84} + 6))M > $OUT/serve.log 2>&1 &
PIDS="$PIDS $!"
PORT=""
for i in $(seq 1 200); do
    PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $OUT/serve.log)
    [ -n "$PORT" ] && break
    sleep 0.1
done
if [ -z "$PORT" ]; then
    echo "FAIL endpoint tui: k3 serve did not start: $(cat $OUT/serve.log)"
    exit 0
fi
URL=http://127.0.0.1:$PORT
DB=$PWD/$OUT/chat.db

# panel FILE SECTION: the panel's lines (right of screen column 80) from SECTION to the next title.
# Columns, not characters: the answer on the left is byte soup with wide characters (CJK, emoji,
# two columns each), so the cut measures each character with the C library's wcwidth, the same
# table curses and tmux draw with.
panel() {
    $PY - "$1" "$2" <<'EOF'
import ctypes, locale, sys
locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
libc = ctypes.CDLL(None)
libc.wcwidth.argtypes = [ctypes.c_wchar]
def right_of(line, column):
    at = 0
    for i, ch in enumerate(line):
        if at >= column:
            return line[i:]
        at += max(libc.wcwidth(ch), 0)
    return ""
lines = [right_of(l, 80) for l in open(sys.argv[1]).read().split("\n")]
out, on = [], False
for l in lines:
    if "\u2500\u2500" in l or "--" in l:
        on = l.strip().startswith(sys.argv[2] + " ")
        continue
    if on:
        out.append(l.strip())
print(" | ".join(out))
EOF
}
# the last conversation of the database as JSON
# the export, retried for up to 5 s: the chat that just quit may still hold
# the database while it closes (a run once read an empty export there)
last_json() {
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        $K3 history export last --db $DB --format json > $OUT/last.json 2> $OUT/last.err &&
            jget "d['id']" > /dev/null && [ -n "$(jget "d['id']")" ] && return 0
        sleep 0.5
    done
    return 1
}
jget() { $PY -c "import json; d=json.load(open('$OUT/last.json')); print($1)" 2>/dev/null; }

case $K3 in /*) K3T=$K3 ;; *) K3T=$PWD/$K3 ;; esac   # the pane's shell: this tree's k3, wherever tmux starts it
$TM new-session -d -s k3 -x 120 -y 40 -c "$PWD" "env HOME=$PWD/$OUT/home XDG_DATA_HOME=$PWD/$OUT/xdg PS1='K3SHELL\$ ' sh"
sleep 0.3
$TM send-keys -t k3 "$K3T chat --endpoint $URL --db $DB -n 3000 --temp 0" Enter   # greedy: a long answer
if ! wait_for 'Enter sends' 20 || ! wait_for 'SERVER MEMORY' 10; then
    echo "FAIL endpoint tui: no full-screen chat with the server's panel: $(grep -v '^$' $OUT/screen.txt | tail -3 | tr '\n' ' ')"
    exit 0
fi
cp $OUT/screen.txt $OUT/idle.txt
$TM send-keys -t k3 -l "Tell me a very long story"
$TM send-keys -t k3 Enter
if wait_for 'streaming \([1-9][0-9]\)' 120; then   # ten pieces in (slow under ASan and load)
    cp $OUT/screen.txt $OUT/s0.txt   # the prompt still on screen: a fast server scrolls it away within a second
    sleep 1.2
    cap > $OUT/s1.txt
    inall() { panel $1 "SERVER DISK READ" | grep -o 'in all [0-9.]* [kMG]*B'; }
    d1=$(inall $OUT/s1.txt)
    for i in $(seq 1 20); do      # the panel reads /metrics once a second; a slow (ASan) server needs longer
        sleep 1.1
        cap > $OUT/s2.txt
        d2=$(inall $OUT/s2.txt)
        [ -n "$d2" ] && [ "$d2" != "$d1" ] && break
    done
    $TM send-keys -t k3 C-c
    wait_for 'interrupted' 20
    r_int=$?
    sleep 2.2
    cap > $OUT/after.txt
    answer=$(grep -a -A3 '› Tell me a very long story\|> Tell me a very long story' $OUT/s0.txt | tail -n +2 | cut -c1-79 | tr -d ' \n' | wc -c)
    ok $([ "$answer" -gt 5 ] && ! grep -q 'line mode' $OUT/s2.txt && echo 1) \
       "endpoint tui: the answer streams on the full screen ($answer characters on screen)" \
       "$(grep -v '^$' $OUT/s2.txt | tail -5 | tr '\n' '|')"
    net=$(panel $OUT/s2.txt NETWORK); ans=$(panel $OUT/s2.txt "ANSWER")
    ok $(echo "$net" | grep -q 'now [0-9.]* [kM]*B/s' && echo "$ans" | grep -q 'gen [0-9.]* tok/s' &&
         echo "$ans" | grep -q 'TTFT [0-9.]* m*s' && echo "$ans" | grep -q 'p50 [0-9.]* m*s' && echo "$ans" | grep -q 'p90 [0-9.]* m*s' && echo 1) \
       "endpoint tui: the panel shows the stream: network bytes/s, tok/s, TTFT, inter-token p50/p90 [$net] [$ans]" \
       "NETWORK [$net] ANSWER [$ans]"
    srv_rows=$(panel $OUT/s2.txt SERVER)
    ok $(echo "$srv_rows" | grep -q 'state reuse hit [0-9]*%' && echo 1) \
       "endpoint tui: a server figure is never split across rows ($(echo "$srv_rows" | grep -o 'state reuse hit [0-9]*%'))" \
       "SERVER [$srv_rows]"
    ok $([ -n "$d1" ] && [ -n "$d2" ] && [ "$d1" != "$d2" ] && echo 1) \
       "endpoint tui: the server's disk gauges move while the answer streams (bytes read: $d1 -> $d2)" \
       "[$d1] vs [$d2]: $(panel $OUT/s2.txt "SERVER DISK READ")"
    c0=$(panel $OUT/idle.txt "SERVER EXPERT CACHE"); c2=$(panel $OUT/after.txt "SERVER EXPERT CACHE")
    m0=$(panel $OUT/idle.txt "SERVER MEMORY"); m2=$(panel $OUT/after.txt "SERVER MEMORY")
    ok $(echo "$c2" | grep -q 'total [0-9]*%' && [ "$c0" != "$c2" ] && echo "$m2" | grep -q 'budget' && [ "$m0" != "$m2" ] && echo 1) \
       "endpoint tui: the server's expert-cache and memory gauges move [$c0] -> [$c2]; [$(echo "$m2" | cut -c1-90)]" \
       "cache [$c0] -> [$c2], memory [$m0] -> [$m2]"
    last_json
    st=$(jget "d['messages'][1]['status']"); n=$(jget "len(d['messages'][1]['content'])")
    be=$(sqlite3 $DB "select backend_endpoint from conversations" 2>/dev/null)
    ok $([ $r_int = 0 ] && [ "$st" = interrupted ] && [ "${n:-0}" -gt 0 ] && [ "$be" = "$URL" ] && echo 1) \
       "endpoint tui: Ctrl-C cancels the request; the partial answer ($n bytes) is in the local SQLite, interrupted, with its backend" \
       "ctrl-c seen $r_int, status $st, $n bytes, backend [$be]: $(grep -v '^$' $OUT/after.txt | tail -4 | tr '\n' '|')"
    CID=$(jget "d['id']")
    $TM send-keys -t k3 C-d
    wait_for 'resume with' 15
    $TM send-keys -t k3 "clear; $K3T chat --db $DB --resume $CID -n 8" Enter
    if wait_for 'resumed' 20 && wait_for "small @ 127.0.0.1:$PORT" 5; then
        $TM send-keys -t k3 -l "Go on"
        $TM send-keys -t k3 Enter
        wait_for 'turn 2.*idle' 60
        r2=$?
        $TM send-keys -t k3 C-d
        wait_for 'resume with' 15
        last_json
        nm=$(jget "len(d['messages'])"); st4=$(jget "d['messages'][3]['status']")
        ok $([ $r2 = 0 ] && [ "$nm" = 4 ] && [ "$st4" = complete ] && echo 1) \
           "endpoint tui: the conversation resumes on the full screen against its server and takes a turn" \
           "turn 2 seen $r2, $nm messages, last status $st4: $(grep -v '^$' $OUT/screen.txt | tail -4 | tr '\n' '|')"
    else
        echo "FAIL endpoint tui: --resume did not reopen against the server: $(grep -v '^$' $OUT/screen.txt | tail -4 | tr '\n' '|')"
    fi
else
    echo "FAIL endpoint tui: no answer streamed: $(grep -v '^$' $OUT/screen.txt | tail -4 | tr '\n' '|')"
fi

# a server without /metrics: the panel names what is not available, no zeros
$PY tests/fake_openai.py ok > $OUT/fake.out 2>&1 &
PIDS="$PIDS $!"
for i in $(seq 1 50); do FPORT=$(sed -n 's/^port //p' $OUT/fake.out 2>/dev/null); [ -n "$FPORT" ] && break; sleep 0.1; done
$TM send-keys -t k3 "clear; $K3T chat --endpoint http://127.0.0.1:$FPORT --db $PWD/$OUT/fake.db" Enter
if wait_for 'not available' 20; then
    $TM send-keys -t k3 -l "hello"
    $TM send-keys -t k3 Enter
    wait_for 'turn 1.*idle' 20
    sleep 1.2
    cap > $OUT/fake_screen.txt
    srv=$(panel $OUT/fake_screen.txt SERVER | sed 's/ | / /g; s/[ |]*$//')
    ok $(echo "$srv" | grep -q '/metrics.*404' && echo "$srv" | grep -q 'not available: running and waiting requests, KV cache use' &&
         ! echo "$srv" | grep -q ' 0%\| 0 ' && ! grep -q 'SERVER DISK' $OUT/fake_screen.txt && echo 1) \
       "endpoint tui: a server without /metrics: the panel says which figures are not available, no zeros [$srv]" "[$srv]"
    $TM send-keys -t k3 C-d
    wait_for 'resume with' 10
else
    echo "FAIL endpoint tui: a server without /metrics: $(grep -v '^$' $OUT/screen.txt | tail -4 | tr '\n' '|')"
fi

# vLLM's and SGLang's own figures (their /metrics fixtures served by the fake server)
for kind in vllm sglang; do
    $PY tests/fake_openai.py ok --metrics tests/fixtures/metrics_$kind.txt > $OUT/fake_$kind.out 2>&1 &
    PIDS="$PIDS $!"
    for i in $(seq 1 50); do FK=$(sed -n 's/^port //p' $OUT/fake_$kind.out 2>/dev/null); [ -n "$FK" ] && break; sleep 0.1; done
    $TM send-keys -t k3 "clear; $K3T chat --endpoint http://127.0.0.1:$FK --db $PWD/$OUT/$kind.db" Enter
    if wait_for "running [0-9]" 20; then
        srv=$(panel $OUT/screen.txt SERVER | sed 's/ | / /g; s/[ |]*$//')
        # vLLM's tok/s is generation_tokens_total between two polls: not
        # available until the second poll, then a rate (0.0 on the static fixture)
        if [ $kind = vllm ]; then want='vLLM at 127.0.0.1.*running [0-9]*.*waiting [0-9]*.*KV cache [0-9]*%.*prefix-cache hit [0-9]*%.*\(not available: server tokens/s\|[0-9.]* tok/s\)'
        else want='SGLang at 127.0.0.1.*running [0-9]*.*waiting [0-9]*.*KV cache [0-9]*%.*prefix-cache hit [0-9]*%.*[0-9.]* tok/s'; fi
        ok $(echo "$srv" | grep -q "$want" && echo 1) "endpoint tui: a $kind server's own figures in the panel [$srv]" "[$srv]"
    else
        echo "FAIL endpoint tui: a $kind server's own figures in the panel: $(grep -v '^$' $OUT/screen.txt | tail -3 | tr '\n' ' ')"
    fi
    $TM send-keys -t k3 C-d
    wait_for 'no message sent\|resume with' 10
done

# a server failure on the full screen: one error line, the turn stored as error, the chat goes on
$PY tests/fake_openai.py 500 > $OUT/fake500.out 2>&1 &
PIDS="$PIDS $!"
for i in $(seq 1 50); do F5=$(sed -n 's/^port //p' $OUT/fake500.out 2>/dev/null); [ -n "$F5" ] && break; sleep 0.1; done
$TM send-keys -t k3 "clear; $K3T chat --endpoint http://127.0.0.1:$F5 --db $PWD/$OUT/f500.db" Enter
if wait_for 'Enter sends' 20; then
    $TM send-keys -t k3 -l "hello"
    $TM send-keys -t k3 Enter
    wait_for 'HTTP 500' 20
    r=$?
    cap > $OUT/f500_screen.txt
    $TM send-keys -t k3 C-d
    wait_for 'resume with' 10
    DB_SAVE=$DB; DB=$PWD/$OUT/f500.db; last_json; DB=$DB_SAVE
    st=$(jget "d['messages'][1]['status']")
    ok $([ $r = 0 ] && grep -q 'HTTP 500: the GPUs are on fire (server error)' $OUT/f500_screen.txt && grep -q 'error' $OUT/f500_screen.txt && [ "$st" = error ] && echo 1) \
       "endpoint tui: a server error (HTTP 500) is one line on the full screen, the answer stored as error" \
       "seen $r, status $st: $(grep -v '^$' $OUT/f500_screen.txt | tail -5 | tr '\n' '|')"
else
    echo "FAIL endpoint tui: the chat against a failing server did not start: $(grep -v '^$' $OUT/screen.txt | tail -3 | tr '\n' ' ')"
fi

# a thinking model (the vLLM >= 0.10 replay: delta.reasoning) on an SGLang hybrid's /metrics: the
# reasoning is drawn dim above the answer, and the panel shows the KDA state pool beside the KV cache
$PY tests/fake_openai.py vllm --metrics tests/fixtures/metrics_sglang_hybrid.txt > $OUT/fake_think.out 2>&1 &
PIDS="$PIDS $!"
for i in $(seq 1 50); do FT=$(sed -n 's/^port //p' $OUT/fake_think.out 2>/dev/null); [ -n "$FT" ] && break; sleep 0.1; done
$TM send-keys -t k3 "clear; $K3T chat --endpoint http://127.0.0.1:$FT --db $PWD/$OUT/think.db" Enter
if wait_for 'Enter sends' 20; then
    $TM send-keys -t k3 -l "hello"
    $TM send-keys -t k3 Enter
    wait_for 'turn 1.*idle' 20
    sleep 1.2
    cap > $OUT/think_screen.txt
    $TM capture-pane -t k3 -p -e > $OUT/think_escapes.txt
    rl=$(grep -n 'The user greets me; answer briefly.' $OUT/think_screen.txt | head -1 | cut -d: -f1)
    al=$(grep -n '^Hello there.' $OUT/think_screen.txt | head -1 | cut -d: -f1)
    srv=$(panel $OUT/think_screen.txt SERVER | sed 's/ | / /g; s/[ |]*$//')
    $TM send-keys -t k3 -l "/reasoning"
    $TM send-keys -t k3 Enter
    wait_for 'reasoning collapsed' 10
    cap > $OUT/think_collapsed.txt
    ok $([ -n "$rl" ] && [ -n "$al" ] && [ "$rl" -lt "$al" ] && grep -q "$(printf '\033')\[2m *The user greets me" $OUT/think_escapes.txt &&
         grep -q 'Keep it short.' $OUT/think_screen.txt && ! grep -q 'Keep it short.' $OUT/think_collapsed.txt &&
         grep -q 'The user greets me' $OUT/think_collapsed.txt &&
         echo "$srv" | grep -q 'KV cache 12%.*state pool 85%.*prefix-cache hit 75%' && echo 1) \
       "endpoint tui: a thinking model's reasoning is drawn dim above its answer, /reasoning collapses it to one line; SGLang hybrid's state pool in the panel [$srv]" \
       "reasoning line [$rl] answer line [$al], panel [$srv]: $(grep -v '^$' $OUT/think_screen.txt | head -8 | cut -c1-80 | tr '\n' '|')"
    $TM send-keys -t k3 C-d
    wait_for 'resume with' 10
else
    echo "FAIL endpoint tui: the chat against a thinking server did not start: $(grep -v '^$' $OUT/screen.txt | tail -3 | tr '\n' ' ')"
fi

# kill -9 of the client mid-answer: the partial answer is in the store
DB9=$OUT/kill9.db
(printf 'Tell me a very long story\n'; sleep 60) | $K3 chat --lines --endpoint $URL --db $DB9 -n 3000 --temp 0 > $OUT/kill9.out 2>&1 &
CPID=$!
for i in $(seq 1 300); do [ "$(wc -c < $OUT/kill9.out)" -gt 200 ] && break; sleep 0.1; done
sleep 1.5                         # past one periodic save
kill -9 $CPID 2>/dev/null
wait $CPID 2>/dev/null
shown=$(wc -c < $OUT/kill9.out)
$K3 history export last --db $DB9 --format json > $OUT/last.json 2>/dev/null
st=$(jget "d['messages'][1]['status']"); inc=$(jget "d['messages'][1].get('incomplete')"); n=$(jget "len(d['messages'][1]['content'])")
printf 'Go on\n' | $K3 chat --lines --db $DB9 --resume last -n 4 > $OUT/kill9_resume.out 2>&1
rc=$?
$K3 history export last --db $DB9 --format json > $OUT/last.json 2>/dev/null
st2=$(jget "d['messages'][1]['status']"); n2=$(jget "len(d['messages'][1]['content'])"); nm=$(jget "len(d['messages'])")
ok $([ "$st" = interrupted ] && [ "$inc" = True ] && [ "${n:-0}" -gt 0 ] && [ $rc = 0 ] && [ "$st2" = interrupted ] && [ "$n2" = "$n" ] && [ "$nm" = 4 ] && echo 1) \
   "endpoint: kill -9 of the client mid-answer keeps the partial answer ($n bytes stored of $shown shown), interrupted and incomplete; the conversation resumes" \
   "status $st incomplete $inc $n bytes; after resume rc $rc status $st2 $n2 bytes, $nm messages: $(tail -3 $OUT/kill9_resume.out | tr '\n' '|')"
