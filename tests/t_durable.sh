#!/bin/sh
# t_durable.sh - an answer survives the chat being killed while it streams:
#  - kill -9 mid-answer: the answer row is already on disk with the text and
#    ids so far, marked in progress (incomplete);
#  - the next --resume closes it, loads the newest snapshot and prefills
#    only the tokens after it (the user message and the partial answer), with
#    n/N progress and a bar, and shows the answer as incomplete;
#  - SIGTERM mid-answer stores the partial answer and exits 143.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/durable
rm -rf $OUT
mkdir -p $OUT/home
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
DB=$OUT/d.db
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
sql() { $PY -c "import sqlite3,sys; [print('|'.join(str(c) for c in r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$1" "$2"; }

# kill_mid_answer SIGNAL: run a chat on the stored conversation, send long
# requests and, as soon as the streaming answer's row holds some tokens,
# send SIGNAL (polled every 10 ms: an answer may take well under a second);
# prints the chat's exit status, or "none" if every answer finished first.
kill_mid_answer() {
    $PY - "$1" "$DB" "$K3" "$M" "$OUT/$1.err" <<'PYEOF'
import os, signal, sqlite3, subprocess, sys, time
sig, db, k3, model, errf = sys.argv[1:6]
p = subprocess.Popen([k3, "chat", model, "--db", db, "--plain", "--lines", "--resume", "last", "-n", "6000", "--ctx", "8192",
                      "--threads", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(errf, "w"))
con = sqlite3.connect(db, timeout=5)
def answers():
    return con.execute("SELECT count(*) FROM messages WHERE role = 'assistant'").fetchone()[0]
for prompt in ["tell me everything", "tell me a very long story", "and more, all of it", "go on", "continue"]:
    before = answers()
    p.stdin.write((prompt + "\n").encode()); p.stdin.flush()
    deadline = time.time() + 120
    while time.time() < deadline:
        row = con.execute("SELECT generated_tokens, in_progress FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1").fetchone()
        if answers() > before and row and row[1] == 1 and (row[0] or 0) > 0:
            p.send_signal(getattr(signal, sig))
            print(p.wait())
            sys.exit(0)
        if answers() > before and row and row[1] == 0:
            break          # finished before a save: ask again
        time.sleep(0.01)
p.kill(); p.wait()
print("none")
PYEOF
}

printf 'hello there\n' | $K3 chat $M --db $DB --plain -n 8 --ctx 8192 > /dev/null 2>&1
RC=$(kill_mid_answer SIGKILL)
ROW=$(sql $DB "SELECT generated_tokens, length(content), length(token_ids) / 4, in_progress FROM messages ORDER BY id DESC LIMIT 1")
G=$(echo $ROW | cut -d'|' -f1); L=$(echo $ROW | cut -d'|' -f2); N=$(echo $ROW | cut -d'|' -f3); P=$(echo $ROW | cut -d'|' -f4)
if [ "$RC" = -9 ] && [ "$P" = 1 ] && [ "$G" -gt 0 ] && [ "$N" = "$G" ] && [ "$L" -gt 0 ]; then
    echo "PASS kill -9 mid-answer: $G streamed tokens ($L characters) were already stored, marked in progress"
else echo "FAIL kill -9 mid-answer: exit $RC, row $ROW"; fi
TOTAL=$(sql $DB "SELECT sum(length(token_ids) / 4) FROM messages")
printf 'and now?\n' | $K3 chat $M --db $DB --plain --json --resume last -n 4 --ctx 8192 --threads 1 > $OUT/r.jsonl 2> $OUT/r.err
SNAP=$(sed -n 's/.*state snapshot of \([0-9]*\) tokens loaded; prefilling the \([0-9]*\) tokens after it.*/\1 \2/p' $OUT/r.err)
S=${SNAP% *}; P=${SNAP#* }
$K3 history show last --db $DB > $OUT/show.txt
if grep -q 'cut off' $OUT/r.err && [ -n "$SNAP" ] && [ "$S" -gt 0 ] && [ $((S + P)) = $((TOTAL + 1)) ] &&
   grep -q "prefilled the conversation: $P tokens" $OUT/r.err && grep -q 'incomplete' $OUT/show.txt &&
   grep -q '"resumed_from_snapshot":true' $OUT/r.jsonl; then
    echo "PASS resume after kill -9: snapshot of $S tokens loaded, only the $P tokens after it prefilled (progress n/N + bar); answer shown incomplete"
else echo "FAIL resume after kill -9: snapshot '$SNAP', stored $TOTAL ids: $(tr '\n' ' ' < $OUT/r.err | cut -c1-400)"; fi

# SIGTERM mid-answer
RC=$(kill_mid_answer SIGTERM)
ROW=$(sql $DB "SELECT status, in_progress, generated_tokens FROM messages ORDER BY id DESC LIMIT 1")
if [ "$RC" = 143 ] && [ "$(echo $ROW | cut -d'|' -f1-2)" = "interrupted|0" ]; then
    echo "PASS SIGTERM mid-answer: partial answer stored as interrupted ($ROW), exit 143"
else echo "FAIL SIGTERM: exit $RC, row $ROW"; fi
