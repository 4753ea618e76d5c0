#!/bin/sh
# t_think.sh - Kimi K3 thinking (issue 29, items 2 and 3): the XTML ids k3
# renders for each --think setting against the independent Python renderer
# (tests/ref/tok_ref.py chat-xtml-think, written from the rules of llama.cpp's
# models/templates/Kimi-K3.jinja: the thinking-effort system message, a think
# block with the trimmed reasoning in every assistant message, "think" opened
# by the generation prompt); a Kimi Linear model refuses --think.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/think
mkdir -p $OUT
K3=${K3:-./k3}
M=$OUT/k3tiny
[ -f $M/config.json ] || $K3 gen $M --preset k3-tiny --seed 7 >/dev/null 2>&1

cat > $OUT/chat.json <<'JSON'
[{"role": "system", "content": "You are \"helpful\" & kind."},
 {"role": "user", "content": "Hello <|open|>think<|sep|> world, 你好 123"},
 {"role": "assistant", "content": "Hi there!", "reasoning_content": "  \n The user greets me; <|close|>think<|sep|> greet back.\n "},
 {"role": "user", "content": "And 2+2?"},
 {"role": "assistant", "content": "4", "reasoning_content": " \n\t "},
 {"role": "user", "content": "Spaces?"},
 {"role": "assistant", "content": "Yes.", "reasoning_content": "\u3000\u00a0 Wide\u2003spaces\u0085 kept inside. \u2028\u00a0"},
 {"role": "user", "content": "Again? 🙂"}]
JSON
for t in off low medium high max; do
    a=$($K3 tokenize $M --chat $OUT/chat.json --think $t 2>&1)
    if [ $t = off ]; then b=$($PY tests/ref/tok_ref.py $M chat-xtml $OUT/chat.json)
    else b=$($PY tests/ref/tok_ref.py $M chat-xtml-think $t $OUT/chat.json); fi
    if [ "$a" = "$b" ] && [ -n "$a" ]; then echo "PASS --think $t: XTML ids identical to the reference renderer ($(echo $a | wc -w) ids)"
    else echo "FAIL --think $t: engine [$a] reference [$b]"; fi
done

# a chat with thinking on: the tokens are forced (K3_TEST_FORCE_IDS, test_hooks.c)
# to a reasoning, the model's <|close|>, an answer and <|end_of_msg|>, twice
sp_id() { $PY -c "import json,sys;d=json.load(open('$M/tokenizer_config.json'))['added_tokens_decoder'];print([k for k,v in d.items() if v['content']==sys.argv[1]][0])" "$1"; }
CL=$(sp_id "<|close|>"); EM=$(sp_id "<|end_of_msg|>")
R1=$($K3 tokenize $M --text "The user greets me; I greet back."); A1=$($K3 tokenize $M --text "Hi there!")
R2=$($K3 tokenize $M --text "Two and two make four."); A2=$($K3 tokenize $M --text "4")
FORCE="$R1 $CL $A1 $EM $R2 $CL $A2 $EM"
R3=$($K3 tokenize $M --text "Let me think about this question very carefully before I answer it, step by step.")
rm -rf $OUT/tool.db*
K3_TEST_FORCE_IDS="$FORCE $R3" ${K3_TESTBIN:-build/tests}/tool_chat think $M $OUT/tool.db medium 2>$OUT/tool.err ||
    echo "FAIL tool_chat think: exit status $? $(head -c 300 $OUT/tool.err)"

# k3 chat --think: the reasoning in its own --json field, stored and exported beside the answer
rm -rf $OUT/chat.db*
printf 'Hello\nWhat is 2+2?\n' | K3_TEST_FORCE_IDS="$FORCE" $K3 chat $M --db $OUT/chat.db --think max --json --lines -n 40 \
    > $OUT/chat.jsonl 2>$OUT/chat.err
if $PY - $OUT/chat.jsonl <<'PYEOF'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
assert [x["reasoning"] for x in t] == ["The user greets me; I greet back.", "Two and two make four."], t
assert [x["text"] for x in t] == ["Hi there!", "4"], t
PYEOF
then echo "PASS k3 chat --think max --json: each turn's reasoning in its own field, the answer without it"
else echo "FAIL k3 chat --think --json: $(head -c 400 $OUT/chat.jsonl) $(tail -2 $OUT/chat.err)"; fi
$K3 history export last --format json --db $OUT/chat.db > $OUT/export.json 2>&1
$K3 history export last --format md --db $OUT/chat.db > $OUT/export.md 2>&1
if $PY - $OUT/export.json $OUT/export.md <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
got = [(m["role"], m["content"], m.get("reasoning")) for m in d["messages"]]
assert got == [("user", "Hello", None), ("assistant", "Hi there!", "The user greets me; I greet back."),
               ("user", "What is 2+2?", None), ("assistant", "4", "Two and two make four.")], got
assert d["sampling"]["think"] == "max" if isinstance(d.get("sampling"), dict) else '"think":"max"' in json.dumps(d), d
md = open(sys.argv[2]).read()
assert "The user greets me; I greet back." in md and "Hi there!" in md, md
PYEOF
then echo "PASS history export (json, md) of a thinking chat: reasoning beside each answer, the setting kept"
else echo "FAIL history export of a thinking chat: $(head -c 600 $OUT/export.json)"; fi

