#!/bin/sh
# t_chat_cmds.sh - the / commands and the last-exchange commands:
#  - /retry, /undo, /edit on the real controller (tool_chat redo): logits
#    bit-identical to a fresh session fed the same transcript, the greedy
#    answer identical, only the last exchange evaluated (snapshot restore);
#  - --plain runs the same command table as the full screen: /help lists
#    commands and is not sent to the model, /retry regenerates the same greedy
#    answer, /undo drops the exchange from the record, /quit stops reading;
#    --raw sends "/help" to the model as text;
#  - exports: mode 0600, no overwrite without --force, "~/" expanded, no
#    control bytes in Markdown.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/chat_cmds
rm -rf $OUT
mkdir -p $OUT/home
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1

${K3_TESTBIN:-build/tests}/tool_chat redo $M $OUT/redo.db

# sql DB QUERY: rows as "a|b" lines
sql() { $PY -c "import sqlite3,sys; [print('|'.join(str(c) for c in r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$1" "$2"; }

printf 'Hello there\n/help\nWhat is two plus two?\n/retry\n/undo\n/quit\nnever sent\n' |
    $K3 chat $M --db $OUT/p.db --plain --lines --json -n 8 > $OUT/p.jsonl 2> $OUT/p.err
N=$(wc -l < $OUT/p.jsonl)
A2=$(sed -n 2p $OUT/p.jsonl | $PY -c 'import json,sys; print(json.load(sys.stdin)["text"])')
A3=$(sed -n 3p $OUT/p.jsonl | $PY -c 'import json,sys; print(json.load(sys.stdin)["text"])')
MSGS=$(sql $OUT/p.db "SELECT role, content FROM messages ORDER BY seq" | tr '\n' ';')
if [ "$N" = 3 ] && grep -q '/retry' $OUT/p.err && grep -q '/undo' $OUT/p.err; then
    echo "PASS --plain /help lists the shared commands on stderr (3 answers on stdout: 2 turns + 1 retry)"
else echo "FAIL --plain /help: $N JSON lines; stderr: $(head -c 400 $OUT/p.err)"; fi
if [ -n "$A2" ] && [ "$A2" = "$A3" ]; then echo "PASS --plain /retry: the same greedy answer again"
else echo "FAIL --plain /retry: '$A2' then '$A3'"; fi
case "$MSGS" in
    "user|Hello there;assistant|"*)
        if [ "$(sql $OUT/p.db 'SELECT count(*) FROM messages')" = 2 ] && ! echo "$MSGS" | grep -q 'help\|never sent'; then
            echo "PASS --plain /undo dropped the exchange, /help was not sent, /quit stopped reading"
        else echo "FAIL --plain record: $MSGS"; fi ;;
    *) echo "FAIL --plain record: $MSGS" ;;
esac
printf '/help\n' | $K3 chat $M --db $OUT/raw.db --plain --raw --lines --json -n 4 > $OUT/raw.jsonl 2>$OUT/raw.err
if [ "$(sql $OUT/raw.db "SELECT content FROM messages WHERE role = 'user'")" = "/help" ]; then
    echo "PASS --raw sends '/help' to the model as text"
else echo "FAIL --raw: $(cat $OUT/raw.err)"; fi
# in a pipe only known commands are commands: "/nosuch" is a message (issue 30)
printf '/nosuch\n' | $K3 chat $M --db $OUT/unk.db --plain --lines -n 4 > /dev/null 2>$OUT/unk.err; RC=$?
if [ $RC = 0 ] && ! grep -q 'unknown command' $OUT/unk.err &&
   [ "$(sql $OUT/unk.db "SELECT content FROM messages WHERE role = 'user'")" = "/nosuch" ]; then
    echo "PASS piped /nosuch (no such command) is sent as a message, exit 0"
else echo "FAIL piped /nosuch: exit $RC: $(cat $OUT/unk.err)"; fi

# exports: a message with an escape sequence in it
printf 'make it \033[31mred\033[0m please\n/export md ~/e.md\n/export md ~/e.md\n/export json ~/e.md --force\n' |
    $K3 chat $M --db $OUT/e.db --plain --lines -n 4 > /dev/null 2> $OUT/e.err
MODE=$(stat -c %a $OUT/home/e.md 2>/dev/null)
if [ "$MODE" = 600 ] && grep -q 'exists (use --force' $OUT/e.err && head -c 1 $OUT/home/e.md | grep -q '{'; then
    echo "PASS /export: ~ expanded, mode 0600, refused to overwrite without --force, --force replaced it"
else echo "FAIL /export: mode '$MODE': $(cat $OUT/e.err)"; fi
$K3 history export last --format md -o ~/h.md --db $OUT/e.db 2>$OUT/h.err
$K3 history export last --format md -o ~/h.md --db $OUT/e.db 2>>$OUT/h.err; RC=$?
if [ "$(stat -c %a $OUT/home/h.md 2>/dev/null)" = 600 ] && [ $RC -ne 0 ] && grep -q 'exists' $OUT/h.err &&
   ! grep -q "$(printf '\033')" $OUT/home/h.md && grep -q 'red' $OUT/home/h.md; then
    echo "PASS history export -o: mode 0600, no control bytes in Markdown, no overwrite without --force"
else echo "FAIL history export -o: rc $RC: $(cat $OUT/h.err)"; fi

# history rm: at least 4 characters, --yes without a terminal
ID=$(sql $OUT/e.db "SELECT uid FROM conversations LIMIT 1")
$K3 history rm "$(echo $ID | cut -c1)" --yes --db $OUT/e.db > /dev/null 2> $OUT/rm1.err; R1=$?
$K3 history rm "$ID" --db $OUT/e.db < /dev/null > /dev/null 2> $OUT/rm2.err; R2=$?
LEFT=$(sql $OUT/e.db "SELECT count(*) FROM conversations")
$K3 history rm "$(echo $ID | cut -c1-4)" --yes --db $OUT/e.db > $OUT/rm3.out 2>&1; R3=$?
if [ $R1 = 2 ] && grep -q 'too short' $OUT/rm1.err && [ $R2 = 2 ] && grep -q -- '--yes' $OUT/rm2.err && [ "$LEFT" = 1 ] &&
   [ $R3 = 0 ] && [ "$(sql $OUT/e.db 'SELECT count(*) FROM conversations')" = 0 ]; then
    echo "PASS history rm: a 1-character id refused, no --yes without a terminal refused, 4 characters + --yes deleted"
else echo "FAIL history rm: $R1 $R2 $R3 left $LEFT: $(cat $OUT/rm1.err $OUT/rm2.err $OUT/rm3.out)"; fi
