#!/bin/sh
# t_tui_everyday.sh - the full-screen chat's everyday commands, driven for
# real in a detached tmux pane (100x40, UTF-8): the header and /show say the
# weights are random, the header names their type; /show lists architecture,
# experts, type, dtype, context, size and plan; an answer with markdown (imported into the store, since a
# random model writes none) shows its code block between rules with the language
# label, its heading and **bold** with attributes and no markers, and /raw
# shows the source (the store keeps it raw); /copy puts the last answer on
# the clipboard through OSC 52 (tmux keeps it as a paste buffer); /rename;
# /set parameter temperature 0.7 and /set n=N (the next answer stops at N
# tokens); """ multi-line input. Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. tests/tmux.sh
K3=${K3:-./k3}
PY=/usr/bin/python3
OUT=tests/out/tui_everyday
rm -rf $OUT
mkdir -p $OUT/home
if ! command -v tmux >/dev/null 2>&1; then
    echo "FAIL tui everyday: tmux is not installed"
    exit 0
fi
M=$OUT/small
DB=$OUT/e.db
$K3 gen $M --preset small --seed 5 >/dev/null 2>&1
tmux_server k3tuie
SCREEN=$OUT/screen.txt
export XDG_DATA_HOME=$PWD/$OUT/home/data XDG_STATE_HOME=$PWD/$OUT/home/state HOME=$PWD/$OUT/home

# A stored conversation whose answer is markdown (exported, edited, imported).
printf '%b' '# Routing\n\nExperts are **chosen per token** by the router.\n\n```python\ndef route(x):\n    return top_k(router(x), 8)\n```\nDone.' > $OUT/md
store_answer $M $DB 5eed0001 $OUT/md

$TM new-session -d -s k3 -x 100 -y 40 \
    "env LANG=C.UTF-8 LC_ALL=C.UTF-8 HOME=$HOME XDG_DATA_HOME=$XDG_DATA_HOME XDG_STATE_HOME=$XDG_STATE_HOME PS1='K3SHELL\$ ' sh"
$TM set -g set-clipboard on
sleep 0.3
$TM send-keys -t k3 "$K3 chat $M --db $DB --resume 5eed0001" Enter
if ! wait_for 'Enter sends' 20; then
    fail "tui everyday starts" "$(cap | grep -v '^$' | tail -3 | tr '\n' ' ')"
    exit 0
fi

# 1. random weights in the header and a notice
if head -1 $OUT/screen.txt | grep -q 'small (random weights)' && grep -q 'random weights (k3 gen)' $OUT/screen.txt; then
    pass "header and a notice say the weights are random"
else fail "random weights shown" "header: $(head -1 $OUT/screen.txt)"; fi

# the weights' type beside the model's name, as ollama and llama.cpp name a file's
if head -1 $OUT/screen.txt | grep -q 'small (random weights) . BF16 . conv'; then
    pass "the header names the weights' type after the model (BF16)"
else fail "type in the header" "header: $(head -1 $OUT/screen.txt)"; fi

# 2. the markdown answer, rendered
cap -e > $OUT/md_attr.txt
cap > $OUT/md.txt
if grep -q '^── python ─*$' $OUT/md.txt && grep -q '^def route(x): *$' $OUT/md.txt \
    && grep -q '^    return top_k(router(x), 8) *$' $OUT/md.txt && grep -q '^─*$' $OUT/md.txt \
    && ! grep -q '```' $OUT/md.txt; then
    pass "a fenced code block is drawn between rules, the top one with its language label"
else fail "code block box" "$(grep -n 'python\|route\|```' $OUT/md.txt | head -5 | tr '\n' ' ')"; fi
# heading without its '#' (level 1: bold and underlined, SGR 4; tmux only
# sends attributes that change, and the user line above is already bold),
# bold (SGR 1) without the ** markers
if grep -q '^Routing *$' $OUT/md.txt && grep -q '^Experts are chosen per token by the router\.' $OUT/md.txt \
    && grep -q '1m[^*]*chosen per token' $OUT/md_attr.txt && grep -q '[[;]4m.*Routing' $OUT/md_attr.txt; then
    pass "heading and **bold** shown with attributes, markers hidden"
else fail "heading / bold" "$(grep -a 'Routing\|chosen' $OUT/md_attr.txt | cat -v | head -3 | tr '\n' ' ')"; fi
cp $OUT/md.txt $OUT/rendered_code_block.txt          # the capture quoted in the report

# 3. /raw shows the source; the store keeps it raw
send "/raw"
if wait_for 'answers shown as raw text' 5 && grep -q '^```python' $OUT/screen.txt && grep -q '^# Routing' $OUT/screen.txt \
    && grep -q '\*\*chosen per token\*\*' $OUT/screen.txt; then
    pass "/raw shows the markdown source"
