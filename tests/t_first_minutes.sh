#!/bin/sh
# t_first_minutes.sh - what a new user and a script meet first (issue 30):
#  - piped `k3 chat`: only known commands are commands ("/usr/bin is ..."
#    is a message); a message not answered (invalid UTF-8, over the
#    context), a command that failed or an empty input exit 3, not 0;
#  - `k3 run` reads a piped stdin as the prompt, after -p TEXT when both
#    are given (cat f | llm "summarise"), and `--prompt-file -`;
#  - `k3 gen` refuses a non-empty directory without --force, and a model it
#    did not write even with it;
#  - models by name from any directory: $K3_MODELS, the data folder, the
#    installed share folder (make install puts k3-mini there);
#  - the README's "What does 'harbour' mean?" ends before the limit (the
#    loop rule of chat/generate.h);
#  - the smaller items: no progress bar drawn on a non-terminal, a
#    duplicate import said, `k3 chat /tmp` names a non-model directory,
#    ollama's spellings answered with k3's equivalent.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
PY=/usr/bin/python3
OUT=tests/out/first_minutes
rm -rf $OUT
mkdir -p $OUT/home
K3=${K3:-./k3}
case $K3 in /*) ;; *) K3=$PWD/$K3 ;; esac      # the checks run it from other directories too
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
unset K3_MODEL K3_MODELS
MINI=$PWD/models/k3-mini
sql() { $PY -c "import sqlite3,sys; [print('|'.join(str(c) for c in r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]" "$1" "$2"; }

# --- 2. piped k3 chat: honest exit codes; only known commands are commands
LINE="/usr/bin is a directory. Explain."
printf '%s\n' "$LINE" | $K3 chat $MINI --db $OUT/c1.db -n 4 > /dev/null 2> $OUT/c1.err; RC=$?
if [ $RC = 0 ] && ! grep -q 'unknown command' $OUT/c1.err &&
   [ "$(sql $OUT/c1.db "SELECT content FROM messages WHERE role = 'user'")" = "$LINE" ]; then
    pass "piped '$LINE' is a message, not a command (exit 0)"
else fail "piped /usr/bin line" "exit $RC: $(tail -2 $OUT/c1.err)"; fi
printf '/history\n' | $K3 chat $MINI --db $OUT/c1.db -n 4 > /dev/null 2> $OUT/c2.err; RC=$?
if [ $RC = 0 ] && grep -q 'Explain' $OUT/c2.err; then pass "piped /history is still a command (exit 0)"
else fail "piped /history" "exit $RC: $(tail -2 $OUT/c2.err)"; fi
printf 'caf\351 au lait\n' | $K3 chat $MINI --db $OUT/c3.db -n 4 > /dev/null 2> $OUT/c3.err; RC=$?
if [ $RC = 3 ] && grep -q 'UTF-8' $OUT/c3.err; then pass "piped invalid UTF-8: not answered, exit 3"
else fail "piped invalid UTF-8" "exit $RC: $(tail -2 $OUT/c3.err)"; fi
$PY -c "print('word ' * 400)" | $K3 chat $MINI --db $OUT/c4.db --ctx 128 -n 4 > /dev/null 2> $OUT/c4.err; RC=$?
if [ $RC = 3 ] && grep -q 'not sent' $OUT/c4.err; then pass "piped prompt over the context: not answered, exit 3"
else fail "piped prompt over the context" "exit $RC: $(tail -2 $OUT/c4.err)"; fi
printf '' | $K3 chat $MINI --db $OUT/c5.db -n 4 > /dev/null 2> $OUT/c5.err; RC=$?
if [ $RC = 3 ] && grep -q 'no message sent' $OUT/c5.err; then pass "empty piped input: nothing answered, exit 3"
else fail "empty piped input" "exit $RC: $(tail -2 $OUT/c5.err)"; fi
printf 'hello\n/resume nosuchid\n' | $K3 chat $MINI --db $OUT/c6.db --lines -n 4 > /dev/null 2> $OUT/c6.err; RC=$?
if [ $RC = 3 ]; then pass "--lines: a failed command (/resume nosuchid) after an answer: exit 3"
else fail "--lines failed command" "exit $RC: $(tail -2 $OUT/c6.err)"; fi

# --- 3. k3 run reads a piped stdin; -p TEXT goes first
printf 'The harbour is calm.\n' | $K3 run $MINI -n 6 > $OUT/r1.out 2> $OUT/r1.err; RC=$?
$K3 run $MINI -p 'The harbour is calm.' -n 6 > $OUT/r1p.out 2> $OUT/r1p.err
if [ $RC = 0 ] && cmp -s $OUT/r1.out $OUT/r1p.out && [ -s $OUT/r1.out ]; then
    pass "echo TEXT | k3 run M answers as k3 run M -p TEXT"
else fail "echo TEXT | k3 run" "exit $RC: $(tail -1 $OUT/r1.err)"; fi
printf 'The harbour is calm.\n' | $K3 run $MINI -p 'Summarise:' -n 6 > $OUT/r2.out 2> $OUT/r2.err; RC=$?
$K3 run $MINI -p 'Summarise:

The harbour is calm.' -n 6 > $OUT/r2p.out 2> $OUT/r2p.err
P2=$(sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p' $OUT/r2.err); P2P=$(sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p' $OUT/r2p.err)
if [ $RC = 0 ] && cmp -s $OUT/r2.out $OUT/r2p.out && [ -n "$P2" ] && [ "$P2" = "$P2P" ]; then
    pass "cat f | k3 run -p INSTRUCTION: the instruction, a blank line, the piped text ($P2 tokens)"
else fail "stdin after -p" "exit $RC, prompt $P2 vs $P2P tokens: $(tail -1 $OUT/r2.err)"; fi
printf 'The harbour is calm.\n' | $K3 run $MINI --prompt-file - -n 6 > $OUT/r3.out 2> $OUT/r3.err; RC=$?
if [ $RC = 0 ] && cmp -s $OUT/r3.out $OUT/r1p.out; then pass "k3 run --prompt-file - reads stdin"
else fail "--prompt-file -" "exit $RC: $(tail -1 $OUT/r3.err)"; fi
$K3 run $MINI -n 6 < /dev/null > /dev/null 2> $OUT/r4.err; RC=$?
if [ $RC = 2 ] && grep -q 'no prompt' $OUT/r4.err; then pass "k3 run without a prompt or piped text: usage error, exit 2"
else fail "k3 run no prompt" "exit $RC: $(cat $OUT/r4.err)"; fi

# --- 1. k3 gen never overwrites a model it did not write
cp -r $MINI $OUT/copy
$K3 gen $OUT/copy --preset k3-tiny > /dev/null 2> $OUT/g1.err; RC=$?
if [ $RC = 1 ] && grep -q 'not empty' $OUT/g1.err && cmp -s $MINI/config.json $OUT/copy/config.json &&
   cmp -s $MINI/tiktoken.model $OUT/copy/tiktoken.model; then
    pass "k3 gen into a copy of k3-mini: refused (exit 1), config.json and tokenizer untouched"
else fail "k3 gen over a model" "exit $RC: $(cat $OUT/g1.err)"; fi
$K3 gen $OUT/copy --preset k3-tiny --force > /dev/null 2> $OUT/g2.err; RC=$?
if [ $RC = 1 ] && grep -q 'did not write' $OUT/g2.err && cmp -s $MINI/config.json $OUT/copy/config.json; then
    pass "k3 gen --force over a model k3 gen did not write: still refused"
else fail "k3 gen --force over a real model" "exit $RC: $(cat $OUT/g2.err)"; fi
$K3 gen $OUT/tiny --preset tiny --seed 1 > /dev/null 2>&1
$K3 gen $OUT/tiny --preset tiny --seed 2 --force > /dev/null 2> $OUT/g3.err; RC=$?
if [ $RC = 0 ] && printf 'hi\n' | $K3 run $OUT/tiny -n 2 > /dev/null 2>&1; then
    pass "k3 gen --force replaces a model k3 gen wrote"
else fail "k3 gen --force over its own model" "exit $RC: $(cat $OUT/g3.err)"; fi

# --- 4. from any directory: the installed demo model, models by name
rm -rf $OUT/stage
make --no-print-directory install PREFIX=/opt/k3fm DESTDIR=$PWD/$OUT/stage > $OUT/inst.out 2>&1
IK3=$PWD/$OUT/stage/opt/k3fm/bin/k3
mkdir -p $OUT/elsewhere $OUT/zoo $OUT/xdg/k3/models
$K3 gen $OUT/zoo/tiny-zoo --preset tiny --seed 3 > /dev/null 2>&1
$K3 gen $OUT/xdg/k3/models/tiny-data --preset tiny --seed 4 > /dev/null 2>&1
(cd $OUT/elsewhere && printf 'hi\n' | $IK3 chat --db ../fm.db -n 3 > ../i1.out 2> ../i1.err); RC=$?
if [ $RC = 0 ] && [ -f $OUT/stage/opt/k3fm/share/k3/models/k3-mini/config.json ] &&
   grep -q 'share/k3/models/k3-mini' $OUT/i1.err; then
    pass "make install puts k3-mini in PREFIX/share/k3/models; k3 chat with no model finds it from another directory"
else fail "installed default model" "exit $RC: $(tail -2 $OUT/i1.err)"; fi
(cd $OUT/elsewhere && printf 'hi\n' | $IK3 chat k3-mini --db ../fm.db -n 3 > /dev/null 2> ../i2.err); RC=$?
if [ $RC = 0 ]; then pass "k3 chat k3-mini: a model named by its name, from another directory"
else fail "k3 chat k3-mini by name" "exit $RC: $(tail -2 $OUT/i2.err)"; fi
(cd $OUT/elsewhere && K3_MODELS=$PWD/../zoo $K3 run tiny-zoo -p hi -n 2 > /dev/null 2> ../i3.err); RC=$?
if [ $RC = 0 ]; then pass "k3 run NAME finds NAME in \$K3_MODELS"
else fail "\$K3_MODELS lookup" "exit $RC: $(tail -2 $OUT/i3.err)"; fi
(cd $OUT/elsewhere && $K3 run tiny-data -p hi -n 2 > /dev/null 2> ../i4.err); RC=$?
if [ $RC = 0 ]; then pass "k3 run NAME finds NAME in the data folder (\$XDG_DATA_HOME/k3/models)"
else fail "data folder lookup" "exit $RC: $(tail -2 $OUT/i4.err)"; fi
(cd $OUT/elsewhere && $K3 run no-such-model -p hi -n 2 > /dev/null 2> ../i5.err); RC=$?
if [ $RC = 1 ] && grep -q 'no-such-model: no such model (looked for' $OUT/i5.err && [ "$(wc -l < $OUT/i5.err)" = 1 ]; then
    pass "an unknown model name: one line naming where it looked, exit 1"
else fail "unknown model name" "exit $RC: $(cat $OUT/i5.err)"; fi

# --- 9. smaller items
$K3 chat /tmp < /dev/null > /dev/null 2> $OUT/s1.err; RC=$?
if [ $RC = 1 ] && grep -q '^k3: /tmp is not a model directory' $OUT/s1.err; then
    pass "k3 chat /tmp: '/tmp is not a model directory', exit 1"
else fail "k3 chat /tmp" "exit $RC: $(cat $OUT/s1.err)"; fi

# --- 5. the README's example ends: the loop rule (chat/generate.h)
(cd $OUT/elsewhere && echo "What does 'harbour' mean?" | $IK3 chat --db ../h.db > ../h.out 2> ../h.err); RC=$?
G=$(sed -n 's/.*turn 1: .* \([0-9]*\) tokens at.*/\1/p' $OUT/h.err)
if [ $RC = 0 ] && [ -n "$G" ] && [ "$G" -lt 512 ] && grep -q "The word 'harbour' means" $OUT/h.out &&
   ! grep -q 'length limit' $OUT/h.err; then
    pass "echo \"What does 'harbour' mean?\" | k3 chat (installed, from elsewhere): the answer ends after $G tokens, under the 512 limit"
