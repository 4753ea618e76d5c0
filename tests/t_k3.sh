#!/bin/sh
# t_k3.sh - Kimi K3 end to end: the forward pass against the numpy reference
# (tests/ref/kimi_ref.py -> k3_ref.py) on `k3 gen --preset k3-tiny` and on
# two checkpoints written by the independent tests/ref/gen_ckpt.py --arch k3
# (other seeds, widths, AttnRes block sizes, A_log lengths, f32 trunk, no
# index file); max |d logit| / max |logit| <= 1e-4 at every position (fp32
# engine vs float64 reference on the same stored weights; observed ~1e-6);
# incremental == full; XTML chat ids equal to the Python reference; run and
# tokenize work on K3 checkpoints.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/k3
mkdir -p $OUT
K3=${K3:-./k3}
[ -f $OUT/k3tiny/config.json ] || $K3 gen $OUT/k3tiny --preset k3-tiny --shards 2 --seed 5 >/dev/null 2>&1
[ -f $OUT/py_a/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_a --arch k3 --seed 31 --shards 3 >/dev/null
[ -f $OUT/py_b/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_b --arch k3 --seed 32 --hidden 128 --layers 8 \
    --attn-res-block 3 --experts 16 --topk 4 --alog-len 16 --kda-heads 3 --mla-heads 3 --dtype f32 --no-index >/dev/null

# checked NAME command...: the command's PASS/FAIL lines, or one FAIL if it
# printed none (a crash or a missing file must not pass silently)
checked() {
    name=$1
    shift
    "$@" > $OUT/checked.out 2>&1
    grep '^\(PASS\|FAIL\) ' $OUT/checked.out || echo "FAIL $name: printed no result: $(head -c 200 $OUT/checked.out)"
}
vocab_of() { $PY -c "import json; c=json.load(open('$1/config.json')); print(c.get('text_config', c)['vocab_size'])"; }

for m in k3tiny py_a py_b; do
    dir=$OUT/$m
    V=$(vocab_of $dir)
    IDS=$($PY -c "import random; random.seed('$m'); print(' '.join(str(random.randrange(min($V, 300))) for _ in range(40)))")
    if ! $K3 eval $dir --ids "$IDS" --logits $OUT/$m.k3.f32 2>$OUT/$m.err; then
        echo "FAIL k3 forward $m: $(cat $OUT/$m.err)"
        continue
    fi
    $PY tests/ref/kimi_ref.py $dir --ids "$IDS" --out $OUT/$m.ref.f32 --greedy 10 > $OUT/$m.ref.greedy
    checked "k3 forward $m" $PY tests/ref/compare_logits.py "k3 forward $m vs numpy reference, 40 tokens" $OUT/$m.k3.f32 $OUT/$m.ref.f32 40
    ${K3_TESTBIN:-build/tests}/tool_engine greedy $dir "$IDS" 10 > $OUT/$m.k3.greedy
    if cmp -s $OUT/$m.k3.greedy $OUT/$m.ref.greedy; then echo "PASS k3 greedy continuation $m identical"
    else echo "FAIL k3 greedy continuation $m: engine [$(cat $OUT/$m.k3.greedy)] reference [$(cat $OUT/$m.ref.greedy)]"; fi
    checked "k3 $m split" ${K3_TESTBIN:-build/tests}/tool_engine split $dir "$IDS" 6 | sed "s/^\(PASS\|FAIL\) /\1 k3 $m: /"
done

# --activations q8 (int8 activations for the MXFP4 experts): its own
# contract makes the logits the same bytes at 1 and 2 threads and whether
# the prompt runs in one chunk or token by token (--chunk-tokens 1: the
# decode path); it is applied (not the f32 bytes) and stays close to f32.
dir=$OUT/k3tiny
IDS=$($PY -c "import random; random.seed('q8'); print(' '.join(str(random.randrange(300)) for _ in range(40)))")
$K3 eval $dir --ids "$IDS" --logits $OUT/q8_t2.f32 --activations q8 --threads 2 2>/dev/null &&
$K3 eval $dir --ids "$IDS" --logits $OUT/q8_t1.f32 --activations q8 --threads 1 2>/dev/null &&
$K3 eval $dir --ids "$IDS" --logits $OUT/q8_c1.f32 --activations q8 --chunk-tokens 1 2>/dev/null &&
$K3 eval $dir --ids "$IDS" --logits $OUT/f32.f32 2>/dev/null &&
$K3 eval $dir --ids "$IDS" --save-base $OUT/f32.k3kl 2>/dev/null || echo "FAIL k3 eval --activations q8: the runs failed"
if cmp -s $OUT/q8_t2.f32 $OUT/q8_t1.f32 && cmp -s $OUT/q8_t2.f32 $OUT/q8_c1.f32; then
    echo "PASS k3 --activations q8: the same logits bytes at 1 and 2 threads, in one chunk and token by token"
else echo "FAIL k3 --activations q8: logits differ across threads or chunking"; fi
kl=$($K3 eval $dir --kl-base $OUT/f32.k3kl --activations q8 --json 2>/dev/null)
mean=$(echo "$kl" | $PY -c "import json, sys; print(json.load(sys.stdin)['kld_mean'])" 2>/dev/null)
if ! cmp -s $OUT/f32.f32 $OUT/q8_t2.f32 && $PY -c "import sys; sys.exit(not 0 < float('$mean') < 0.05)" 2>/dev/null; then
    echo "PASS k3 --activations q8 applied, close to f32 (k3 eval --kl-base): mean KLD $mean nats"
else echo "FAIL k3 --activations q8 against f32 (want 0 < mean KL < 0.05): $kl"; fi

# XTML chat rendering against the Python reference, and the tokenizer
cat > $OUT/chat.json <<'JSON'
[{"role": "system", "content": "You are \"helpful\" & kind."},
 {"role": "user", "content": "Hello <|open|>message<|sep|> world, 你好 123"},
 {"role": "assistant", "content": "Hi there!"},
 {"role": "user", "content": "Again? 🙂"}]
JSON
a=$($K3 tokenize $OUT/k3tiny --chat $OUT/chat.json 2>&1)
b=$($PY tests/ref/tok_ref.py $OUT/k3tiny chat-xtml $OUT/chat.json)
if [ "$a" = "$b" ] && [ -n "$a" ]; then echo "PASS XTML chat ids identical to the reference ($(echo $a | wc -w) ids)"
else echo "FAIL XTML chat ids: engine [$a] reference [$b]"; fi
# special tokens typed by a user stay text
OPEN_ID=$($PY -c "import json;d=json.load(open('$OUT/k3tiny/tokenizer_config.json'))['added_tokens_decoder'];print([k for k,v in d.items() if v['content']=='<|open|>'][0])")
n_open=$(echo "$a" | tr ' ' '\n' | grep -cx "$OPEN_ID")
[ "$n_open" -eq 7 ] && echo "PASS user text <|open|> is not a framing token (7 opens: 4 messages, 1 response, 2 in the prompt)" ||
    echo "FAIL user text <|open|>: expected 7 <|open|> ids ($OPEN_ID), got $n_open"
if $K3 run $OUT/k3tiny -p "Hello" -n 8 --chat > $OUT/run.out 2>$OUT/run.err; then echo "PASS k3 run --chat on a K3 checkpoint: $(tail -1 $OUT/run.err)"
else echo "FAIL k3 run on K3: $(cat $OUT/run.err)"; fi
