#!/bin/sh
# t_gguf_run.sh - a GGUF as a user meets it, on the llama.cpp-made fixtures
# of tests/fixtures/gguf/kimi_linear (t_gguf_model.sh checks their logits
# against the numpy reference): the same logits whatever the budget (its
# routed experts streamed from the file), thread count and prompt chunk;
# `k3 pack` of the file gives the one-read-per-expert layout with the same
# logits bit for bit and the file's vocabulary (tokenizer.gguf); `k3
# models` lists the file with its type; NAME finds NAME.gguf in a models
# folder; `k3 plan` reads its sizes from the header; and a renamed,
# truncated or foreign file is refused in one line naming the file.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
K3=${K3:-./k3}
FX=tests/fixtures/gguf/kimi_linear
OUT=tests/out/gguf_run
rm -rf $OUT && mkdir -p $OUT
IDS=$(sed -n 's/^# IDS //p' $FX/manifest.txt)
F=$FX/kl-Q4_K_M.gguf

# 1. budgets, threads, chunks: one set of bits. The smallest budget the
# plan takes (from its refusal of 1 MiB) streams the routed experts.
$K3 eval $F --ids "$IDS" --logits $OUT/full.f32 >/dev/null 2>$OUT/full.err
# The minimum moves with the process's memory when measured: ask again at
# the minimum each refusal names (at it, the cache holds top_k of 4 experts).
min=1
for try in 1 2 3 4; do
    if $K3 eval $F --ids "$IDS" --logits $OUT/min.f32 --mem ${min}M >/dev/null 2>$OUT/min.err; then break; fi
    min=$(sed -n 's/.*use --mem \([0-9]*\)M or more.*/\1/p' $OUT/min.err)
    [ -n "$min" ] || break
done
$K3 eval $F --ids "$IDS" --logits $OUT/t1.f32 --threads 1 --chunk-tokens 3 >/dev/null 2>$OUT/t1.err
if [ -n "$min" ] && [ "$min" -gt 1 ] && cmp -s $OUT/full.f32 $OUT/min.f32 && cmp -s $OUT/full.f32 $OUT/t1.f32 && [ -s $OUT/full.f32 ]; then
    pass "gguf run: Q4_K_M logits bit-identical resident, at the ${min} MiB minimum budget, on 1 thread in chunks of 3"
else
    fail "gguf run: logits across budgets/threads/chunks" "min=$min $(cat $OUT/full.err $OUT/min.err $OUT/t1.err | tail -3)"
fi

# 2. k3 pack of the file: one read per expert, the same bits, its vocabulary
rm -rf $OUT/packed
if $K3 pack $F $OUT/packed >$OUT/pack.log 2>&1 && [ -f $OUT/packed/tokenizer.gguf ] &&
   [ -f $OUT/packed/config.json ]; then
    pass "gguf run: k3 pack of a .gguf writes the packed layout, config.json and tokenizer.gguf ($(tail -1 $OUT/pack.log | cut -c1-90))"
else
    fail "gguf run: k3 pack of a .gguf" "$(tail -2 $OUT/pack.log)"
fi
$K3 eval $OUT/packed --ids "$IDS" --logits $OUT/packed.f32 >/dev/null 2>$OUT/packed.err
if cmp -s $OUT/full.f32 $OUT/packed.f32; then
    pass "gguf run: the pack's logits equal the .gguf's bit for bit"
else
    fail "gguf run: the pack's logits differ from the .gguf's" "$(tail -1 $OUT/packed.err)"
fi
/usr/bin/python3 - $OUT/packed/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
e = m["experts"]
# every routed expert is one page of experts.bin: its three slabs, which
# sit in three stacked tensors of the .gguf, one aligned read in the pack
n_pages = e["n_layers_moe"] * e["n_experts"]
ok = e["page_bytes"] > 0 and n_pages > 0 and m["version"] == 3
print(("PASS" if ok else "FAIL") + f" gguf run: the pack holds {n_pages} expert pages of {e['page_bytes']} bytes "
      f"(one read each), manifest version {m['version']} (block types)")
PY
a=$($K3 tokenize $F --text "the tide is out, 12 ships" 2>&1)
b=$($K3 tokenize $OUT/packed --text "the tide is out, 12 ships" 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ] && ! [ -f $OUT/packed/tiktoken.model ]; then
    pass "gguf run: the pack tokenizes with the file's vocabulary ($a)"
else
    fail "gguf run: the pack's tokenizer" "gguf [$a] pack [$b]"
fi

# 3. k3 models and NAME lookup in a models folder
mkdir -p $OUT/models && cp $F $OUT/models/kimi-small.gguf
line=$($K3 models $OUT/models 2>&1 | grep kimi-small.gguf)
if echo "$line" | grep -q "Q4_K_M" && echo "$line" | grep -q "kimi_linear, 2 layers" && echo "$line" | grep -q GGUF; then
    pass "gguf run: k3 models lists the .gguf with its type ($(echo $line | tr -s ' '))"
