#!/bin/sh
# t_chat.sh - conversations: state kept between turns, stored as they
# happen, resumed without re-prefill.
#  - three turns incrementally == one pass over the transcript (bit-identical),
#    turn 2 prefills only its own tokens (tool_chat on the real controller);
#  - resume after exit restores the snapshot: next turn prefills only its new
#    tokens and gives the same greedy answer as an uninterrupted session;
#  - a snapshot from another model, or a corrupted one, is refused: the
#    transcript is re-prefilled from the exact token ids stored with each
#    message (with a notice), and the answer equals the uninterrupted one;
#  - kill -9 at random moments of a scripted chat, 20 times: the database
#    passes integrity_check, committed messages are there, an answer in
#    flight is absent or marked interrupted;
#  - two chats writing one database at once: no "database is locked".
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/chat
rm -rf $OUT
mkdir -p $OUT
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
M2=$OUT/small_other
$K3 gen $M2 --preset small --seed 42 >/dev/null 2>&1

${K3_TESTBIN:-build/tests}/tool_chat equiv $M $OUT/equiv.db "Hello there" "What is 2+2?" "Thanks, bye"
${K3_TESTBIN:-build/tests}/tool_chat interrupt $M $OUT/interrupt.db

jfield() { $PY -c "import json,sys; print(json.loads(sys.stdin.readlines()[$2])['$1'])"; }

# uninterrupted three turns
printf 'First question\nSecond one\nThird and last\n' | $K3 chat --lines $M --db $OUT/a.db --json -n 10 > $OUT/full.jsonl 2>$OUT/full.err
[ $(wc -l < $OUT/full.jsonl) -eq 3 ] && echo "PASS plain --json chat: one JSON line per turn" || echo "FAIL plain --json chat: $(cat $OUT/full.err)"
# two turns, exit, resume for the third
printf 'First question\nSecond one\n' | $K3 chat --lines $M --db $OUT/b.db --json -n 10 > $OUT/part1.jsonl 2>/dev/null
ID=$(jfield conversation_id 0 < $OUT/part1.jsonl)
printf 'Third and last\n' | $K3 chat --lines $M --db $OUT/b.db --json -n 10 --resume $ID > $OUT/part2.jsonl 2>$OUT/part2.err
NEW=$(printf '[{"role":"user","content":"Third and last"}]' > $OUT/t3.json; $K3 tokenize $M --chat $OUT/t3.json | wc -w)
R=$(jfield resumed_from_snapshot 0 < $OUT/part2.jsonl)
P=$(jfield prefilled_tokens 0 < $OUT/part2.jsonl)
if [ "$R" = "True" ] && [ "$P" = "$NEW" ]; then echo "PASS resume from snapshot: turn 3 prefilled only its $P new tokens"
else echo "FAIL resume: resumed_from_snapshot=$R prefilled=$P (want $NEW): $(cat $OUT/part2.err)"; fi
A=$(jfield text 2 < $OUT/full.jsonl); B=$(jfield text 0 < $OUT/part2.jsonl)
[ "$A" = "$B" ] && echo "PASS resumed answer identical to the uninterrupted session" || echo "FAIL resumed answer differs: [$A] vs [$B]"
P2=$(jfield prefilled_tokens 1 < $OUT/full.jsonl)
N2=$(printf '[{"role":"user","content":"Second one"}]' > $OUT/t2.json; $K3 tokenize $M --chat $OUT/t2.json | wc -w)
[ "$P2" = "$N2" ] && echo "PASS turn 2 prefilled_tokens ($P2) = its new tokens only" || echo "FAIL turn 2 prefilled $P2, want $N2"

