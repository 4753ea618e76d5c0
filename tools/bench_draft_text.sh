#!/bin/sh
# bench_draft_text.sh - speculative decoding on repetitive text, side by
# side: `k3 run MODEL --chat` on a prompt that asks to repeat a paragraph
# given in it, and on one that asks to re-emit a given code block with one
# change, each decoded with --draft none and --draft ngram, alternating,
# ROUNDS times (greedy). Prints per prompt: decode tokens/s of both, their
# ratio (of the totals, and the median of the rounds' ratios), the same per
# CPU second of the process (steadier than the wall clock on a shared
# machine), draft_accept_rate (draft tokens kept / drafted), tokens_per_pass,
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
    # k3 run's line: "generated N tokens, W tok/s (C per CPU second)[; drafts
    # K of D kept, P tokens/pass]"; W and C count the N - 1 tokens after the
    # first one. One line per round and mode: round mode n wall cpu kept drafted
    r=0
    : > "$OUT/$name.runs"
    while [ $r -lt "$ROUNDS" ]; do
        for d in none ngram; do
            sed -n 's/.*generated \([0-9]*\) tokens, \([0-9.]*\) tok\/s (\([0-9.]*\) per CPU second)\(; drafts \([0-9]*\) of \([0-9]*\) kept\)\{0,1\}.*/\1 \2 \3 \5 \6/p' \
                "$OUT/$name.$d.$r.err" | awk -v r=$r -v d=$d '{ printf "%s %s %s %s %s %d %d\n", r, d, $1, $2, $3, $4, $5 }' \
                >> "$OUT/$name.runs"
        done
        r=$((r + 1))
    done
    generated=$(grep -o 'generated [0-9]* tokens' "$OUT/$name.none.0.err" | head -1)
    # totals per mode (tokens / seconds), and the median of each round's
    # ngram/none ratio (the two runs are back to back: a burst of other work
    # on the machine moves the median least)
    awk -v name="$name" -v gen="$generated" -v rounds="$ROUNDS" -v same="$same" '
        function median(v, n,    i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        $3 > 1 && $4 > 0 && $5 > 0 {
            tok[$2] += $3 - 1; wall[$2] += ($3 - 1) / $4; cpu[$2] += ($3 - 1) / $5
            w[$2, $1] = $4; c[$2, $1] = $5
            if ($2 == "ngram") { kept += $6; drafted += $7 }
        }
        END {
            n = 0
            for (r = 0; r < rounds; r++)
                if (w["none", r] > 0 && w["ngram", r] > 0) { n++; rw[n] = w["ngram", r] / w["none", r]; rc[n] = c["ngram", r] / c["none", r] }
            if (!n || !wall["none"] || !wall["ngram"]) { printf "%-8s no figures (see the .err files)\n", name; exit }
            printf "%-8s %s, %d rounds alternating: none %.1f tok/s, ngram %.1f tok/s, ratio %.2fx (median of the rounds %.2fx); ",
                name, gen, rounds, tok["none"] / wall["none"], tok["ngram"] / wall["ngram"],
                (tok["ngram"] / wall["ngram"]) / (tok["none"] / wall["none"]), median(rw, n)
            printf "per CPU second none %.1f, ngram %.1f, ratio %.2fx (median %.2fx); ",
                tok["none"] / cpu["none"], tok["ngram"] / cpu["ngram"], (tok["ngram"] / cpu["ngram"]) / (tok["none"] / cpu["none"]), median(rc, n)
            printf "draft_accept_rate %.3f (%d of %d), tokens_per_pass %.2f; answers %s\n",
                (drafted > 0 ? kept / drafted : 0), kept, drafted, tok["ngram"] / (tok["ngram"] - kept) , same
        }' "$OUT/$name.runs"
}

echo "== repetitive text: $K3BIN run $MODEL --chat -n $TOKENS --threads $THREADS, --draft none vs ngram (load: $(cut -d' ' -f1-3 /proc/loadavg))"
measure repeat "Repeat this: $PARAGRAPH"
measure code "Repeat this code with total renamed to sum:

$CODE"
exit 0
