#!/bin/sh
# t_tui.sh - the full-screen chat driven for real: ./k3 chat runs in a
# detached tmux pane (120x40), keys go in with send-keys, the screen comes
# back with capture-pane. Checks: an answer streams; gauge labels and
# changing numbers are on screen while it decodes (a small memory budget so
# the disk gauges show real streaming); Ctrl-C interrupts and the partial
# answer is stored as interrupted; /new, /resume, /search and /export work;
# resizing to 80x24 and back keeps a sane layout; quitting restores the
# terminal. Everything it writes stays in tests/out (HOME and the XDG dirs
# point there). Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/tmux.sh
K3=${K3:-./k3}
OUT=tests/out
MODEL=$OUT/tui_model
DB=$OUT/tui.db
WORK=$OUT/tui_work
MEM=${TUI_MEM:-}             # default: just above the minimum, so the weights stream from disk
mkdir -p $OUT
if ! command -v tmux >/dev/null 2>&1; then
    echo "FAIL tui: tmux is not installed"
    exit 0
fi
[ -f $MODEL/config.json ] || $K3 gen $MODEL --preset small >/dev/null 2>&1
rm -rf $WORK $DB $DB-wal $DB-shm $DB.snapshots $OUT/tui_export.md
mkdir -p $WORK/home
tmux_server k3tui
SCREEN=$WORK/screen.txt




# The conversation id shown in the status line.
conv_id() { cap | head -1 | sed -n 's/.*conv \([0-9a-f]\{8\}\).*/\1/p'; }

# Widest screen line in cells (wide characters count 2).
max_width() {
    /usr/bin/python3 -c '
import sys, unicodedata
def w(c):
    if unicodedata.combining(c) or unicodedata.category(c) == "Cf": return 0
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1
print(max((sum(w(c) for c in l.rstrip("\n")) for l in open(sys.argv[1])), default=0))' "$1"
}

# A plain shell in the pane, so that after k3 exits its prompt shows again.
$TM new-session -d -s k3 -x 120 -y 40 \
    "env HOME=$PWD/$WORK/home XDG_DATA_HOME=$PWD/$WORK/home/data XDG_STATE_HOME=$PWD/$WORK/home/state \
     XDG_CONFIG_HOME=$PWD/$WORK/home/config PS1='K3SHELL\$ ' sh"
