#!/bin/sh
# t_kl.sh - `k3 eval --save-base` / `--kl-base`, the KL divergence mode (as
# llama-perplexity --kl-divergence measures a quantized model): a model
# against its own base gives exactly 0 and the same perplexities; the trained
# demo model with --activations q8 against its exact base gives a small
# positive divergence; every figure equals an independent numpy computation
# (tests/ref/kl_ref.py) from the saved logits to 1e-9 relative; --text-file
# takes the ids k3 tokenize gives; broken base files and command lines are
# refused with one line.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
PY=/usr/bin/python3
OUT=tests/out/kl
mkdir -p $OUT
K3=${K3:-./k3}
MINI=models/k3-mini

# A text of a few hundred tokens (the demo model's kind of English).
cat > $OUT/text.txt <<'TEXT'
What does 'harbour' mean?
The word 'harbour' means a sheltered port where ships can take on or discharge cargo.
Repeat after me: the quick brown fox jumps over the lazy dog, and then it runs into the woods.
The quick brown fox jumps over the lazy dog, and then it runs into the woods.
What does 'lantern' mean?
The word 'lantern' means light in a transparent protective case. For example: "he carried a lantern".
A fool and his money are soon parted; a wise man keeps his counsel and his coins.
TEXT

$K3 eval $MINI --text-file $OUT/text.txt --save-base $OUT/base.k3kl 2>$OUT/save.err ||
    fail "kl: --save-base" "$(cat $OUT/save.err)"
ids=$($PY tests/ref/kl_ref.py $OUT/base.k3kl --ids)
tok=$($K3 tokenize $MINI --text-file $OUT/text.txt 2>&1)
if [ -n "$ids" ] && [ "$ids" = "$tok" ]; then pass "kl: the base holds the ids k3 tokenize --text-file gives ($(echo $ids | wc -w))"
else fail "kl: base ids" "base [$ids] tokenize [$tok]"; fi

# The model against its own base: exactly 0, 100% top-1, equal perplexities.
$K3 eval $MINI --kl-base $OUT/base.k3kl --json > $OUT/self.json 2>$OUT/self.err
if $PY - $OUT/self.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ok = (r["kld_mean"] == 0 and r["kld_max"] == 0 and r["kld_min"] == 0 and r["same_top"] == 1
      and r["ppl"] == r["ppl_base"] and r["ln_ppl_ratio"] == 0 and r["same_model_files"] and r["tokens_scored"] > 50)
sys.exit(not ok)
PY
then pass "kl: a model against its own base: KLD 0, same top-1 100%, PPL equal ($(cut -c1-80 $OUT/self.json))"
else fail "kl: a model against its own base" "$(cat $OUT/self.json $OUT/self.err)"; fi

# --activations q8 against the exact base: small and positive, and every
# figure as numpy computes it from the q8 run's own --logits.
$K3 eval $MINI --kl-base $OUT/base.k3kl --activations q8 --json > $OUT/q8.json 2>$OUT/q8.err
$K3 eval $MINI --ids "$ids" --logits $OUT/q8.f32 --activations q8 2>/dev/null
if $PY - $OUT/q8.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(not (0 < r["kld_mean"] < 1e-3 and r["kld_min"] >= 0 and r["kld_max"] < 0.5 and r["same_top"] > 0.9
              and r["ppl"] != r["ppl_base"]))
PY
then pass "kl: k3-mini --activations q8 against its exact base: $(cut -c1-160 $OUT/q8.json)"
else fail "kl: q8 against exact (want 0 < mean KLD < 1e-3, top-1 > 90%)" "$(cat $OUT/q8.json $OUT/q8.err)"; fi
$PY tests/ref/kl_ref.py $OUT/base.k3kl $OUT/q8.f32 > $OUT/q8_ref.json 2>&1
if worst=$($PY - $OUT/q8.json $OUT/q8_ref.json <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-300) for k in b if k != "vocab")
print("%.2e" % worst)
sys.exit(not (worst <= 1e-9 and len(b) == 18 and a["tokens_scored"] == b["tokens_scored"]))
PY
); then pass "kl: every figure equals numpy's (tests/ref/kl_ref.py) to $worst relative"
else fail "kl: figures against numpy" "worst $worst; k3 $(cat $OUT/q8.json) numpy $(cat $OUT/q8_ref.json)"; fi

