#!/bin/sh
# t_gguf.sh - the GGUF reader (engine/formats/gguf.c) and the block types
# (engine/kernels/quant_types.c) against the numpy reference
# tests/ref/gguf_np.py, which writes the files: its own self-test on
# hand-made blocks, a file with every metadata value type and one tensor of
# random blocks per type (metadata read back as written, every weight
# decoded bit-equal), a file written by llama.cpp's gguf-py (every tensor
# decoded to the bits gguf-py gave), split sets (opened by any part or by their folder; a
# missing or foreign part refused) and one file per defect the reader must
# refuse with one line naming the file.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
TOOL=${K3_TESTBIN:-build/tests}/tool_gguf
PY=/usr/bin/python3
REF=tests/ref/gguf_np.py
W=tests/out/gguf
rm -rf "$W"
mkdir -p "$W/dump" "$W/split" "$W/corrupt"

# ---- the reference's own hand-computed blocks (one line per check)
$PY $REF --selftest | grep -E '^(PASS|FAIL) '

# ---- every value type and every block type, written by the reference
$PY $REF write-types "$W/types.gguf"
$PY $REF expect-info "$W/types.gguf" > "$W/want_info.txt"
if ! "$TOOL" info "$W/types.gguf" > "$W/info.txt" 2> "$W/info.err"; then
    echo "FAIL gguf_info_matches_writer: $(head -n 1 "$W/info.err")"
elif ! cmp -s "$W/info.txt" "$W/want_info.txt"; then
    echo "FAIL gguf_info_matches_writer: $(diff "$W/want_info.txt" "$W/info.txt" | sed -n 2p)"
else
    echo "PASS gguf_info_matches_writer ($(wc -l < "$W/info.txt") key/values and tensors)"
fi
if ! "$TOOL" dequant "$W/types.gguf" "$W/dump" 2> "$W/dequant.err"; then
    echo "FAIL gguf_dequant: $(head -n 1 "$W/dequant.err")"
else
    $PY $REF check "$W/types.gguf" "$W/dump"
fi

# ---- a file written by llama.cpp's own gguf-py (tests/fixtures/gguf/make_fixture.py):
# its metadata read, and every tensor decoded to the bits gguf-py's dequantize gave
FIX=tests/fixtures/gguf
mkdir -p "$W/fixture"
"$TOOL" info $FIX/llamacpp_types.gguf > "$W/fixture_info.txt" 2> "$W/fixture.err"
if grep -q '^kv general.architecture string kimi-linear$' "$W/fixture_info.txt" &&
    grep -q '^kv tokenizer.ggml.tokens array\[3\] of string: a b \\xc4\\xa0the$' "$W/fixture_info.txt" &&
    [ "$(grep -c '^tensor ' "$W/fixture_info.txt")" = 19 ]; then
    echo "PASS gguf_llamacpp_fixture_info (gguf-py's header: metadata and 19 tensors)"
else
    echo "FAIL gguf_llamacpp_fixture_info: $(head -n 1 "$W/fixture.err") $(head -n 3 "$W/fixture_info.txt" | tr '\n' ' ')"