else
    fail "gguf run: k3 models" "$($K3 models $OUT/models 2>&1)"
fi
if K3_MODELS=$PWD/$OUT/models $K3 eval kimi-small --ids "$IDS" --logits $OUT/byname.f32 >/dev/null 2>$OUT/byname.err &&
   cmp -s $OUT/full.f32 $OUT/byname.f32; then
    pass "gguf run: NAME opens NAME.gguf from a models folder"
else
    fail "gguf run: NAME lookup of a .gguf" "$(tail -1 $OUT/byname.err)"
fi

# 4. k3 plan reads the file's header
if $K3 plan $F --mem 1G --disk 2 > $OUT/plan.txt 2>&1 && grep -q "sizes from GGUF header" $OUT/plan.txt; then
    pass "gguf run: k3 plan sizes a .gguf from its header"
else
    fail "gguf run: k3 plan of a .gguf" "$(tail -2 $OUT/plan.txt)"
fi

# 5. bad files: one line naming the file, exit 1
/usr/bin/python3 - $F $OUT <<'PY'
import sys
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
def patch(old, new, name):
    assert b.count(old) >= 1, old
    open(f"{out}/{name}.gguf", "wb").write(b.replace(old, new, 1))
patch(b"blk.0.ssm_norm.weight", b"blk.0.ssm_norX.weight", "renamed")
patch(b"kimi-linear", b"llama-xxxxx", "foreign")
open(f"{out}/truncated.gguf", "wb").write(b[:len(b) * 2 // 3])
PY
for bad in renamed:"blk.0.ssm_norm.weight" foreign:'"llama-xxxxx" is not one k3 runs' truncated:"truncated"; do
    name=${bad%%:*}; want=${bad#*:}
    $K3 eval $OUT/$name.gguf --ids "$IDS" --logits $OUT/bad.f32 >$OUT/bad.out 2>$OUT/bad.err
    rc=$?
    if [ $rc -eq 1 ] && [ $(wc -l < $OUT/bad.err) -eq 1 ] && grep -q "$name.gguf" $OUT/bad.err &&
       grep -qF "$want" $OUT/bad.err; then
        pass "gguf run: a $name file is refused in one line ($(cat $OUT/bad.err))"
    else
        fail "gguf run: a $name file" "exit $rc: $(head -3 $OUT/bad.err)"
    fi
done

# 6. Kimi K3: tools/hf_to_gguf.py's file of k3 gen's k3-tiny (bf16 trunk,
# MXFP4 experts repacked into ggml blocks) against the same weights as
# safetensors. The weights are the same values, but the GGUF's MLA k_b is
# summed as a dot product per latent column (the kv_b_proj path sums by
# rows), so the logits agree to rounding (observed 5.4e-7 of max-logit),
# not bit for bit; the greedy ids and the tokenizer's ids are the same.
K3FX=tests/fixtures/gguf/kimi_k3/k3tiny-BF16.gguf
rm -rf $OUT/k3tiny && $K3 gen $OUT/k3tiny --preset k3-tiny >/dev/null 2>&1
K3IDS="1 5 9 200 17 300 44 2 8 100 512 514 700 3"
$K3 eval $K3FX --ids "$K3IDS" --logits $OUT/k3g.f32 >/dev/null 2>$OUT/k3g.err
$K3 eval $OUT/k3tiny --ids "$K3IDS" --logits $OUT/k3s.f32 >/dev/null 2>$OUT/k3s.err
/usr/bin/python3 tests/ref/compare_logits.py "gguf run: Kimi K3 GGUF (bf16, MXFP4 experts) vs the same weights as safetensors" \
    $OUT/k3g.f32 $OUT/k3s.f32 14 2e-6
a=$($K3 tokenize $K3FX --text "the tide <|im_end|> 12 ships" 2>&1)
b=$($K3 tokenize $OUT/k3tiny --text "the tide <|im_end|> 12 ships" 2>&1)
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    pass "gguf run: the K3 GGUF's own vocabulary gives the safetensors model's ids ($a)"
else
    fail "gguf run: K3 GGUF tokenizer" "gguf [$a] safetensors [$b]"
fi
if echo "Repeat: the tide" | $K3 run $K3FX -n 4 --temp 0 > $OUT/k3run.out 2>$OUT/k3run.err &&
   echo "Repeat: the tide" | $K3 run $OUT/k3tiny -n 4 --temp 0 > $OUT/k3run_st.out 2>/dev/null &&
   cmp -s $OUT/k3run.out $OUT/k3run_st.out; then
    pass "gguf run: k3 run on the K3 GGUF answers as the safetensors model does (greedy, 4 tokens)"
else
    fail "gguf run: k3 run on the K3 GGUF" "$(tail -1 $OUT/k3run.err)"
fi