sleep 0.3
$TM send-keys -t k3 "stty -a > $WORK/stty_before.txt; clear" Enter
sleep 0.3
if [ -z "$MEM" ]; then   # the minimum depends on the build (ASan's is larger)
    MIN=$($K3 chat $MODEL --db $WORK/min.db --mem 1M --ctx 8192 < /dev/null 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
    MEM=$((${MIN:-40} + 6))M
fi
$TM send-keys -t k3 "$K3 chat $MODEL --db $DB --mem $MEM --ctx 8192 -n 4000" Enter
if ! wait_for 'Enter sends' 15; then
    fail "tui starts" "no chat screen after 15 s: $(cap | grep -v '^$' | tail -3 | tr '\n' ' ')"
    exit 0
fi
pass "tui starts"

# 1. an answer streams
$TM send-keys -t k3 -l "tell me everything"
$TM send-keys -t k3 Enter
if wait_for 'decoding [0-9]' 10; then
    FIRST=$(conv_id)
    sleep 1
    cap > $WORK/decode1.txt
    sleep 1
    cap > $WORK/decode2.txt
    # the transcript is the left part of the rows between the status line and
    # the rule above the input; minus the welcome notice and the user's line
    answer=$(sed -n '2,/Ctrl-J new line/p' $WORK/decode2.txt | sed '$d' | cut -c1-60 \
        | grep -av 'Enter sends\|tell me everything' | tr -d ' \n' | wc -c)
    if [ "$answer" -gt 20 ]; then pass "message streams an answer ($answer characters on screen)"
    else fail "message streams an answer" "only $answer characters of answer on screen"; fi
else
    fail "message streams an answer" "status never showed decoding: $(head -1 $WORK/screen.txt)"
fi

# 2. gauges: labels present, numbers move between two captures during the decode
missing=""
for label in "DISK READ" "EXPERT CACHE" "MEMORY" "SPEED" "PER-TOKEN I/O" "hit now" "tok/s" "TTFT" "budget"; do
    grep -q "$label" $WORK/decode2.txt || missing="$missing '$label'"
done
if [ -z "$missing" ]; then pass "gauge labels on screen during generation"
else fail "gauge labels on screen during generation" "missing$missing"; fi
num1=$(grep -o 'ctx [0-9.k]*/\|decoding [0-9]*\|[0-9.]* [kMG]*B/s\|[0-9]* done' $WORK/decode1.txt | tr '\n' ' ')
num2=$(grep -o 'ctx [0-9.k]*/\|decoding [0-9]*\|[0-9.]* [kMG]*B/s\|[0-9]* done' $WORK/decode2.txt | tr '\n' ' ')
if grep -q 'decoding' $WORK/decode2.txt && [ -n "$num2" ] && [ "$num1" != "$num2" ]; then
    pass "gauge numbers change during generation ($num1-> $num2)"
else
    fail "gauge numbers change during generation" "first: '$num1' second: '$num2'"
fi
if grep -q '[1-9][0-9.]* [kMG]B/s' $WORK/decode2.txt; then pass "disk read rate is live under a memory budget"
else fail "disk read rate is live under a memory budget" "$(grep 'now' $WORK/decode2.txt | head -1)"; fi

# 3. Ctrl-C stops the answer; the partial text is stored as interrupted
$TM send-keys -t k3 C-c
if wait_for 'interrupted' 10 && wait_for ' idle' 5; then
    $K3 history show $FIRST --db $DB > $WORK/show.txt 2>&1
    if grep -q 'interrupted' $WORK/show.txt; then pass "Ctrl-C interrupts, partial answer stored as interrupted"
    else fail "Ctrl-C interrupts, partial answer stored as interrupted" "history show: $(head -c 300 $WORK/show.txt)"; fi
else
    fail "Ctrl-C interrupts, partial answer stored as interrupted" "no 'interrupted' on screen: $(head -1 $WORK/screen.txt)"
fi

# 4. /new starts another conversation
$TM send-keys -t k3 -l "/new"
$TM send-keys -t k3 Enter
if wait_for 'new conversation' 5 && cap | head -1 | grep -q 'conv new'; then
    pass "/new starts a new conversation (stored with its first message)"
else
    fail "/new" "status shows '$(cap | head -1)' (first was $FIRST)"
fi

# 5. /search finds the first conversation's message
$TM send-keys -t k3 -l "/search everything"
$TM send-keys -t k3 Enter
if wait_for "match.*for \"everything\"" 5 && grep -q "$FIRST #" $WORK/screen.txt; then pass "/search lists the stored message"
else fail "/search" "$(grep -i 'match' $WORK/screen.txt | head -2)"; fi

# 6. /resume goes back to the first conversation (its stored answer reappears,
#    with the footer that says it was interrupted)
$TM send-keys -t k3 -l "/resume $FIRST"
$TM send-keys -t k3 Enter
if wait_for "resumed conversation $FIRST" 20 && [ "$(conv_id)" = "$FIRST" ] && grep -q 'tokens, interrupted' $WORK/screen.txt; then
    pass "/resume $FIRST restores the conversation"
else
    fail "/resume" "status shows '$(conv_id)': $(grep -i 'resum' $WORK/screen.txt | head -2)"
fi

# 7. /export writes the conversation as Markdown
$TM send-keys -t k3 -l "/export md $OUT/tui_export.md"
$TM send-keys -t k3 Enter
if wait_for 'exported conversation' 5 && grep -q 'tell me everything' $OUT/tui_export.md 2>/dev/null; then
    pass "/export md writes the conversation"
else
    fail "/export md" "$(grep -i 'export' $WORK/screen.txt | head -1); file: $(head -c 200 $OUT/tui_export.md 2>&1)"
fi

# 8. resize to 80x24 and back: status on top, key bar at the bottom, input
#    line present, nothing wider than the screen; the side panel comes back
$TM resize-window -t k3 -x 80 -y 24
sleep 0.5
cap > $WORK/small.txt
rows=$(wc -l < $WORK/small.txt)
width=$(max_width $WORK/small.txt)
if head -1 $WORK/small.txt | grep -q '^ k3' && tail -1 $WORK/small.txt | grep -q 'F1Help' \
    && grep -q 'disk' $WORK/small.txt && [ "$width" -le 80 ] && [ "$rows" -eq 24 ]; then
    pass "resize to 80x24 keeps a sane layout"
else
    fail "resize to 80x24 keeps a sane layout" "rows $rows width $width; top '$(head -1 $WORK/small.txt)' bottom '$(tail -1 $WORK/small.txt)'"
fi
$TM resize-window -t k3 -x 120 -y 40
sleep 0.5
cap > $WORK/big.txt
if head -1 $WORK/big.txt | grep -q '^ k3' && tail -1 $WORK/big.txt | grep -q 'F1Help' \
    && grep -q 'DISK READ' $WORK/big.txt && [ "$(max_width $WORK/big.txt)" -le 120 ]; then
    pass "resize back to 120x40 restores the side panel"
else
    fail "resize back to 120x40" "top '$(head -1 $WORK/big.txt)'"
fi

# 9. F1 shows help, any key closes it
$TM send-keys -t k3 F1
if wait_for 'k3 chat - help' 15 && grep -q '/resume \[ID\]' $WORK/screen.txt; then
    $TM send-keys -t k3 Escape
    sleep 0.3
    if cap | grep -q 'k3 chat - help'; then fail "F1 help" "help did not close"; else pass "F1 help opens and closes"; fi
else
    fail "F1 help" "no help view"
fi

# 10. quitting restores the terminal: shell prompt back, main screen, same tty modes
$TM send-keys -t k3 C-d
# (-J joins the hint's wrapped lines: it carries --mem and --ctx and is wider than the pane)
if wait_for 'K3SHELL\$' 10 && $TM capture-pane -t k3 -p -J | grep -q "resume with: .*--resume $FIRST"; then
    $TM send-keys -t k3 "stty -a > $WORK/stty_after.txt" Enter
    sleep 0.5
    alt=$($TM display -p -t k3 '#{alternate_on}')
    if [ "$alt" = 0 ] && cmp -s $WORK/stty_before.txt $WORK/stty_after.txt; then
        pass "exit restores the terminal (shell prompt, main screen, tty modes unchanged)"
    else
        fail "exit restores the terminal" "alternate screen $alt; stty diff: $(diff $WORK/stty_before.txt $WORK/stty_after.txt | head -4 | tr '\n' ' ')"
    fi
else
    fail "exit restores the terminal" "no shell prompt / resume hint: $(grep -v '^$' $WORK/screen.txt | tail -3 | tr '\n' ' ')"
fi