else fail "harbour answer" "exit $RC, $G tokens: $(tail -2 $OUT/h.err)"; fi
printf 'hello there\n' | $K3 chat $MINI --db $OUT/p.db -n 8 > /dev/null 2>&1
rm -rf $OUT/p.db.snapshots                      # no snapshot: the resume re-prefills
printf 'again\n' | $K3 chat $MINI --db $OUT/p.db --resume last -n 4 > /dev/null 2> $OUT/p.err
if grep -q '^k3: prefilled the conversation: [0-9]* tokens$' $OUT/p.err && ! grep -q "$(printf '\r')" $OUT/p.err; then
    pass "re-prefill progress to a log: one line, no carriage-return redraws"
else fail "progress to a log" "$(tr '\r' '~' < $OUT/p.err | head -3)"; fi
$K3 history export last --format json -o $OUT/p.json --db $OUT/p.db 2> /dev/null
$K3 history import $OUT/p.json --db $OUT/imp.db > /dev/null 2>&1
$K3 history import $OUT/p.json --db $OUT/imp.db > $OUT/imp2.out 2>&1; RC=$?
if [ $RC = 0 ] && grep -q 'already stored' $OUT/imp2.out && [ "$(sql $OUT/imp.db 'SELECT count(*) FROM conversations')" = 1 ]; then
    pass "importing the same export twice: 'already stored', no duplicate"
