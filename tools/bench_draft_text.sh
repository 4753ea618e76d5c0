#!/bin/sh
# bench_draft_text.sh - speculative decoding on repetitive text, side by
# side: `k3 run MODEL --chat` on a prompt that asks to repeat a paragraph
# given in it, and on one that asks to re-emit a given code block with one
# change, each decoded with --draft none and --draft ngram, alternating,
# ROUNDS times (greedy). Prints per prompt: decode tokens/s of both, their
# ratio, draft_accept_rate (draft tokens kept / drafted), tokens_per_pass,
# and whether the two answers are identical (they must be: speculative
# decoding is exact). Figures, not a test.
#
#   sh tools/bench_draft_text.sh MODEL [ROUNDS] [TOKENS]
#
# THREADS (default 1: the measurements are made on a shared machine, and one
# compute thread is the setting that does not fight the other work for cores)
# and K3BIN (default ./k3) from the environment.
cd "$(dirname "$0")/.." || exit 1
MODEL=$1
ROUNDS=${2:-3}
TOKENS=${3:-128}
K3BIN=${K3BIN:-./k3}
THREADS=${THREADS:-1}
OUT=${OUT:-tests/out/bench_draft_text}
[ -f "$MODEL/config.json" ] || { echo "bench_draft_text: no model at $MODEL"; exit 0; }
mkdir -p "$OUT"

PARAGRAPH="The harbour lay quiet in the grey morning light. The boats rocked against the old stone wall, \
the gulls called over the water, and the first fishermen carried their nets down to the shore."
CODE='int sum_of(const int *a, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += a[i];
    return total;
}'

# one prompt: ROUNDS x (none, ngram), then the figures
measure() {
    name=$1
    prompt=$2
    rm -f "$OUT/$name".*.err
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        for d in none ngram; do
            "$K3BIN" run "$MODEL" --chat -p "$prompt" -n "$TOKENS" --threads "$THREADS" --draft $d \
                > "$OUT/$name.$d.$r.txt" 2> "$OUT/$name.$d.$r.err"
        done
        r=$((r + 1))
    done
    same=identical
    r=0
    while [ $r -lt "$ROUNDS" ]; do
        cmp -s "$OUT/$name.none.$r.txt" "$OUT/$name.ngram.$r.txt" || same="DIFFER (see $OUT)"
        cmp -s "$OUT/$name.none.0.txt" "$OUT/$name.none.$r.txt" || same="DIFFER between rounds (see $OUT)"
        r=$((r + 1))
    done
    # k3 run's line: "generated N tokens, X tok/s[; drafts K of D kept, P tokens/pass]"
    # (X counts the tokens after the first one: N - 1 in (N - 1) / X seconds)
    cat "$OUT/$name".none.*.err | awk -v tag=none '/generated/ {
            for (i = 1; i <= NF; i++) { if ($i == "generated") n = $(i + 1); if ($i ~ /^tok\/s/) v = $(i - 1) }
            if (v > 0 && n > 1) { tok += n - 1; s += (n - 1) / v } }
        END { printf "%s %d %.6f\n", tag, tok, s }' > "$OUT/$name.none.sum"
    cat "$OUT/$name".ngram.*.err | awk -v tag=ngram '/generated/ {
            for (i = 1; i <= NF; i++) {
                if ($i == "generated") n = $(i + 1)
                if ($i ~ /^tok\/s/) v = $(i - 1)
                if ($i == "drafts") { kept += $(i + 1); drafted += $(i + 3) }
                if ($i ~ /^tokens\/pass/) { tpp += $(i - 1); runs++ } }
            if (v > 0 && n > 1) { tok += n - 1; s += (n - 1) / v } }
        END { printf "%s %d %.6f %d %d %.3f\n", tag, tok, s, kept, drafted, runs ? tpp / runs : 1 }' > "$OUT/$name.ngram.sum"
    read -r _ tok_none s_none < "$OUT/$name.none.sum"
    read -r _ tok_ngram s_ngram kept drafted tpp < "$OUT/$name.ngram.sum"
    generated=$(grep -o 'generated [0-9]* tokens' "$OUT/$name.none.0.err" | head -1)
    awk -v name="$name" -v tn="$tok_none" -v sn="$s_none" -v tg="$tok_ngram" -v sg="$s_ngram" -v k="$kept" \
        -v d="$drafted" -v tpp="$tpp" -v same="$same" -v gen="$generated" -v rounds="$ROUNDS" 'BEGIN {
        a = sn > 0 ? tn / sn : 0; b = sg > 0 ? tg / sg : 0
        printf "%-8s %s, %d rounds alternating: none %.2f tok/s, ngram %.2f tok/s, ratio %.2fx; ", name, gen, rounds, a, b, (a > 0 ? b / a : 0)
        printf "draft_accept_rate %.3f (%d of %d), tokens_per_pass %.2f; answers %s\n", (d > 0 ? k / d : 0), k, d, tpp, same }'
}

echo "== repetitive text: $K3BIN run $MODEL --chat -n $TOKENS --threads $THREADS, --draft none vs ngram (load: $(cut -d' ' -f1-3 /proc/loadavg))"
measure repeat "Repeat this: $PARAGRAPH"
measure code "Repeat this code with total renamed to sum:

$CODE"
exit 0
