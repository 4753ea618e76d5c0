#!/bin/sh
# logits_compare.sh OLD_K3 NEW_K3 - the acceptance check of a refactor: the
# logits of `k3 eval` from two builds are byte-identical on every preset (tiny,
# small, k3-tiny, demo, and a packed copy) fully resident and at several
# --mem budgets down to the smallest one the planner accepts. Not part of
# `make test` (it needs a second build); models go to tests/out/logits/.
cd "$(dirname "$0")/.." || exit 1
OLD=${1:?usage: logits_compare.sh OLD_K3 NEW_K3}
NEW=${2:?usage: logits_compare.sh OLD_K3 NEW_K3}
OUT=tests/out/logits
mkdir -p $OUT
IDS="1 5 9 200 17 3 99 42 7 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35"

# compare NAME ARGS...: eval with both builds, cmp the logits.
compare() {
    name=$1
    shift
    compare_dirs "$name" "$1" "$@"
}

# compare_dirs NAME OLD_MODEL NEW_MODEL ARGS...: the same, each build on its own model directory.
compare_dirs() {
    name=$1 old_model=$2 new_model=$3
    shift 3
    $OLD eval $old_model "$@" --ids "$IDS" --logits $OUT/old.f32 2>$OUT/old.err
    a=$?
    $NEW eval $new_model "$@" --ids "$IDS" --logits $OUT/new.f32 2>$OUT/new.err
    b=$?
    if [ $a -ne 0 ] || [ $b -ne 0 ]; then
        echo "FAIL logits $name: eval exit codes $a (old) $b (new): $(head -c 200 $OUT/new.err)"
    elif cmp -s $OUT/old.f32 $OUT/new.f32; then
        echo "PASS logits $name: byte-identical ($(wc -c < $OUT/new.f32) bytes)"
    else
        echo "FAIL logits $name: logits differ"
    fi
}

for preset in tiny small k3-tiny demo; do
    m=$OUT/$preset
    [ -f $m/config.json ] || $OLD gen $m --preset $preset --seed 3 >/dev/null 2>&1
    compare "$preset resident" $m
    min=$($NEW eval $m --ids "1" --logits $OUT/x.f32 --mem 1M 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
    [ -n "$min" ] || { echo "FAIL logits $preset: no minimum budget reported"; continue; }
    for mem in $min $((min + 8)) $((min * 2)); do
        compare "$preset --mem ${mem}M" $m --mem ${mem}M
    done
done
# The packed copy: each build reads the one it packed itself, since the packed
# format may differ between them (format 2 moved the tables to tables.bin).
p=$OUT/small.packed
rm -rf $p.old $p.new
$OLD pack $OUT/small $p.old >/dev/null 2>&1
$NEW pack $OUT/small $p.new >/dev/null 2>&1
compare_dirs "small packed resident" $p.old $p.new
compare_dirs "small packed --mem 40M" $p.old $p.new --mem 40M