fi
"$TOOL" dequant $FIX/llamacpp_types.gguf "$W/fixture" 2>> "$W/fixture.err"
for want in $FIX/expected/*.f32; do
    name=$(basename "$want" .f32)
    $PY -c "
import os, sys, numpy as np
got = np.fromfile(sys.argv[1], '<u4') if os.path.exists(sys.argv[1]) else None
want = np.fromfile(sys.argv[2], '<u4')
if got is None:
    print('FAIL gguf_llamacpp_fixture_%s: the reader wrote no %s' % (sys.argv[3], sys.argv[1]))
elif got.shape != want.shape:
    print('FAIL gguf_llamacpp_fixture_%s: %d weights, gguf-py %d' % (sys.argv[3], got.size, want.size))
elif (got != want).any():
    i = int(np.argmax(got != want))
    print('FAIL gguf_llamacpp_fixture_%s: weight %d is %r, gguf-py %r' % (sys.argv[3], i, got[i:i+1].view('<f4')[0], want[i:i+1].view('<f4')[0]))
else:
    print('PASS gguf_llamacpp_fixture_%s (%d weights bit-equal to gguf-py)' % (sys.argv[3], got.size))
" "$W/fixture/$name.f32" "$want" "$name" 2>&1 | tail -n 1
done

# gguf-py's own split set (split_max_tensors=2): opened from its last part
n=$("$TOOL" info $FIX/llamacpp_split-00003-of-00003.gguf 2> "$W/fixture_split.err" | grep -c '^tensor t[0-5] Q8_0 32,2 68$')
if [ "$n" = 6 ]; then echo "PASS gguf_llamacpp_split_set (6 tensors over gguf-py's 3 parts)"
else echo "FAIL gguf_llamacpp_split_set: $n of 6 tensors: $(head -n 1 "$W/fixture_split.err")"; fi

# ---- split sets
$PY $REF write-split "$W/split" model 3
n=$("$TOOL" info "$W/split/model-00002-of-00003.gguf" 2> "$W/split.err" | grep -c '^tensor ')
arch=$("$TOOL" info "$W/split/model-00002-of-00003.gguf" 2>/dev/null | grep -c '^kv general.architecture string kimi-linear$')
if [ "$n" = 6 ] && [ "$arch" = 1 ]; then
    echo "PASS gguf_split_set_by_any_part (6 tensors over 3 parts, part 1's metadata)"
else
    echo "FAIL gguf_split_set_by_any_part: $n tensors, architecture lines $arch: $(head -n 1 "$W/split.err")"
fi
n=$("$TOOL" info "$W/split" 2> "$W/split.err" | grep -c '^tensor ')
if [ "$n" = 6 ]; then echo "PASS gguf_split_folder"
else echo "FAIL gguf_split_folder: $n tensors: $(head -n 1 "$W/split.err")"; fi

mkdir -p "$W/split_missing" "$W/split_foreign"
cp "$W/split/model-00001-of-00003.gguf" "$W/split/model-00002-of-00003.gguf" "$W/split_missing/"
"$TOOL" info "$W/split_missing/model-00001-of-00003.gguf" > /dev/null 2> "$W/missing.err"
rc=$?
if [ $rc = 1 ] && grep -q 'model-00003-of-00003.gguf: part 3 of the 3-part split set is missing' "$W/missing.err"; then
    echo "PASS gguf_split_missing_part"
else
    echo "FAIL gguf_split_missing_part: exit $rc: $(head -n 1 "$W/missing.err")"
fi
cp "$W/split/model-00001-of-00003.gguf" "$W/split_foreign/"
cp "$W/split/model-00003-of-00003.gguf" "$W/split_foreign/model-00002-of-00003.gguf"
cp "$W/split/model-00003-of-00003.gguf" "$W/split_foreign/"
"$TOOL" info "$W/split_foreign" > /dev/null 2> "$W/foreign.err"
rc=$?
if [ $rc = 1 ] && grep -q 'model-00002-of-00003.gguf: named part 2 of 3, but its metadata says split.no 2' "$W/foreign.err"; then
    echo "PASS gguf_split_foreign_part"
else
    echo "FAIL gguf_split_foreign_part: exit $rc: $(head -n 1 "$W/foreign.err")"
fi

# ---- bad input: each defect refused with exit 1 and one line naming the
# file and saying what is wrong (the reference gives the words to find)
$PY $REF write-corrupt "$W/corrupt" > "$W/corrupt/cases.txt"
TAB=$(printf '\t')
while IFS="$TAB" read -r name words; do
    f="$W/corrupt/$name.gguf"
    "$TOOL" info "$f" > /dev/null 2> "$W/corrupt/$name.err"
    rc=$?
    lines=$(wc -l < "$W/corrupt/$name.err")
    if [ $rc = 1 ] && [ "$lines" = 1 ] && grep -q "^$f: " "$W/corrupt/$name.err" &&
        grep -qF "$words" "$W/corrupt/$name.err"; then
        echo "PASS gguf_refuses_$name ($(cut -c1-160 "$W/corrupt/$name.err"))"
    else
        echo "FAIL gguf_refuses_$name: exit $rc, $lines lines, wanted '$words': $(head -n 2 "$W/corrupt/$name.err")"
    fi
done < "$W/corrupt/cases.txt"
