#!/bin/sh
# t_record.sh - the stored record is what happened, through the real binary:
#  - opening the chat and leaving without a message stores nothing, and
#    "last" is the last conversation with a message;
#  - /set temp=0.7 mid-conversation does not rewrite earlier answers: each
#    answer keeps the sampling it was made with, printed as typed (0.7);
#  - /system once a conversation has begun is kept for /new, not written
#    into this conversation's record;
#  - --resume restores the stored sampling.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/record
rm -rf $OUT
mkdir -p $OUT/home
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/small
DB=$OUT/r.db
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
sql() { $PY -c "import sqlite3,sys; [print('|'.join(str(c) for c in r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$1" "$2"; }

printf 'hello there\n' | $K3 chat $M --db $DB --plain -n 4 > /dev/null 2>&1
FIRST=$(sql $DB "SELECT uid FROM conversations")
: | $K3 chat $M --db $DB --plain -n 4 > /dev/null 2> $OUT/empty.err
printf '/system ignored\n/set temp=0.5\n' | $K3 chat $M --db $DB --plain --lines -n 4 > /dev/null 2>>$OUT/empty.err
N=$(sql $DB "SELECT count(*) FROM conversations")
$K3 history show last --db $DB > $OUT/last.txt 2>&1
if [ "$N" = 1 ] && grep -q "conversation $FIRST" $OUT/last.txt && grep -q 'nothing saved' $OUT/empty.err; then
    echo "PASS a chat without a message stores nothing ('nothing saved'); last = $FIRST, the one with a message"
else echo "FAIL empty conversations: $N stored; last: $(head -1 $OUT/last.txt); $(cat $OUT/empty.err)"; fi

printf 'first question\n/set temp=0.7\nsecond question\n/system be terse\n' |
    $K3 chat $M --db $OUT/s.db --plain --lines -n 4 > /dev/null 2> $OUT/s.err
T1=$(sql $OUT/s.db "SELECT json_extract(sampling_json, '\$.temperature') FROM messages WHERE role = 'assistant' ORDER BY seq LIMIT 1")
T2=$(sql $OUT/s.db "SELECT json_extract(sampling_json, '\$.temperature') FROM messages WHERE role = 'assistant' ORDER BY seq DESC LIMIT 1")
SYS=$(sql $OUT/s.db "SELECT system_prompt FROM conversations")
$K3 history show last --db $OUT/s.db > $OUT/show.txt 2>&1
if [ "$T1" = 0.0 ] && [ "$T2" = 0.7 ] && grep -q '"temperature":0.7[,}]' $OUT/show.txt && ! grep -q '0.69999' $OUT/show.txt; then
    echo "PASS each answer keeps its own sampling (temperature $T1 then $T2, shown as typed)"
else echo "FAIL per-answer sampling: '$T1' '$T2': $(grep -i sampl $OUT/show.txt | head -3)"; fi
if [ -z "$SYS" ] && grep -q 'kept for the next conversation' $OUT/s.err && ! grep -q 'be terse' $OUT/show.txt; then
    echo "PASS /system after the first message is kept for /new; the record keeps the prompt the model saw (none)"
else echo "FAIL /system mid-conversation: stored '$SYS'"; fi
printf '/set\n' | $K3 chat $M --db $OUT/s.db --plain --resume last -n 4 > /dev/null 2> $OUT/resume.err
if grep -q 'temp=0.7 ' $OUT/resume.err; then echo "PASS --resume restores the stored sampling ($(grep -m1 'temp=' $OUT/resume.err))"
else echo "FAIL --resume sampling: $(cat $OUT/resume.err)"; fi
printf '/set\n' | $K3 chat $M --db $OUT/s.db --plain --resume last --top-k 5 -n 4 > /dev/null 2> $OUT/resume2.err
if grep -q 'temp=0.7 top_p=1 top_k=5 ' $OUT/resume2.err; then echo "PASS --resume with --top-k 5: the typed option overrides, the rest restored"
else echo "FAIL --resume --top-k: $(cat $OUT/resume2.err)"; fi
$K3 chat $M --db $OUT/s.db --plain --resume last --system "X" < /dev/null > /dev/null 2> $OUT/sys.err; RC=$?
if [ $RC = 2 ] && grep -q 'keeps the system prompt it began with' $OUT/sys.err; then echo "PASS --resume with --system is refused (exit 2) with the reason"
else echo "FAIL --resume --system: exit $RC: $(cat $OUT/sys.err)"; fi

# two windows on one conversation: the second writer is refused, naming the first
UID1=$(sql $OUT/s.db "SELECT uid FROM conversations LIMIT 1")
rm -f $OUT/fifo
mkfifo $OUT/fifo
$K3 chat $M --db $OUT/s.db --plain --resume $UID1 -n 2 < $OUT/fifo > /dev/null 2> $OUT/a.err &
APID=$!
exec 3> $OUT/fifo
i=0
while [ $i -lt 100 ] && ! grep -q "pid $APID" $OUT/s.db.snapshots/$UID1.writer 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
N0=$(sql $OUT/s.db "SELECT count(*) FROM messages")
printf 'from the second window\n' | $K3 chat $M --db $OUT/s.db --plain --resume $UID1 -n 2 > /dev/null 2> $OUT/b.err; RC=$?
N1=$(sql $OUT/s.db "SELECT count(*) FROM messages")
exec 3>&-
wait $APID
printf 'after the first closed\n' | $K3 chat $M --db $OUT/s.db --plain --resume $UID1 -n 2 > /dev/null 2> $OUT/c.err; RC2=$?
if [ $RC = 1 ] && grep -q "open for writing in another k3 (pid $APID)" $OUT/b.err && [ "$N0" = "$N1" ] && [ $RC2 = 0 ]; then
    echo "PASS a second writer on one conversation is refused naming the first (pid $APID); after it exits, resume works"
else echo "FAIL two writers: exit $RC/$RC2, messages $N0 -> $N1: $(cat $OUT/b.err $OUT/c.err | tail -3)"; fi
