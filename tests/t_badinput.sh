#!/bin/sh
# t_badinput.sh - broken checkpoints and inputs give one clear line naming the
# file and the problem, exit code 1 (2 for usage), and never a crash.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
OUT=tests/out/bad
mkdir -p $OUT
K3=${K3:-./k3}
GOOD=$OUT/good
[ -f $GOOD/config.json ] || $K3 gen $GOOD --preset tiny --seed 2 >/dev/null 2>&1

# expect NAME WANT_CODE WANT_TEXT -- command...
expect() {
    name=$1 want=$2 text=$3
    shift 4
    "$@" >$OUT/stdout 2>$OUT/stderr
    code=$?
    lines=$(wc -l < $OUT/stderr)
    if [ $code -ne $want ]; then
        echo "FAIL $name: exit code $code, want $want: $(head -c 300 $OUT/stderr)"
    elif [ "$lines" -ne 1 ]; then
        echo "FAIL $name: want exactly one line on stderr, got $lines: $(head -c 300 $OUT/stderr)"
    elif ! grep -q -- "$text" $OUT/stderr; then
        echo "FAIL $name: message lacks '$text': $(cat $OUT/stderr)"
    else
        echo "PASS $name: $(cat $OUT/stderr)"
    fi
}

for mode in truncated header_past_end overlap out_of_range wrong_dtype wrong_shape missing_tensor bad_header_json; do
    $PY tests/ref/corrupt_ckpt.py $GOOD $OUT/$mode $mode
    want=model.safetensors
    [ $mode = missing_tensor ] && want="not found in any shard"
    expect "bad checkpoint: $mode" 1 "$want" -- $K3 eval $OUT/$mode --ids "1 2 3" --logits $OUT/x.f32
done
for mode in config_missing_field config_bad_json config_wrong_type config_bad_layers; do
    $PY tests/ref/corrupt_ckpt.py $GOOD $OUT/$mode $mode
    expect "bad config: $mode" 1 "config.json" -- $K3 eval $OUT/$mode --ids "1 2 3" --logits $OUT/x.f32
done
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/no_tokenizer no_tokenizer
expect "missing tokenizer file" 1 "tiktoken.model" -- $K3 run $OUT/no_tokenizer -p "hello" -n 2
expect "eval needs no tokenizer" 0 "wrote" -- $K3 eval $OUT/no_tokenizer --ids "1 2 3" --logits $OUT/x.f32
expect "missing model directory" 1 "no-such-model" -- $K3 eval $OUT/no-such-model --ids "1" --logits $OUT/x.f32
expect "id outside the vocabulary" 1 "outside the vocabulary" -- $K3 eval $GOOD --ids "1 99999" --logits $OUT/x.f32
expect "malformed ids" 2 "--ids" -- $K3 eval $GOOD --ids "1 two 3" --logits $OUT/x.f32
expect "unknown option" 2 "unknown option" -- $K3 eval $GOOD --bogus
printf 'caf\351 \377\376' > $OUT/bad_utf8.txt
expect "non-UTF-8 prompt" 1 "UTF-8" -- $K3 run $GOOD --prompt-file $OUT/bad_utf8.txt -n 2
expect "prompt longer than the context" 1 "context" -- $K3 run $GOOD -p "$(yes hello | head -200 | tr '\n' ' ')" -n 4 --ctx 64
expect "unknown command" 2 "unknown command" -- $K3 frobnicate