else fail "import twice" "exit $RC: $(cat $OUT/imp2.out); $(sql $OUT/imp.db 'SELECT count(*) FROM conversations') conversations"; fi
printf '/set system You are terse.\n/set\n/set verbose\n/clear\n' | $K3 chat $MINI --db $OUT/o.db --lines -n 3 > /dev/null 2> $OUT/o1.err; RC=$?
if [ $RC = 0 ] && grep -q 'system prompt: You are terse\.' $OUT/o1.err && grep -q '/set verbose: .*/stats' $OUT/o1.err &&
   grep -q "/new starts an empty one, as ollama's /clear" $OUT/o1.err; then
    pass "ollama's /set system sets the system prompt; /set verbose and /clear name k3's equivalents"
else fail "ollama /set system, /set verbose, /clear" "exit $RC: $(cat $OUT/o1.err)"; fi
printf '/save mine\n/load other\n' | $K3 chat $MINI --db $OUT/o.db --lines -n 3 > /dev/null 2> $OUT/o2.err; RC=$?
if [ $RC = 3 ] && grep -q '/save is ollama.s: .*/export' $OUT/o2.err && grep -q '/load is ollama.s: .*k3 chat MODEL' $OUT/o2.err; then
    pass "ollama's /save and /load: one line naming k3's equivalent each, exit 3 (nothing saved or loaded)"
else fail "ollama /save /load" "exit $RC: $(cat $OUT/o2.err)"; fi
