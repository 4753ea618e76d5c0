#!/bin/sh
# t_forward.sh - the forward pass against the numpy reference (tests/ref/kimi_ref.py).
#
# Models: `k3 gen` presets tiny and small in bf16 and f32, one and several
# shards, and checkpoints written by the independent tests/ref/gen_ckpt.py
# (f16, mixed dtypes, fp8 with block scales, no index file, tied embeddings,
# 2-D conv weights). For each: teacher-forced logits on a 40-token sequence
# (crosses the 32-token prompt chunk) within 1e-4 of the reference
# (max |d logit| / max |logit| per position; the engine computes in fp32,
# the reference in float64 on the same stored weights: observed ~1e-6),
# the greedy continuation identical, and prefill(T) bit-identical to
# prefill(T-k) + k single steps.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
# K3, TOOL and FORWARD_OUT may name another build's binaries (tests/arch_check.sh).
OUT=${FORWARD_OUT:-tests/out/forward}
mkdir -p $OUT
K3=${K3:-./k3}
TOOL=${TOOL:-${K3_TESTBIN:-build/tests}/tool_engine}
# FORWARD_MODELS narrows the run (make check: one preset and one python
# checkpoint); the default is every model below.
ALL="tiny_bf16_1 tiny_f32_3 small_bf16_1 small_f32_4 py_mixed py_f16_noindex py_fp8 py_tie_conv2d py_wide"
MODELS=${FORWARD_MODELS:-$ALL}
want() { case " $MODELS " in *" $1 "*) return 0 ;; esac; return 1; }

gen_models() {
    want tiny_bf16_1 && { [ -f $OUT/tiny_bf16_1/config.json ] || $K3 gen $OUT/tiny_bf16_1 --preset tiny --seed 3 >/dev/null 2>&1; }
    want tiny_f32_3 && { [ -f $OUT/tiny_f32_3/config.json ] || $K3 gen $OUT/tiny_f32_3 --preset tiny --dtype f32 --shards 3 --seed 4 >/dev/null 2>&1; }
    want small_bf16_1 && { [ -f $OUT/small_bf16_1/config.json ] || $K3 gen $OUT/small_bf16_1 --preset small --seed 5 >/dev/null 2>&1; }
    want small_f32_4 && { [ -f $OUT/small_f32_4/config.json ] || $K3 gen $OUT/small_f32_4 --preset small --dtype f32 --shards 4 --seed 6 >/dev/null 2>&1; }
    want py_mixed && { [ -f $OUT/py_mixed/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_mixed --dtype mixed --shards 3 --seed 11 >/dev/null; }
    want py_f16_noindex && { [ -f $OUT/py_f16_noindex/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_f16_noindex --dtype f16 --shards 2 --no-index --seed 12 >/dev/null; }
    want py_fp8 && { [ -f $OUT/py_fp8/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_fp8 --dtype fp8 --shards 2 --seed 13 --hidden 160 --moe-inter 136 >/dev/null; }
    want py_tie_conv2d && { [ -f $OUT/py_tie_conv2d/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_tie_conv2d --dtype bf16 --tie --conv-2d --layers 5 --seed 14 >/dev/null; }
    want py_wide && { [ -f $OUT/py_wide/config.json ] || $PY tests/ref/gen_ckpt.py $OUT/py_wide --dtype bf16 --hidden 200 --kda-heads 3 --kda-head-dim 24 --mla-heads 3 --kv-lora 40 --nope 12 --rope 6 --v-dim 20 --experts 12 --topk 3 --shared 2 --moe-inter 48 --layers 6 --full-attn "1,5,6" --seed 15 >/dev/null; }
}
gen_models

vocab_of() { $PY -c "import json,sys; print(json.load(open('$1/config.json'))['vocab_size'])"; }

for m in $MODELS; do
    dir=$OUT/$m
    V=$(vocab_of $dir)
    IDS=$($PY -c "import random; random.seed('$m'); print(' '.join(str(random.randrange($V)) for _ in range(40)))")
    if ! $K3 eval $dir --ids "$IDS" --logits $OUT/$m.k3.f32 2>$OUT/$m.err; then
        echo "FAIL forward $m: k3 eval failed: $(cat $OUT/$m.err)"
        continue
    fi
    $PY tests/ref/kimi_ref.py $dir --ids "$IDS" --out $OUT/$m.ref.f32 --greedy 12 > $OUT/$m.ref.greedy
    $PY tests/ref/compare_logits.py "forward $m vs numpy reference, 40 tokens" $OUT/$m.k3.f32 $OUT/$m.ref.f32 40
    $TOOL greedy $dir "$IDS" 12 > $OUT/$m.k3.greedy
    if cmp -s $OUT/$m.k3.greedy $OUT/$m.ref.greedy; then
        echo "PASS greedy continuation $m identical (12 tokens)"
    else
        echo "FAIL greedy continuation $m: engine [$(cat $OUT/$m.k3.greedy)] reference [$(cat $OUT/$m.ref.greedy)]"
    fi
done
# prefill(T) == prefill(T-k) + k steps, on two presets and a python checkpoint
for m in tiny_bf16_1 small_f32_4 py_wide; do
    want $m || continue
    IDS=$($PY -c "import random; random.seed(7); print(' '.join(str(random.randrange(200)) for _ in range(45)))")
    $TOOL split $OUT/$m "$IDS" 9 | sed "s/^\(PASS\|FAIL\) /\1 $m: /"
done
# the prompt chunk changes no bit: 45 ids in chunks of 1, 7 and 32 tokens
# (--chunk-tokens) against the chunk the budget picks (the whole prompt here)
for m in tiny_bf16_1 py_wide; do
    want $m || continue
    IDS=$($PY -c "import random; random.seed(8); print(' '.join(str(random.randrange(200)) for _ in range(45)))")
    $K3 eval $OUT/$m --ids "$IDS" --logits $OUT/$m.chunk_auto.f32 2>/dev/null
    for c in 1 7 32; do
        if ! $K3 eval $OUT/$m --chunk-tokens $c --ids "$IDS" --logits $OUT/$m.chunk_$c.f32 2>$OUT/$m.chunk.err; then
            echo "FAIL $m: k3 eval --chunk-tokens $c failed: $(cat $OUT/$m.chunk.err)"
        elif [ -s $OUT/$m.chunk_auto.f32 ] && cmp -s $OUT/$m.chunk_auto.f32 $OUT/$m.chunk_$c.f32; then
            echo "PASS $m: logits of 45 ids in chunks of $c tokens = in one chunk (bit-identical)"
        else
            echo "FAIL $m: logits of 45 ids in chunks of $c tokens differ from one chunk"
        fi
    done
done
