#!/bin/sh
# t_pack_quant.sh - `k3 pack --trunk TYPE --experts TYPE` (offline/pack.c,
# docs/ARCHITECTURE.md, "The packed layout"): packs models/k3-mini (K3: MXFP4
# experts, converted when --experts asks, losslessly to MXFP4; rows of 96
# that fall back from Q4_K to Q5_0, rows of 48 that stay)
# and a generated Kimi Linear (bf16 experts, rows of 256 and 128), and checks
# each pack independently with tests/ref/quant_np.py: which tensors are
# blocks, their bytes equal to the numpy quantizers', their sizes by the
# bytes-per-weight table, everything else byte-equal to the source, the
# manifest version; the packs load and `k3 eval` gives the logits of the
# decoded weights bit for bit; `k3 models` names their type; `k3 pack --check` passes; a quantized pack's fingerprint
# is not its source's; a bad type name, a NaN weight and a manifest naming an
# unknown type are refused in one line.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
PY=/usr/bin/python3
REF=tests/ref/quant_np.py
OUT=tests/out/pack_quant
rm -rf $OUT
mkdir -p $OUT

$PY tests/ref/gen_ckpt.py $OUT/kl --hidden 256 --moe-inter 256 --dense-inter 512 --kda-heads 2 --kda-head-dim 128 \
    --mla-heads 2 --kv-lora 256 --v-dim 128 --nope 128 --rope 64 --layers 3 --experts 8 --topk 2 --vocab 512 \
    --seed 5 > /dev/null 2>&1

# pack_check LABEL SRC TRUNK EXPERTS [PACK OPTIONS]: pack SRC with the types ("-": as stored), then the
# reference's checks
pack_check() {
    label=$1 src=$2 trunk=$3 experts=$4
    shift 4
    [ "$trunk" != - ] && set -- "$@" --trunk "$trunk"
    [ "$experts" != - ] && set -- "$@" --experts "$experts"
    if $K3 pack "$src" $OUT/$label "$@" > $OUT/$label.log 2>&1; then
        $PY $REF check-pack "$src" $OUT/$label $label "$trunk" "$experts"
    else
        for c in choice bytes copied; do echo "FAIL pack_quant_${c}_$label: $(tail -n 1 $OUT/$label.log)"; done
    fi
}
pack_check mini_q8_0 models/k3-mini Q8_0 -
pack_check mini_q4_k models/k3-mini Q4_K Q4_K
pack_check kl_q8_0_q4_k $OUT/kl Q8_0 Q4_K
pack_check kl_q6_k_mxfp4 $OUT/kl Q6_K MXFP4
pack_check mini_experts_mxfp4 models/k3-mini - MXFP4

# matrices larger than the copy buffer (2 MiB with --buffer 1) are quantized
# in pieces of whole rows: the same bytes as in one piece
$PY tests/ref/gen_ckpt.py $OUT/big --hidden 256 --dense-inter 4096 --moe-inter 256 --kda-heads 2 --kda-head-dim 128 \
    --mla-heads 2 --kv-lora 256 --v-dim 128 --nope 128 --rope 64 --layers 2 --first-dense 2 --experts 4 --topk 2 \
    --vocab 512 --seed 6 > /dev/null 2>&1
pack_check big_buffer_1m $OUT/big Q8_0 - --buffer 1
$K3 pack $OUT/big $OUT/big_whole --trunk Q8_0 > $OUT/big_whole.log 2>&1
same=0
for f in trunk experts embed head; do cmp -s $OUT/big_whole/$f.bin $OUT/big_buffer_1m/$f.bin && same=$((same + 1)); done
if [ $same = 4 ]; then echo "PASS pack_quant_streamed (a 1 MiB buffer writes the bytes of one 64 MiB piece)"
else echo "FAIL pack_quant_streamed: $same of 4 files equal: $(tail -n 1 $OUT/big_whole.log)"; fi

