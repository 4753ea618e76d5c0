#!/bin/sh
# t_tui_input.sh - typing in the full screen, driven for real in tmux:
#  - input history behaves as in bash: after two messages Up brings back the
#    second then the first, Down walks back to an empty line, Ctrl-R finds
#    "first"; the same after /resume and after a restart (the history file);
#  - LANG=C: typing "naïve résumé" keeps every byte in the stored message;
#  - /retry, /undo and /edit work on the screen and in the record.
# Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/tmux.sh
K3=${K3:-./k3}
OUT=tests/out/tui_input
M=$OUT/model
DB=$OUT/t.db
PY=/usr/bin/python3
rm -rf $OUT
mkdir -p $OUT/home
if ! command -v tmux >/dev/null 2>&1; then echo "FAIL tui input: tmux is not installed"; exit 0; fi
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
tmux_server k3tin
SCREEN=$OUT/screen.txt
sql() { $PY -c "import sqlite3,sys; [print('|'.join(str(c) for c in r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$1" "$2"; }
# The input line: the row above the key bar, after the prompt mark.
input_line() { cap | tail -2 | head -1 | sed 's/^[>›] *//; s/ *$//'; }
# expect_input TEXT: wait up to 3 s for the input line to read TEXT.
expect_input() {
    i=0
    while [ $i -lt 30 ]; do
        [ "$(input_line)" = "$1" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
start_chat() {   # start_chat LANG ARGS...
    lang=$1
    shift
    wait_for 'K3SHELL' 30
    $TM send-keys -t k3 "env LANG=$lang LC_ALL=$lang $K3 chat $M --db $DB -n 6 $*" Enter
    wait_for 'Enter sends' 15
}
idle() { sleep 0.3; wait_for ' idle' 60; }

$TM new-session -d -s k3 -x 120 -y 40 \
    "env HOME=$PWD/$OUT/home XDG_DATA_HOME=$PWD/$OUT/home/data XDG_STATE_HOME=$PWD/$OUT/home/state PS1='K3SHELL\$ ' sh"
sleep 0.3
if ! start_chat C.UTF-8; then echo "FAIL tui input: no chat screen: $(cap | grep -v '^$' | tail -3 | tr '\n' ' ')"; exit 0; fi

# 1. Up / Down / Ctrl-R after two messages
send "first msg"; idle
send "second msg"; idle
$TM send-keys -t k3 Up
expect_input "second msg"; U1=$(input_line)
$TM send-keys -t k3 Up
expect_input "first msg"; U2=$(input_line)
$TM send-keys -t k3 Down Down
expect_input ""; D2=$(input_line)
if [ "$U1" = "second msg" ] && [ "$U2" = "first msg" ] && [ -z "$D2" ]; then
    echo "PASS Up brings back 'second msg' then 'first msg'; Down returns to an empty line"
else echo "FAIL Up/Down: Up '$U1', Up '$U2', Down Down '$D2'"; fi
$TM send-keys -t k3 C-r
$TM send-keys -t k3 -l "first"
sleep 0.5
cap > $OUT/ctrlr.txt
$TM send-keys -t k3 Enter
if ! grep -q 'failed' $OUT/ctrlr.txt && idle && [ "$(sql $DB "SELECT count(*) FROM messages WHERE content = 'first msg'")" = 2 ]; then
    echo "PASS Ctrl-R 'first' finds and sends 'first msg' again"
else echo "FAIL Ctrl-R: $(grep -a 'search' $OUT/ctrlr.txt | head -1)"; fi

# 2. after /resume (of another conversation and back)
FIRST=$(sql $DB "SELECT uid FROM conversations ORDER BY id LIMIT 1")
send "/new"; sleep 0.5
send "third msg"; idle
send "/resume $FIRST"; wait_for "resumed conversation" 20
$TM send-keys -t k3 Up
expect_input "/resume $FIRST"; R1=$(input_line)
$TM send-keys -t k3 Up
expect_input "third msg"; R2=$(input_line)
$TM send-keys -t k3 C-c
if [ "$R1" = "/resume $FIRST" ] && [ "$R2" = "third msg" ]; then echo "PASS Up after /resume walks back through the commands and messages"
else echo "FAIL Up after /resume: '$R1', '$R2'"; fi

# 3. across a restart (the history file)
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10
start_chat C.UTF-8
$TM send-keys -t k3 Up
expect_input "/resume $FIRST"; S1=$(input_line)
$TM send-keys -t k3 Up
expect_input "third msg"; S2=$(input_line)
$TM send-keys -t k3 C-c
if [ "$S1" = "/resume $FIRST" ] && [ "$S2" = "third msg" ]; then echo "PASS Up after a restart reads the history file"
else echo "FAIL Up after a restart: '$S1', '$S2'"; fi
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10

# 4. LANG=C keeps every byte typed
start_chat C
send "naïve résumé"; idle
GOT=$(sql $DB "SELECT content FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1")
if [ "$GOT" = "naïve résumé" ]; then echo "PASS LANG=C: 'naïve résumé' typed and stored with every byte"
else echo "FAIL LANG=C: stored '$GOT'"; fi
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10

# 5. the same in --plain (readline) under LANG=C
$TM send-keys -t k3 "env LANG=C LC_ALL=C $K3 chat $M --db $DB -n 6 --plain" Enter
wait_for 'Ctrl-D quits' 15
send "plain naïve"
wait_for 'k3: turn 1' 60
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10
GOT=$(sql $DB "SELECT content FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1")
if [ "$GOT" = "plain naïve" ]; then echo "PASS LANG=C --plain: 'plain naïve' stored with every byte"
else echo "FAIL LANG=C --plain: stored '$GOT'"; fi

# 6. /retry, /undo, /edit on the full screen
start_chat C.UTF-8
send "alpha question"; idle
A1=$(sql $DB "SELECT content FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")
send "/retry"; idle
A2=$(sql $DB "SELECT content FROM messages WHERE role = 'assistant' ORDER BY id DESC LIMIT 1")
C=$(sql $DB "SELECT id FROM conversations ORDER BY updated_ms DESC, id DESC LIMIT 1")
N1=$(sql $DB "SELECT count(*) FROM messages WHERE conversation_id = $C")
if [ "$A1" = "$A2" ] && [ "$N1" = 2 ]; then echo "PASS /retry on the screen: the same greedy answer replaces the old one (2 messages)"
else echo "FAIL /retry on the screen: '$A1' vs '$A2', $N1 messages"; fi
send "/edit"
expect_input "alpha question"; E=$(input_line)
$TM send-keys -t k3 -l " edited"
$TM send-keys -t k3 Enter
idle
LAST=$(sql $DB "SELECT content FROM messages WHERE conversation_id = $C AND role = 'user' ORDER BY seq DESC LIMIT 1")
N2=$(sql $DB "SELECT count(*) FROM messages WHERE conversation_id = $C")
if [ "$E" = "alpha question" ] && [ "$LAST" = "alpha question edited" ] && [ "$N2" = 2 ]; then
    echo "PASS /edit puts the last message in the input line; the edited one replaces it"
else echo "FAIL /edit: input '$E', last '$LAST', $N2 messages"; fi
send "/undo"
wait_for 'undone' 10
N3=$(sql $DB "SELECT count(*) FROM messages WHERE conversation_id = $C")
if [ "$N3" = 0 ] && ! cap | grep -q 'alpha question'; then echo "PASS /undo on the screen: the exchange gone from the record and the screen"
else echo "FAIL /undo on the screen: $N3 messages left"; fi
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10

# 7. NO_COLOR: the token legend does not speak of colours
NCMIN=$($K3 chat $M --db $OUT/nc_min.db --mem 1M < /dev/null 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
$TM send-keys -t k3 "env LANG=C.UTF-8 NO_COLOR=1 $K3 chat $M --db $OUT/nc.db --mem $((${NCMIN:-40} + 6))M -n 40" Enter
wait_for 'Enter sends' 15
send "tell me everything"
if wait_for 'hit rate' 60 && grep -q 'bold = hit rate' $OUT/screen.txt && ! grep -q 'colour = hit rate' $OUT/screen.txt; then
    echo "PASS NO_COLOR: the token legend says 'bold = hit rate < 50%', not colour"
else echo "FAIL NO_COLOR legend: $(grep -a 'hit rate\|token' $OUT/screen.txt | head -2)"; fi
idle
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10