# The text report names the figures.
$K3 eval $MINI --kl-base $OUT/base.k3kl --activations q8 > $OUT/q8.txt 2>/dev/null
if grep -q '^mean KLD' $OUT/q8.txt && grep -q '^99% KLD' $OUT/q8.txt && grep -q '^same top-1 ' $OUT/q8.txt &&
    grep -q '^PPL(base) ' $OUT/q8.txt && grep -q '^ln(PPL ratio) ' $OUT/q8.txt &&
    grep -q '^base written by   k3-mini BF16 + MXFP4 experts k3-engine-[0-9a-f]* (model [0-9a-f]*), the same model files$' $OUT/q8.txt; then
    pass "kl: the report prints the base's model and type, PPL(base), ln(PPL ratio), mean and 99% KLD, same top-1"
else fail "kl: the report" "$(cat $OUT/q8.txt)"; fi

# Broken base files: one line naming the file, exit 1.
expect_one() {
    name=$1 want=$2 text=$3
    shift 3
    "$@" >$OUT/stdout 2>$OUT/stderr
    code=$?
    if [ $code -eq $want ] && [ "$(wc -l < $OUT/stderr)" -eq 1 ] && grep -q -- "$text" $OUT/stderr; then
        pass "kl: $name: $(cat $OUT/stderr)"
    else fail "kl: $name (want exit $want and one line with '$text')" "exit $code: $(head -c 300 $OUT/stderr)"; fi
}
$PY - $OUT/base.k3kl $OUT <<'PY'
import struct, sys
data, out = bytearray(open(sys.argv[1], "rb").read()), sys.argv[2]
open(out + "/magic.k3kl", "wb").write(b"NOTABASE" + data[8:])
open(out + "/short.k3kl", "wb").write(data[:-1000])
v = bytearray(data); struct.pack_into("<I", v, 8, 2); open(out + "/version.k3kl", "wb").write(v)
i = bytearray(data); struct.pack_into("<i", i, 152 + 4 * 3, 1 << 20); open(out + "/id.k3kl", "wb").write(i)
c = bytearray(data); c[len(c) // 2] ^= 1; open(out + "/flipped.k3kl", "wb").write(c)
PY
expect_one "wrong magic" 1 "magic.k3kl: not a k3 KL base" $K3 eval $MINI --kl-base $OUT/magic.k3kl
expect_one "truncated" 1 "short.k3kl: truncated" $K3 eval $MINI --kl-base $OUT/short.k3kl
expect_one "another version" 1 "version.k3kl: KL base version 2" $K3 eval $MINI --kl-base $OUT/version.k3kl
expect_one "id out of range" 1 "id.k3kl: id 1048576 at position 3" $K3 eval $MINI --kl-base $OUT/id.k3kl
expect_one "a changed byte" 1 "flipped.k3kl: checksum mismatch" $K3 eval $MINI --kl-base $OUT/flipped.k3kl
[ -f $OUT/tiny/config.json ] || $K3 gen $OUT/tiny --preset tiny --seed 3 >/dev/null 2>&1
expect_one "another vocabulary" 1 "base.k3kl: made with a vocabulary of 2048" $K3 eval $OUT/tiny --kl-base $OUT/base.k3kl
expect_one "a missing base" 1 "nothing.k3kl" $K3 eval $MINI --kl-base $OUT/nothing.k3kl
expect_one "one id is too few for a base" 1 "at least 2 ids" $K3 eval $MINI --ids "5" --save-base $OUT/one.k3kl
: > $OUT/empty.txt
expect_one "an empty --text-file" 1 "empty.txt: no text to evaluate" $K3 eval $MINI --text-file $OUT/empty.txt --save-base $OUT/e.k3kl
expect_one "--kl-base with --ids" 2 "ids from the base" $K3 eval $MINI --kl-base $OUT/base.k3kl --ids "1 2"
expect_one "two outputs" 2 "only one of" $K3 eval $MINI --ids "1 2" --logits $OUT/x.f32 --save-base $OUT/x.k3kl