if $K3 pack --check $OUT/kl_q8_0_q4_k > $OUT/check.log 2>&1; then
    echo "PASS pack_quant_check ($(cut -c1-120 $OUT/check.log))"
else
    echo "FAIL pack_quant_check: $(head -n 1 $OUT/check.log)"
fi

# a quantized pack is another model: not the source's fingerprint
$K3 pack models/k3-mini $OUT/mini_plain > /dev/null 2>&1
fp() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1] + "/manifest.json"))["source"]["fingerprint"])' "$1"; }
a=$(fp $OUT/mini_plain 2>/dev/null) b=$(fp $OUT/mini_q8_0 2>/dev/null) c=$(fp $OUT/mini_q4_k 2>/dev/null)
if [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ "$a" != "$b" ] && [ "$b" != "$c" ] && [ "$a" != "$c" ]; then
    echo "PASS pack_quant_fingerprint (plain $a, Q8_0 $b, Q4_K $c)"
else
    echo "FAIL pack_quant_fingerprint: plain '$a', Q8_0 '$b', Q4_K '$c'"
fi

# the packs run: `k3 eval` logits over 40 tokens (two chunks) bit-identical to
# those of the source with the blocked tensors replaced by their decoded
# weights as F32 (quant_np.py dequant-ckpt): quant_matvec.c sums a row's
# decoded weights in the order the F32 kernel sums them
ids=$(seq 1 7 280 | tr '\n' ' ')
for pair in "mini_q4_k models/k3-mini" "kl_q8_0_q4_k $OUT/kl"; do
    set -- $pair
    $PY $REF dequant-ckpt "$2" $OUT/$1 $OUT/$1_deq 2> $OUT/$1_deq.err
    if ! $K3 eval $OUT/$1 --ids "$ids" --logits $OUT/$1.f32 > /dev/null 2> $OUT/$1_eval.err; then
        echo "FAIL pack_quant_logits_$1: $(head -n 1 $OUT/$1_eval.err)"
    elif ! $K3 eval $OUT/$1_deq --ids "$ids" --logits $OUT/$1_deq.f32 > /dev/null 2> $OUT/$1_deq_eval.err; then
        echo "FAIL pack_quant_logits_$1: the decoded checkpoint: $(head -n 1 $OUT/$1_deq_eval.err) $(head -n 1 $OUT/$1_deq.err)"
    elif cmp -s $OUT/$1.f32 $OUT/$1_deq.f32 && [ -s $OUT/$1.f32 ]; then
        echo "PASS pack_quant_logits_$1 (40 x $(($(wc -c < $OUT/$1.f32) / 160)) logits bit-identical to the decoded weights' as F32)"
    else
        echo "FAIL pack_quant_logits_$1: $(cmp $OUT/$1.f32 $OUT/$1_deq.f32 2>&1 | head -n 1)"
    fi
done

# K3's MXFP4 experts re-laid as GGUF MXFP4 keep every value: the logits of the source, bit for bit
$K3 eval models/k3-mini --ids "$ids" --logits $OUT/mini_src.f32 > /dev/null 2> $OUT/mini_src.err
$K3 eval $OUT/mini_experts_mxfp4 --ids "$ids" --logits $OUT/mini_mx.f32 > /dev/null 2> $OUT/mini_mx.err
if [ -s $OUT/mini_mx.f32 ] && cmp -s $OUT/mini_src.f32 $OUT/mini_mx.f32; then
    echo "PASS pack_quant_mxfp4_experts_lossless (K3's experts as GGUF MXFP4: logits equal the source's)"
else
    echo "FAIL pack_quant_mxfp4_experts_lossless: $(head -n 1 $OUT/mini_mx.err) $(cmp $OUT/mini_src.f32 $OUT/mini_mx.f32 2>&1 | head -n 1)"
fi

