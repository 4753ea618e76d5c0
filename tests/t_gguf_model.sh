#!/bin/sh
# t_gguf_model.sh - Kimi Linear GGUF files written by llama.cpp's own tools
# (tests/fixtures/gguf/kimi_linear: tools/hf_to_gguf.py on gguf-py and
# llama-quantize; make_fixtures.sh holds the commands) against the numpy
# reference (tests/ref/gguf_model.py over kimi_ref.py).
#
# Per fixture: the reference reads it and finds the ggml types
# make_fixtures.sh recorded; every tensor mapped back to its Hugging Face
# name is the source checkpoint's within the type's error (so a quantized
# file holds that model, name by name). The F32 file: every tensor equal to
# the source's, the reference's logits over it equal to the reference over
# the source (0 apart once A and the two float keys are taken as stored),
# and llama.cpp's own greedy ids and logits (recorded by make_fixtures.sh)
# agree with the reference (its kv_a/L2 norms use eps 1e-5 where the
# reference uses 1e-6: observed 2e-4 of max-logit, limit 1e-3).
#
# k3 over each fixture (`k3 eval FILE --ids --logits`, the exact path: fp32
# activations on the file's weights dequantized exactly): within 1e-4 of the
# reference over the same file (max |d logit| / max |logit| per position;
# the engine computes in fp32, the reference in float64 on the same
# dequantized weights: observed <= 5e-7), and the same 8 greedy ids. The
# F32 file against the safetensors checkpoint it came from: the weights are
# the same floats, but a GGUF's MLA k_b (W_UK transposed per head) is
# summed as a dot product per latent column where kv_b_proj is summed by
# rows, so the logits agree to 1e-6 (observed 3.2e-7), not bit for bit;
# the greedy ids are the same. A Q5_K_M file holds Q5_1 tensors (its rows
# that are not whole 256-blocks), which k3 reads like every other type; the
# IQ2_XXS, IQ2_XS, IQ2_M and IQ3_XS files (made with an importance matrix)
# hold the five IQ2/IQ3 grid types. The IQ1_S and IQ1_M files (the same
# importance matrix) hold 13 tensors of their type each, experts included,
# beside IQ4_NL/K-quant ones.
# The tokenizer k3 builds from each file's vocabulary gives the same ids as
# the source checkpoint's tiktoken.model on a mixed text. Under
# --activations q8 every file gives the same logits bytes on 1 and 2
# threads, and not the exact path's; on the IQ1, IQ2_M and IQ3_XS files it
# is within 5e-2 of llama.cpp's logits (which quantize activations too).
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
FX=tests/fixtures/gguf/kimi_linear
OUT=tests/out/gguf_model
mkdir -p $OUT
IDS=$(sed -n 's/^# IDS //p' $FX/manifest.txt)
N_IDS=$(echo $IDS | wc -w)

# the fixtures' source, regenerated exactly as make_fixtures.sh made it
SRC=$OUT/src
[ -f $SRC/config.json ] || $PY tests/ref/gen_ckpt.py $SRC --hidden 256 --layers 2 --kda-heads 2 \
    --kda-head-dim 32 --mla-heads 2 --kv-lora 64 --nope 32 --rope 16 --v-dim 32 --experts 4 --topk 2 \
    --moe-inter 32 --dense-inter 64 --shared 1 --vocab 288 --full-attn 2 --shards 1 --dtype f32 --seed 27 \
    --tokenizer >/dev/null

