#!/bin/sh
# t_tui_first_minutes.sh - the full screen's markdown and stored states
# (issue 30), driven in a detached tmux pane (100x40, UTF-8): *italic*,
# `inline code`, [links](url) and tables drawn without their markers; a
# code block's lines drawn at column 0 with nothing beside them (a mouse
# selection takes only code); /copy 1 puts only the code block on the
# clipboard; an answer cut by kill -9 reads "incomplete", not
# "interrupted". Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/tmux.sh
K3=${K3:-./k3}
PY=/usr/bin/python3
OUT=tests/out/tui_first_minutes
rm -rf $OUT
mkdir -p $OUT/home
if ! command -v tmux >/dev/null 2>&1; then
    echo "FAIL tui first minutes: tmux is not installed"
    exit 0
fi
M=$PWD/models/k3-mini
DB=$OUT/f.db
tmux_server k3tuif
SCREEN=$OUT/screen.txt
export XDG_DATA_HOME=$PWD/$OUT/home/data XDG_STATE_HOME=$PWD/$OUT/home/state HOME=$PWD/$OUT/home

# A stored conversation whose answer holds every kind of markdown.
printf '%b' 'Some *slanted* words, `k3 run` inline, see [the docs](https://k3.example/docs) now.\n\n| model | size |\n|---|---:|\n| k3-mini | 1.9 MB |\n| Kimi K3 | 1.56 TB |\n\n```sh\nmake run\nk3 chat\n```\nDone.' > $OUT/md
store_answer $M $DB 5eed0002 $OUT/md

$TM new-session -d -s k3 -x 100 -y 40 \
    "env LANG=C.UTF-8 LC_ALL=C.UTF-8 HOME=$HOME XDG_DATA_HOME=$XDG_DATA_HOME XDG_STATE_HOME=$XDG_STATE_HOME PS1='K3SHELL\$ ' sh"
$TM set -g set-clipboard on
sleep 0.3
$TM send-keys -t k3 "$K3 chat $M --db $DB --resume 5eed0002" Enter
if ! wait_for 'Enter sends' 20; then
    fail "tui first minutes starts" "$(cap | grep -v '^$' | tail -3 | tr '\n' ' ')"
    exit 0
fi
cap > $OUT/md.txt
cap -e > $OUT/md_attr.txt

# 1. inline markdown without its markers, each with its attribute
if grep -q '^Some slanted words, k3 run inline, see the docs (https://k3.example/docs) now\.' $OUT/md.txt &&
   grep -q '\[[34]mslanted' $OUT/md_attr.txt && grep -q '\[32mk3 run' $OUT/md_attr.txt &&
   grep -q '\[4mthe docs' $OUT/md_attr.txt; then
    pass "*italic* (italics or underline), \`code\` (colour) and [links](url) (underlined text, url kept) without markers"
else fail "inline markdown" "$(grep -a 'slanted' $OUT/md_attr.txt | cat -v | head -2)"; fi
# 2. a table in aligned columns
if grep -q '^model   │ size *$' $OUT/md.txt && grep -q '^────────┼──────── *$' $OUT/md.txt &&
   grep -q '^k3-mini │ 1\.9 MB *$' $OUT/md.txt && grep -q '^Kimi K3 │ 1\.56 TB *$' $OUT/md.txt; then
    pass "a table is drawn in aligned columns, its rule as ─┼─"
else fail "table" "$(grep -n 'model\|k3-mini\|Kimi' $OUT/md.txt | head -4 | tr '\n' ' ')"; fi
# 3. a code block: rules above and below, the code alone on its lines
if grep -q '^── sh ─*$' $OUT/md.txt && grep -q '^make run *$' $OUT/md.txt && grep -q '^k3 chat *$' $OUT/md.txt &&
   ! grep -q '│ make run' $OUT/md.txt && ! grep -q '```' $OUT/md.txt; then
    pass "a code block's lines hold only the code (rules above and below; nothing for a selection to pick up)"
else fail "code block" "$(grep -n 'sh ─\|make run\|k3 chat' $OUT/md.txt | head -4 | tr '\n' ' ')"; fi
# 4. /copy 1: only the code block reaches the clipboard
send "/copy 1"
if wait_for 'copied code block 1' 5 && [ "$($TM show-buffer 2>/dev/null)" = "make run
k3 chat" ]; then
    pass "/copy 1 puts only the first code block on the clipboard (OSC 52)"
else fail "/copy 1" "buffer: $($TM show-buffer 2>/dev/null | head -3 | tr '\n' '|'); $(grep copy $OUT/screen.txt | head -2)"; fi
send "/quit"
sleep 0.5

# 5. an answer cut by kill -9 reads "incomplete" (the store's word), not "interrupted"
$PY - $DB <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("UPDATE messages SET in_progress = 1 WHERE id = (SELECT max(id) FROM messages WHERE role = 'assistant')")
con.commit()
PY
$TM send-keys -t k3 "clear; $K3 chat $M --db $DB --resume 5eed0002" Enter
if wait_for 'Enter sends' 20 && grep -q 'incomplete: the chat stopped while answering' $OUT/screen.txt &&
   ! grep -q 'tokens, interrupted' $OUT/screen.txt; then
    pass "an answer cut by kill -9 shows as incomplete, not interrupted"
else fail "incomplete answer" "$(grep -n 'tokens' $OUT/screen.txt | head -3 | tr '\n' ' ')"; fi
send "/quit"

# 6. LANG=C at 80x24: a missing figure reads n/a between | bullets; after an
# answer the speed row is not cut (the draft figures move to their own row)
tmux_replace 80 24 \
    "env LANG=C LC_ALL=C HOME=$HOME XDG_DATA_HOME=$XDG_DATA_HOME XDG_STATE_HOME=$XDG_STATE_HOME PS1='K3SHELL\$ ' sh"
sleep 0.3
$TM send-keys -t k3 "$K3 chat $M --db $OUT/c.db" Enter
if wait_for 'Enter sends' 20 && grep -q 'gen n/a | prompt n/a | TTFT n/a' $OUT/screen.txt; then
    pass "LANG=C: missing figures read n/a between | bullets ($(grep -o 'gen n/a.*' $OUT/screen.txt | head -1))"
else fail "LANG=C n/a" "$(grep -n 'gen' $OUT/screen.txt | head -2 | tr '\n' ' ')"; fi
send "What does 'dog' mean?"
if wait_for 'tokens .* TTFT' 30 && grep -q 'gen [0-9.]* tok/s | prompt [0-9]* tok/s | TTFT [0-9.]* s' $OUT/screen.txt &&
   grep -q 'draft [0-9]*% kept, [0-9.]* tok/pass\|draft n/a' $OUT/screen.txt; then
    pass "80 columns: the speed row shows gen, prompt and TTFT whole, the draft figures in full"
else fail "speed row at 80 columns" "$(grep -n 'gen\|draft' $OUT/screen.txt | head -3 | tr '\n' ' ')"; fi
send "/quit"