# corrupted snapshot: fall back to re-prefill, same answer
printf 'First question\nSecond one\n' | $K3 chat --lines $M --db $OUT/c.db --json -n 10 > $OUT/c1.jsonl 2>/dev/null
ID=$(jfield conversation_id 0 < $OUT/c1.jsonl)
for f in $OUT/c.db.snapshots/*; do printf 'garbage!' | dd of=$f bs=1 seek=100 conv=notrunc 2>/dev/null; done
printf 'Third and last\n' | $K3 chat --lines $M --db $OUT/c.db --json -n 10 --resume $ID > $OUT/c2.jsonl 2>$OUT/c2.err
R=$(jfield resumed_from_snapshot 0 < $OUT/c2.jsonl); B=$(jfield text 0 < $OUT/c2.jsonl)
P=$(jfield prefilled_tokens 0 < $OUT/c2.jsonl)
if [ "$R" = "False" ] && grep -q "unusable.*re-prefilling" $OUT/c2.err && grep -q "prefilled the conversation: [0-9]* tokens" $OUT/c2.err && [ "$P" = "$NEW" ] && [ "$A" = "$B" ]; then
    echo "PASS corrupted snapshot: refused with a notice, the stored token ids re-prefilled, same answer as uninterrupted"
else echo "FAIL corrupted snapshot: resumed=$R answer [$B] stderr: $(cat $OUT/c2.err)"; fi
# snapshot from another model: not used
printf 'Third and last\n' | $K3 chat --lines $M2 --db $OUT/b.db --json -n 10 --resume $ID > /dev/null 2>$OUT/other.err
ID_B=$(jfield conversation_id 0 < $OUT/part1.jsonl)
printf 'Fourth\n' | $K3 chat --lines $M2 --db $OUT/b.db --json -n 4 --resume $ID_B > $OUT/o.jsonl 2>$OUT/o.err
R=$(jfield resumed_from_snapshot 0 < $OUT/o.jsonl)
if [ "$R" = "False" ] && grep -q "re-prefilling" $OUT/o.err; then echo "PASS snapshot of another model is not loaded: $(grep -m1 snapshot $OUT/o.err)"
else echo "FAIL another model's snapshot: resumed=$R: $(cat $OUT/o.err)"; fi

# kill -9 at random moments during a scripted multi-turn chat, 20 times.
# Each run's conversation is found by its own first message; committed
# messages must be in order with none missing between them. Runs killed
# before anything was committed check nothing, so most runs must commit.
# The moments are fractions of this machine's own timings, measured first:
# START_MS for a chat given one message and a one-token answer (start-up,
# the first commit, exit), RUN_MS for the whole scripted chat. A fixed delay killed most runs during start-up on a
# slow machine under ASan, and then nothing was checked.
DB=$OUT/crash.db
rm -f $DB $DB-wal $DB-shm
rm -rf $DB.snapshots
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
scripted_chat() { # RUN: six messages, 50 ms apart
    ( for l in 1 2 3 4 5 6; do echo "message $1.$l"; sleep 0.05; done ) | $K3 chat --lines $M --db $DB --json -n 30
}
t0=$(now_ms); echo "message 0.0" | $K3 chat --lines $M --db $OUT/calibrate.db --json -n 1 >/dev/null 2>&1; t1=$(now_ms)
START_MS=$((t1 - t0))
scripted_chat 0 >/dev/null 2>&1; t2=$(now_ms)
RUN_MS=$((t2 - t1))
[ $RUN_MS -gt $START_MS ] || RUN_MS=$((START_MS + 300))
ok=0 committed=0
for i in $(seq 1 20); do
    scripted_chat $i > $OUT/crash.out 2>/dev/null &
    pid=$!
    # from 15% of the conversation before the start-up ends to 80% of the way through it
    ms=$(( START_MS + (RUN_MS - START_MS) * ((i * 37) % 20 - 3) / 20 ))
    sleep $(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
    kill -9 $(pgrep -P $pid k3) $pid 2>/dev/null
    pkill -9 -f "k3 chat --lines $M --db $DB" 2>/dev/null
    wait $pid 2>/dev/null
    [ -f $DB ] || { ok=$((ok + 1)); continue; }   # killed before it created the database: nothing to check (a slow start, e.g. ASan)
    if ! $K3 history check --db $DB > $OUT/check.out 2>&1; then echo "FAIL crash $i: history check: $(cat $OUT/check.out)"; continue; fi
    n=$($PY - $DB $i <<'PY'
import sqlite3, sys
db, i = sys.argv[1], sys.argv[2]
c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
row = c.execute("SELECT conversation_id FROM messages WHERE role = 'user' AND content = ?", ("message %s.1" % i,)).fetchone()
if not row:
    print(0); sys.exit(0)
msgs = c.execute("SELECT role, content, status FROM messages WHERE conversation_id = ? ORDER BY seq", row).fetchall()
roles = [m[0] for m in msgs if m[0] != "system"]
users = [m[1] for m in msgs if m[0] == "user"]
ok = all(roles[k] == ("user" if k % 2 == 0 else "assistant") for k in range(len(roles)))
ok = ok and users == ["message %s.%d" % (i, k + 1) for k in range(len(users))]
ok = ok and all(m[2] in ("complete", "interrupted", "error") for m in msgs)
print(len(msgs) if ok else -1)
PY
)
    if [ "$n" = -1 ] || [ -z "$n" ]; then echo "FAIL crash $i: conversation out of order or a message missing"; continue; fi
    ok=$((ok + 1))
    [ "$n" -gt 0 ] && committed=$((committed + 1))
done
if [ $ok -eq 20 ] && [ $committed -ge 10 ]; then
    echo "PASS kill -9 during chat, 20 times: database intact, committed messages in order ($committed runs had committed messages; start-up $START_MS ms, whole chat $RUN_MS ms)"
elif [ $ok -eq 20 ]; then
    echo "FAIL kill -9 during chat: only $committed of 20 runs committed a message before the kill (nothing was checked; start-up $START_MS ms, whole chat $RUN_MS ms)"
fi

# two chats writing the same database at the same time: both must finish,
# and both conversations must be there whole (3 questions, 3 answers each)
rm -f $OUT/shared.db $OUT/shared.db-wal $OUT/shared.db-shm
rm -rf $OUT/shared.db.snapshots
( printf 'a1\na2\na3\n' | $K3 chat --lines $M --db $OUT/shared.db -n 20 > /dev/null 2>$OUT/s1.err; echo $? > $OUT/s1.rc ) &
( printf 'b1\nb2\nb3\n' | $K3 chat --lines $M --db $OUT/shared.db -n 20 > /dev/null 2>$OUT/s2.err; echo $? > $OUT/s2.rc ) &
wait
shared=$($PY - $OUT/shared.db <<'PY'
import sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
out = []
for who in "ab":
    row = c.execute("SELECT conversation_id FROM messages WHERE content = ?", (who + "1",)).fetchone()
    msgs = c.execute("SELECT role, content FROM messages WHERE conversation_id = ? AND role <> 'system' ORDER BY seq",
                     row).fetchall() if row else []
    users = [m[1] for m in msgs if m[0] == "user"]
    answers = [m for m in msgs if m[0] == "assistant"]
    out.append("%s:%s" % (who, "ok" if users == [who + "1", who + "2", who + "3"] and len(answers) == 3 else "bad"))
print(" ".join(out))
PY
)
if [ "$(cat $OUT/s1.rc)" != 0 ] || [ "$(cat $OUT/s2.rc)" != 0 ]; then
    echo "FAIL two chats on one database at once: exit $(cat $OUT/s1.rc) and $(cat $OUT/s2.rc): $(head -c 200 $OUT/s1.err $OUT/s2.err)"
elif grep -qi "locked" $OUT/s1.err $OUT/s2.err; then echo "FAIL two chats on one database at once: database is locked"
elif [ "$shared" != "a:ok b:ok" ]; then echo "FAIL two chats on one database at once: conversations incomplete ($shared)"
else echo "PASS two chats on one database at once: both exit 0, both conversations whole"; fi