# the weights' type as `k3 models` names it, from the manifest's block types
$K3 models $OUT > $OUT/models.txt 2>&1
if grep -q "kl_q8_0_q4_k  *[0-9.]* MB  Q8_0 + Q4_K experts  *kimi_linear" $OUT/models.txt &&
    grep -q "mini_q8_0  *[0-9.]* MB  Q8_0 + MXFP4 experts  *kimi_k3" $OUT/models.txt &&
    grep -q "mini_q4_k  *[0-9.]* MB  Q5_0  *kimi_k3" $OUT/models.txt; then
    echo "PASS pack_quant_type_label (Q8_0 + Q4_K experts; Q8_0 + MXFP4 experts; Q5_0 after the fallback)"
else
    echo "FAIL pack_quant_type_label: $(grep -E 'kl_q8_0_q4_k |mini_q8_0 |mini_q4_k ' $OUT/models.txt | tr -s ' ' | tr '\n' ';')"
fi

# refusals: a type pack does not write, and a manifest naming a type no build knows
$K3 pack models/k3-mini $OUT/bad --trunk Q2_K > /dev/null 2> $OUT/bad.err
rc1=$?
$K3 pack models/k3-mini $OUT/bad --experts q8_0 > /dev/null 2> $OUT/bad2.err
rc2=$?
if [ $rc1 = 2 ] && [ $rc2 = 2 ] && [ "$(wc -l < $OUT/bad.err)" = 1 ] && grep -q -- "--trunk: expected Q8_0|" $OUT/bad.err &&
    grep -q -- "--experts: expected .*got 'q8_0'" $OUT/bad2.err && [ ! -e $OUT/bad ]; then
    echo "PASS pack_quant_refuses_bad_type ($(cat $OUT/bad.err))"
else
    echo "FAIL pack_quant_refuses_bad_type: exit $rc1/$rc2: $(head -n 1 $OUT/bad.err) $(head -n 1 $OUT/bad2.err)"
fi
# a NaN in a matrix has no block: refused naming the tensor and the row, nothing written
cp -r $OUT/kl $OUT/kl_nan
$PY - $OUT/kl_nan <<'PY'
import json, struct, sys
idx = json.load(open(sys.argv[1] + "/model.safetensors.index.json"))["weight_map"]
name = "model.layers.0.self_attn.q_proj.weight"
path = sys.argv[1] + "/" + idx[name]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    e = json.loads(f.read(n))[name]
    f.seek(8 + n + e["data_offsets"][0] + 2 * (3 * e["shape"][1] + 5))    # row 3, column 5
    f.write(struct.pack("<H", 0x7FC0))                                      # a bf16 NaN
PY
$K3 pack $OUT/kl_nan $OUT/kl_nan_q --trunk Q8_0 > /dev/null 2> $OUT/nan.err
rc=$?
if [ $rc = 1 ] && [ "$(wc -l < $OUT/nan.err)" = 1 ] && [ ! -e $OUT/kl_nan_q ] && [ ! -e $OUT/kl_nan_q.partial ] &&
    grep -q "tensor 'model.layers.0.self_attn.q_proj.weight' row 3 holds a NaN or an infinity" $OUT/nan.err; then
    echo "PASS pack_quant_refuses_nan ($(cat $OUT/nan.err))"
else
    echo "FAIL pack_quant_refuses_nan: exit $rc: $(head -n 2 $OUT/nan.err)"
fi

cp -r $OUT/mini_q8_0 $OUT/unknown
sed -i 's/"Q8_0"/"Q9_0"/' $OUT/unknown/manifest.json
$K3 pack --check $OUT/unknown > /dev/null 2> $OUT/unknown.err
rc=$?
if [ $rc = 1 ] && [ "$(wc -l < $OUT/unknown.err)" = 1 ] &&
    grep -q 'unknown/manifest.json: tables.dtypes\[[0-9]*\]: unsupported dtype "Q9_0"' $OUT/unknown.err; then
    echo "PASS pack_quant_refuses_unknown_type ($(cat $OUT/unknown.err))"
else
    echo "FAIL pack_quant_refuses_unknown_type: exit $rc: $(head -n 2 $OUT/unknown.err)"
fi
