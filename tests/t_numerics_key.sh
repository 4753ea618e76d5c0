#!/bin/sh
# t_numerics_key.sh - the snapshot-compatibility key (Makefile, K3_NUMERICS_KEY)
# follows every source and header the numeric objects are built from: an edit
# to any of them that survives comment stripping changes `make
# print-numerics-key`, so an old snapshot is never loaded into new numerics.
# A comment edit, or an edit to a header no numeric object includes, leaves
# it alone. Works on a copy of the tree (nothing here is touched).
# Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
TMP=$(mktemp -d /tmp/k3-numkey.XXXXXX)
trap 'rm -rf "$TMP"' EXIT INT TERM
cp -r Makefile engine include tools "$TMP"/
key() { make -s --no-print-directory -C "$TMP" print-numerics-key 2>/dev/null; }
base=$(key)
files=$(make -s --no-print-directory -C "$TMP" print-numerics-files)
n_headers=$(echo "$files" | tr ' ' '\n' | grep -c '\.h$')

# The regression that started this test: the e8m0 decoder's header.
cp "$TMP/engine/kernels/mxfp4.h" "$TMP/saved.h"
sed -i "s/0x00400000u/0x00400001u/" "$TMP/engine/kernels/mxfp4.h"
if cmp -s "$TMP/saved.h" "$TMP/engine/kernels/mxfp4.h"; then
    fail "numerics key: mxfp4.h's k3_e8m0_to_f32" "the probe's edit did not apply"
else
    k=$(key)
    [ -n "$k" ] && [ "$k" != "$base" ] && pass "numerics key: an edit of k3_e8m0_to_f32 (mxfp4.h) changes it" \
        || fail "numerics key: mxfp4.h's k3_e8m0_to_f32" "key $base unchanged"
fi
cp "$TMP/saved.h" "$TMP/engine/kernels/mxfp4.h"

# Every header and source in the list: one line of code appended.
unchanged=""
for f in $files; do
    cp "$TMP/$f" "$TMP/saved"
    printf '\n#define K3_NUMERICS_KEY_PROBE 1\n' >> "$TMP/$f"
    [ "$(key)" = "$base" ] && unchanged="$unchanged $f"
    cp "$TMP/saved" "$TMP/$f"
done
if [ "$n_headers" -ge 10 ] && [ -z "$unchanged" ]; then
    pass "numerics key: each of the $(echo $files | wc -w) numeric files ($n_headers headers) changes it"
else
    fail "numerics key: every numeric file" "$n_headers headers listed; key unchanged by:$unchanged"
fi

# A comment is not numerics; neither is a header no numeric object includes.
printf '\n/* a comment */\n' >> "$TMP/engine/kernels/matvec.c"
printf '\n#define K3_NUMERICS_KEY_PROBE 1\n' >> "$TMP/engine/text/pretokenize.h"
[ "$(key)" = "$base" ] && pass "numerics key: a comment or a non-numeric header leaves it" \
    || fail "numerics key: comments and pretokenize.h" "the key changed"
