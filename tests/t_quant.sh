#!/bin/sh
# t_quant.sh - the quantizers of `k3 pack --trunk/--experts` (engine/kernels/quant_quantize.c)
# against the numpy reference tests/ref/quant_np.py: on random rows and the
# edge cases (all zero, one huge value, a negative extreme, subnormals,
# values at and beyond fp16's range, ties at .5, powers of two and their
# neighbours, constant rows, zero groups) every block byte-equal to the
# reference; the round trip (k3's scalar decoder over k3's blocks) equal to
# gguf_np.py's decoder over the reference's blocks, with an error within the
# type's bound; a type k3 does not write and a ragged input refused.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
TOOL=${K3_TESTBIN:-build/tests}/tool_quant
PY=/usr/bin/python3
REF=tests/ref/quant_np.py
W=tests/out/quant
rm -rf "$W"
mkdir -p "$W"

$PY $REF rows "$W/rows.f32"
for t in Q8_0 Q4_0 Q5_0 MXFP4 Q4_K Q5_K Q6_K; do
    if ! "$TOOL" quantize $t "$W/rows.f32" "$W/k3_$t.bin" 2> "$W/k3_$t.err"; then
        echo "FAIL quant_bytes_$t: $(head -n 1 "$W/k3_$t.err")"
        continue
    fi
    $PY $REF quantize $t "$W/rows.f32" "$W/np_$t.bin" 2> "$W/np_$t.err"
    if cmp -s "$W/k3_$t.bin" "$W/np_$t.bin"; then
        echo "PASS quant_bytes_$t ($(wc -c < "$W/k3_$t.bin") bytes of $(wc -l < "$W/rows.f32.names") rows equal to the reference)"
    else
        echo "FAIL quant_bytes_$t: $(cmp "$W/k3_$t.bin" "$W/np_$t.bin" 2>&1 | head -n 1) $(head -n 1 "$W/np_$t.err")"
    fi
    if "$TOOL" dequant $t "$W/k3_$t.bin" "$W/deq_$t.f32" 2> "$W/deq_$t.err"; then
        $PY $REF rms $t "$W/rows.f32" "$W/deq_$t.f32" 2>&1 | grep -E '^(PASS|FAIL) ' || echo "FAIL quant_round_trip_$t: the reference printed no verdict"
    else
        echo "FAIL quant_round_trip_$t: $(head -n 1 "$W/deq_$t.err")"
    fi
done

# a type k3 reads but does not write, and floats that are not whole blocks
"$TOOL" quantize Q2_K "$W/rows.f32" "$W/q2k.bin" 2> "$W/q2k.err"
rc=$?
if [ $rc = 1 ] && [ "$(wc -l < "$W/q2k.err")" = 1 ] && grep -q '^Q2_K: k3 cannot write this type$' "$W/q2k.err"; then
    echo "PASS quant_refuses_unwritten_type"
else
    echo "FAIL quant_refuses_unwritten_type: exit $rc: $(head -n 2 "$W/q2k.err")"
fi
head -c 1152 "$W/rows.f32" > "$W/ragged.f32"     # 288 floats: 9 blocks of 32, not 256
"$TOOL" quantize Q4_K "$W/ragged.f32" "$W/ragged.bin" 2> "$W/ragged.err"
rc=$?
if [ $rc = 1 ] && grep -q 'ragged.f32: 1152 bytes are not whole Q4_K blocks of floats$' "$W/ragged.err"; then
    echo "PASS quant_refuses_ragged_row"
else
    echo "FAIL quant_refuses_ragged_row: exit $rc: $(head -n 2 "$W/ragged.err")"
fi