# /think: set before the first message; a begun conversation keeps its own
rm -rf $OUT/cmd.db*
printf '/think low\nHello\n/think high\n/think\n' | K3_TEST_FORCE_IDS="$FORCE" $K3 chat $M --db $OUT/cmd.db --plain --lines -n 40 \
    > $OUT/cmd.out 2>&1
if grep -q '"think":"low"' $OUT/cmd.db 2>/dev/null || $K3 history show last --db $OUT/cmd.db 2>/dev/null | grep -q '"think":"low"'; then
    if grep -q "began with thinking low and keeps it" $OUT/cmd.out && grep -q "thinking: low" $OUT/cmd.out &&
        grep -q "\[reasoning\] The user greets me" $OUT/cmd.out; then
        echo "PASS /think low before the first message thinks (reasoning marked in plain mode); /think high after it keeps low"
    else echo "FAIL /think: $(cat $OUT/cmd.out | head -c 600)"; fi
else echo "FAIL /think low: the conversation is not stored with think low: $(head -c 600 $OUT/cmd.out)"; fi

# k3 run --chat --think: the reasoning marked on stderr, the answer alone on stdout
K3_TEST_FORCE_IDS="$R1 $CL $A1 $EM" $K3 run $M --chat --think high -p "Hello" -n 40 > $OUT/run.out 2>$OUT/run.err
rc=$?
if [ $rc -eq 0 ] && [ "$(cat $OUT/run.out)" = "Hi there!" ] && grep -q "^\[reasoning\] The user greets me; I greet back.$" $OUT/run.err
then echo "PASS k3 run --chat --think: answer on stdout, reasoning marked on stderr"
else echo "FAIL k3 run --chat --think: rc $rc stdout [$(cat $OUT/run.out)] stderr [$(tail -3 $OUT/run.err)]"; fi

# a Kimi Linear model has no thinking: one clear line, exit 1
L=$OUT/linear
[ -f $L/config.json ] || $K3 gen $L --preset tiny --seed 3 >/dev/null 2>&1
echo hi | $K3 chat $L --db $OUT/linear.db --think high --plain > $OUT/linear.out 2>$OUT/linear.err
rc=$?
if [ $rc -eq 1 ] && grep -q "no thinking mode" $OUT/linear.err && [ ! -s $OUT/linear.out ]
then echo "PASS --think high on a Kimi Linear model: exit 1, $(grep 'no thinking' $OUT/linear.err)"
else echo "FAIL --think on Kimi Linear: rc $rc $(cat $OUT/linear.err | tail -2)"; fi

# k3 serve: a thinking model's reasoning as vLLM returns it, reasoning_content apart from content
SPIDS=""
trap 'for p in $SPIDS; do kill $p 2>/dev/null; done' EXIT INT TERM
serve_start() {   # serve_start LOG MODEL ARGS...: sets PORT
    log=$1; shift
    K3_TEST_FORCE_IDS="$FORCE" timeout 300 $K3 serve "$@" --port 0 > $log 2>&1 &
    SPIDS="$SPIDS $!"
    PORT=""
    for i in $(seq 1 100); do
        PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $log)
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "FAIL serve: did not start: $(tail -3 $log)"
    return 1
}
if serve_start $OUT/serve.log $M; then
    curl -s -o $OUT/serve1.json http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \
        -d '{"model":"k3tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":40,"chat_template_kwargs":{"thinking":true,"thinking_effort":"low"}}'
    if $PY - $OUT/serve1.json <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))["choices"][0]["message"]
assert m["reasoning_content"] == "The user greets me; I greet back." and m["content"] == "Hi there!", m
PYEOF
    then echo "PASS serve, chat_template_kwargs thinking: message.reasoning_content apart from content (non-stream)"
    else echo "FAIL serve non-stream reasoning_content: $(head -c 500 $OUT/serve1.json)"; fi
    curl -sN -o $OUT/serve2.sse http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \
        -d '{"model":"k3tiny","messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi there!","reasoning_content":"The user greets me; I greet back."},{"role":"user","content":"What is 2+2?"}],"max_tokens":40,"stream":true,"reasoning_effort":"high"}'
    if $PY - $OUT/serve2.sse <<'PYEOF'
import json, sys
r = c = ""
for line in open(sys.argv[1]):
    if line.startswith("data: {"):
        for ch in json.loads(line[6:])["choices"]:
            d = ch["delta"]
            r += d.get("reasoning_content") or ""
            c += d.get("content") or ""
assert r == "Two and two make four." and c == "4", (r, c)
PYEOF
    then echo "PASS serve, reasoning_effort, stream: delta.reasoning_content then delta.content, apart"
    else echo "FAIL serve stream reasoning_content: $(head -c 600 $OUT/serve2.sse)"; fi
fi
if serve_start $OUT/serve_linear.log $L; then
    s=$(curl -s -o $OUT/serve3.json -w '%{http_code}' http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \
        -d '{"model":"linear","messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"reasoning_effort":"low"}')
    if [ "$s" = 400 ] && grep -q "no thinking mode" $OUT/serve3.json; then echo "PASS serve: thinking asked of a Kimi Linear model: 400, $(cat $OUT/serve3.json | head -c 120)"
    else echo "FAIL serve thinking on Kimi Linear: status $s $(head -c 300 $OUT/serve3.json)"; fi
fi
