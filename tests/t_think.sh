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
 {"role": "user", "content": "Again? 🙂"}]
JSON
for t in off low medium high max; do
    a=$($K3 tokenize $M --chat $OUT/chat.json --think $t 2>&1)
    if [ $t = off ]; then b=$($PY tests/ref/tok_ref.py $M chat-xtml $OUT/chat.json)
    else b=$($PY tests/ref/tok_ref.py $M chat-xtml-think $t $OUT/chat.json); fi
    if [ "$a" = "$b" ] && [ -n "$a" ]; then echo "PASS --think $t: XTML ids identical to the reference renderer ($(echo $a | wc -w) ids)"
    else echo "FAIL --think $t: engine [$a] reference [$b]"; fi
done