# largest RMS(dequantized - source) / RMS(source) of a tensor allowed per file type (observed x ~2)
max_rel() {
    case $1 in
    F32) echo 1e-6 ;; F16) echo 1e-3 ;; BF16) echo 5e-3 ;; Q8_0) echo 1.5e-2 ;; Q6_K) echo 4e-2 ;;
    Q5_K_M|Q5_0) echo 8e-2 ;; Q4_K_M|Q4_0|IQ4_NL|IQ4_XS|MXFP4_MOE) echo 0.2 ;; Q3_K_M) echo 0.3 ;;
    Q2_K) echo 0.6 ;; IQ3_XS) echo 0.4 ;; IQ2_M) echo 0.55 ;; IQ2_XS) echo 0.65 ;; IQ2_XXS) echo 0.7 ;;
    # the 1-bit types on random Gaussian weights: observed 0.50 (IQ1_S) and 0.48 (IQ1_M); a file of
    # zeros or of another model's weights would be 1 or more
    IQ1_S|IQ1_M) echo 0.75 ;; *) echo 0 ;;
    esac
}

for f in $FX/kl-*.gguf; do
    t=${f##*/kl-}; t=${t%.gguf}
    want=$(grep "^kl-$t.gguf |" $FX/manifest.txt | cut -d'|' -f2 | sed 's/^ *//; s/ *$//')
    got=$($PY tests/ref/gguf_model.py types $f 2>&1)
    if [ -n "$want" ] && [ "$got" = "$want" ]; then
        echo "PASS gguf fixture $t: the reader finds the types llama.cpp's tools wrote ($got)"
    else
        echo "FAIL gguf fixture $t: types [$got], manifest says [$want]"
    fi
    $PY tests/ref/gguf_model.py close-weights $f $SRC $(max_rel $t) | sed "s/^\(PASS\|FAIL\) /\1 gguf fixture $t: /"
done

F32=$FX/kl-F32.gguf
$PY tests/ref/gguf_model.py same-weights $F32 $SRC | sed 's/^\(PASS\|FAIL\) /\1 gguf fixture F32 weights: /'
$PY tests/ref/gguf_model.py same-logits $F32 $SRC "$IDS" | sed 's/^\(PASS\|FAIL\) /\1 gguf fixture F32 logits: /'
ref_greedy=$($PY tests/ref/gguf_model.py $F32 --ids "$IDS" --out $OUT/ref-F32.f32 --greedy 8)
llama_greedy=$(grep "^kl-F32.gguf |" $FX/manifest.txt | cut -d'|' -f3 | sed 's/^ *//; s/ *$//')
if [ -n "$ref_greedy" ] && [ "$ref_greedy" = "$llama_greedy" ]; then
    echo "PASS gguf fixture F32: llama.cpp's greedy ids equal the reference's ($ref_greedy)"
else
    echo "FAIL gguf fixture F32: llama.cpp greedy [$llama_greedy], reference [$ref_greedy]"
fi
$PY tests/ref/compare_logits.py "gguf fixture F32: llama.cpp's logits vs the reference's" \
    $FX/llamacpp-F32.f32 $OUT/ref-F32.f32 $N_IDS 1e-3

K3=${K3:-./k3}
TOOL=${TOOL:-${K3_TESTBIN:-build/tests}/tool_engine}
for f in $FX/kl-*.gguf; do
    t=${f##*/kl-}; t=${t%.gguf}
    if ! $K3 eval $f --ids "$IDS" --logits $OUT/k3-$t.f32 >/dev/null 2>$OUT/k3-$t.err; then
        echo "FAIL gguf fixture $t: k3 eval failed: $(tail -1 $OUT/k3-$t.err)"
        echo "FAIL gguf fixture $t: no greedy ids (k3 eval failed)"
        continue
    fi
    ref=$($PY tests/ref/gguf_model.py $f --ids "$IDS" --out $OUT/ref-$t.f32 --greedy 8)
    $PY tests/ref/compare_logits.py "gguf fixture $t: k3 eval vs the numpy reference over the same file" \
        $OUT/k3-$t.f32 $OUT/ref-$t.f32 $N_IDS
    mine=$($TOOL greedy $f "$IDS" 8 2>&1)
    if [ -n "$ref" ] && [ "$mine" = "$ref" ]; then
        echo "PASS gguf fixture $t: k3's 8 greedy ids equal the reference's ($mine)"
    else
        echo "FAIL gguf fixture $t: k3 greedy [$mine], reference [$ref]"
    fi
done

# the F32 file against the safetensors checkpoint it was converted from
$K3 eval $SRC --ids "$IDS" --logits $OUT/k3-src.f32 >/dev/null 2>$OUT/k3-src.err
$PY tests/ref/compare_logits.py "gguf fixture F32: k3 over the GGUF vs k3 over its safetensors source" \
    $OUT/k3-F32.f32 $OUT/k3-src.f32 $N_IDS 1e-6
st_greedy=$($TOOL greedy $SRC "$IDS" 8 2>&1)
gguf_greedy=$($TOOL greedy $F32 "$IDS" 8 2>&1)
if [ -n "$st_greedy" ] && [ "$st_greedy" = "$gguf_greedy" ]; then
    echo "PASS gguf fixture F32: k3's greedy ids over the GGUF equal those over its safetensors source"
else
    echo "FAIL gguf fixture F32: greedy over the GGUF [$gguf_greedy], over the safetensors [$st_greedy]"
fi

# the tokenizer from the file (no tiktoken.model beside it) against the source checkpoint's: code,
# accents, an emoji, digits and a special name in the text
T='def f(x): return x*2  # the theory of héllo wörld 😀 <|im_end|> 12345'
want=$($K3 tokenize $SRC --text "$T" 2>&1)
bad=""
for f in $FX/kl-*.gguf; do
    got=$($K3 tokenize $f --text "$T" 2>&1)
    [ "$got" = "$want" ] || bad="$bad ${f##*/}"
done
if [ -n "$want" ] && [ -z "$bad" ]; then
    echo "PASS gguf fixtures: k3's token ids from each file's vocabulary equal the safetensors source's ($(echo $want | wc -w) ids)"
else
    echo "FAIL gguf fixtures: token ids differ from the source's [$want] for:$bad"
fi

# k3 models names the file type each IQ fixture's general.file_type records (llama.cpp's ftype names)
rm -rf $OUT/iq_models && mkdir -p $OUT/iq_models
bad=""
for t in IQ2_XXS IQ2_XS IQ2_M IQ3_XS; do
    cp $FX/kl-$t.gguf $OUT/iq_models/
done
listing=$($K3 models $OUT/iq_models 2>&1)
for t in IQ2_XXS IQ2_XS IQ2_M IQ3_XS; do
    echo "$listing" | grep "kl-$t.gguf" | grep -q " $t  *kimi_linear" || bad="$bad $t"
done
if [ -z "$bad" ]; then
    echo "PASS gguf fixtures: k3 models names the IQ2_XXS, IQ2_XS, IQ2_M and IQ3_XS files' types"
else
    echo "FAIL gguf fixtures: k3 models does not name the type of:$bad ($(echo "$listing" | head -3 | tr '\n' ' '))"
fi

# the summation-order contract on the grid types: the IQ3_XS file's logits (IQ3_XXS, IQ3_S and
# IQ4_NL tensors) bit-identical on 1 and 3 threads and in prompt chunks of 1 and 16 tokens
f=$FX/kl-IQ3_XS.gguf
ok=1
for run in "--threads 1 --chunk-tokens 16" "--threads 3 --chunk-tokens 16" "--threads 2 --chunk-tokens 1"; do
    name=$(echo $run | tr -d ' -')
    $K3 eval $f $run --ids "$IDS" --logits $OUT/iq3_xs_$name.f32 >/dev/null 2>$OUT/iq3_xs_$name.err || ok=0
    cmp -s $OUT/iq3_xs_$name.f32 $OUT/iq3_xs_threads1chunktokens16.f32 || ok=0
done
if [ $ok = 1 ]; then
    echo "PASS gguf fixture IQ3_XS: logits bit-identical on 1 and 3 threads and in chunks of 1 and 16 tokens"
else
    echo "FAIL gguf fixture IQ3_XS: logits differ across threads or chunks (or k3 eval failed: $(cat $OUT/iq3_xs_*.err | head -1))"
fi

# llama.cpp computes the IQ1 and IQ2/IQ3 grid types with q8 activations (its Q8_K pairing): k3
# under --activations q8 over the same files is within 5e-2 of its recorded logits at every
# position (observed 2.5e-2 and 2.7e-2 on IQ1_S and IQ1_M, 2.0e-2 and 2.4e-2 on IQ3_XS and IQ2_M,
# as the other types' q8 differences). This tells the two paths apart: k3's exact path is 0.30
# from them on IQ1_S, and on IQ3_XS, where at one position the router's 2nd and 3rd expert scores
# are 0.0011 apart, the exact path picks the other expert (0.48 from llama.cpp's logits there)
# where q8 activations pick llama.cpp's.
for t in IQ1_S IQ1_M IQ3_XS IQ2_M; do
    if $K3 eval $FX/kl-$t.gguf --ids "$IDS" --logits $OUT/k3-q8-$t.f32 --activations q8 >/dev/null 2>$OUT/k3-q8-$t.err; then
        $PY tests/ref/compare_logits.py "gguf fixture $t: k3 --activations q8 vs llama.cpp's logits" \
            $FX/llamacpp-$t.f32 $OUT/k3-q8-$t.f32 $N_IDS 5e-2
    else
        echo "FAIL gguf fixture $t: k3 eval --activations q8 failed: $(tail -1 $OUT/k3-q8-$t.err)"
    fi
done

# the file type a 1-bit file names (general.file_type 24 / 31) as `k3 models` shows it
rm -rf $OUT/models && mkdir -p $OUT/models && cp $FX/kl-IQ1_S.gguf $FX/kl-IQ1_M.gguf $OUT/models/
listed=$($K3 models $OUT/models 2>&1)
if echo "$listed" | grep -q 'kl-IQ1_S.gguf .* IQ1_S .*GGUF' && echo "$listed" | grep -q 'kl-IQ1_M.gguf .* IQ1_M .*GGUF'; then
    echo "PASS gguf fixtures: k3 models names the IQ1_S and IQ1_M files' types"
else
    echo "FAIL gguf fixtures: k3 models does not name IQ1_S / IQ1_M: $(echo "$listed" | tr '\n' ' ')"
fi

# --activations q8 over every fixture (quant_matvec.c's q8 contract, Q4_1/Q5_1 included through the
# Q5_K_M file): the same logits bytes on 1 and 2 threads, and not the exact path's bytes wherever the
# file has a block type (the switch took the q8 path); F32 stays exact.
bad=""
for f in $FX/kl-*.gguf; do
    t=${f##*/kl-}; t=${t%.gguf}
    $K3 eval $f --ids "$IDS" --logits $OUT/q8-1t-$t.f32 --activations q8 --threads 1 >/dev/null 2>&1 &&
        $K3 eval $f --ids "$IDS" --logits $OUT/q8-2t-$t.f32 --activations q8 --threads 2 >/dev/null 2>&1 ||
        { bad="$bad $t:eval-failed"; continue; }
    cmp -s $OUT/q8-1t-$t.f32 $OUT/q8-2t-$t.f32 || bad="$bad $t:1t!=2t"
    if [ $t = F32 ]; then
        cmp -s $OUT/q8-2t-$t.f32 $OUT/k3-$t.f32 || bad="$bad $t:not-exact"
    else
        cmp -s $OUT/q8-2t-$t.f32 $OUT/k3-$t.f32 && bad="$bad $t:equals-exact"
    fi
done
if [ -z "$bad" ]; then
    echo "PASS gguf fixtures --activations q8: the same logits bytes on 1 and 2 threads for every file, not the exact path's (F32 exact)"
else
    echo "FAIL gguf fixtures --activations q8:$bad"
fi