else fail "/raw" "$(grep -n 'python\|Routing' $OUT/screen.txt | head -3 | tr '\n' ' ')"; fi
send "/raw"
wait_for 'answers rendered as markdown' 5 && grep -q '^── python' $OUT/screen.txt && pass "/raw again renders it" \
    || fail "/raw toggles back" "$(grep -n 'python' $OUT/screen.txt | head -2)"
$K3 history show 5eed0001 --db $DB > $OUT/stored.txt 2>&1
grep -q '^```python' $OUT/stored.txt && grep -q '\*\*chosen per token\*\*' $OUT/stored.txt \
    && pass "the store keeps the answer's raw text" || fail "stored text raw" "$(head -c 300 $OUT/stored.txt)"

# 4. /show
send "/show"
if wait_for 'plan  ' 5; then
    missing=""
    for s in "model         small" "weights       RANDOM" "architecture  kimi_linear: 8 layers" "experts       16 routed, top 4" \
             "type          BF16" "dtype         bfloat16" "context       4096 tokens" "file size     28.0 MB" "plan          fully resident"; do
        grep -q -- "$s" $OUT/screen.txt || missing="$missing '$s'"
    done
    [ -z "$missing" ] && pass "/show: model, random weights, architecture, experts, type, dtype, context, size, plan" \
        || fail "/show" "missing$missing"
else fail "/show" "no plan line"; fi

# 5. /copy: OSC 52 to the terminal; tmux (set-clipboard on) stores it as a buffer
$TM delete-buffer 2>/dev/null
send "/copy"
if wait_for 'copied the last answer' 5; then
    sleep 0.3
    $TM show-buffer > $OUT/clip.txt 2>&1
    $PY - $OUT/clip.txt $OUT/md.json <<'PY' && pass "/copy puts the last answer (raw) on the clipboard via OSC 52" || fail "/copy" "clipboard: $(head -c 200 $OUT/clip.txt)"
import json, sys
want = [m["content"] for m in json.load(open(sys.argv[2]))["messages"] if m["role"] == "assistant"][-1]
sys.exit(0 if open(sys.argv[1]).read() == want else 1)
PY
else fail "/copy" "no notice"; fi

# 6. /rename
send "/rename Routing notes"
wait_for 'renamed to "Routing notes"' 5 && $K3 history list --db $DB 2>/dev/null | grep -q '^5eed0001 .*Routing notes' \
    && pass "/rename TITLE is stored" || fail "/rename" "$($K3 history list --db $DB 2>&1 | head -3 | tr '\n' ' ')"

# 7. /set parameter (ollama spelling), /set n=N, /set alone
send "/set parameter temperature 0.7"
wait_for 'sampling: temp=0.7' 5 && head -1 $OUT/screen.txt | grep -q 'temp 0.7' && pass "/set parameter temperature 0.7" \
    || fail "/set parameter" "$(grep sampling $OUT/screen.txt | tail -1); $(head -1 $OUT/screen.txt)"
send "/set temp=0 n=3"
wait_for 'n=3$' 5 || true
send "/set"
wait_for 'n=3 (answer length)' 5 && pass "/set alone shows everything, n included" || fail "/set alone" "$(grep 'temp=' $OUT/screen.txt | tail -2 | tr '\n' ' ')"
send "count to ten please"
wait_for '3 tokens' 20
$K3 history export 5eed0001 --db $DB --format json > $OUT/after.json 2>&1
$PY -c "
import json,sys
m = json.load(open('$OUT/after.json'))['messages']
sys.exit(0 if m[-1]['role'] == 'assistant' and m[-1]['generated_tokens'] == 3 else 1)" \
    && pass "/set n=3: the next answer stops at 3 tokens" || fail "/set n=3" "$(tail -c 400 $OUT/after.json)"

# 8. """ multi-line input
send '"""first line'
send 'second line'
wait_for 'multi-line message' 5 || true
send 'third"""'
wait_for 'tokens' 20
sleep 1
$K3 history export 5eed0001 --db $DB --format json > $OUT/ml.json 2>&1
$PY -c "
import json,sys
m = [x['content'] for x in json.load(open('$OUT/ml.json'))['messages'] if x['role'] == 'user']
sys.exit(0 if m[-1] == 'first line\nsecond line\nthird' else 1)" \
    && pass "\"\"\" multi-line input sends one message with its newlines" \
    || fail "\"\"\" multi-line input" "$(grep -c . $OUT/ml.json) lines; last user: $($PY -c "import json; print([x['content'] for x in json.load(open('$OUT/ml.json'))['messages'] if x['role']=='user'][-1:])" 2>&1)"
$TM send-keys -t k3 C-d
wait_for 'K3SHELL' 10 || true
