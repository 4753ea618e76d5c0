#!/bin/sh
# bench.sh - `make bench`: kernel throughput against memory bandwidth, then
# (when a model and `k3 bench` are available) end-to-end decode speed.
# Figures, not tests: nothing here fails the build. Extra arguments (e.g.
# --json, --quick) are passed to bench_kernels.
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
K3BIN=${K3BIN:-./k3}

busy=$(awk '/^procs_running/ {print $2 - 1}' /proc/stat 2>/dev/null)
if [ -n "$busy" ] && [ "$busy" -gt 0 ]; then
    echo "note: $busy other runnable process(es) right now; bandwidth figures will be noisy"
fi

echo "== kernels: $BUILD/tools/bench_kernels $*"
if [ -x "$BUILD/tools/bench_kernels" ]; then
    "$BUILD/tools/bench_kernels" "$@"
else
    echo "bench: $BUILD/tools/bench_kernels not built (run make)" >&2
fi

# the quantizers of `k3 pack --trunk/--experts` (one thread per type)
case " $* " in *" --quick "*) qb=--quick ;; *) qb= ;; esac
echo "== quantizers: $BUILD/tools/quant_bench $qb"
if [ -x "$BUILD/tools/quant_bench" ]; then "$BUILD/tools/quant_bench" $qb
else echo "bench: $BUILD/tools/quant_bench not built (run make)" >&2; fi

# ---------------------------------------------------------------------------
# Model decode speed, fully resident and streamed: `k3 bench` on generated
# models (made here when absent; models/ is git-ignored). small and demo
# always; the 3.9 GB K3-shaped k3-sim when K3_BENCH_SIM=1.
# ---------------------------------------------------------------------------
[ -x "$K3BIN" ] || { echo "bench: $K3BIN not built (run make)"; exit 0; }
mkdir -p models
for p in small demo; do
    [ -f models/$p/config.json ] || "$K3BIN" gen models/$p --preset $p >/dev/null 2>&1
done
if [ "${K3_BENCH_SIM:-0}" = 1 ] && [ ! -f models/k3-sim/config.json ]; then
    "$K3BIN" gen models/k3-sim --preset k3-sim --shards 4 >/dev/null 2>&1
fi
for m in models/small models/demo models/k3-sim; do
    [ -f "$m/config.json" ] || continue
    echo
    echo "== $m, fully resident: $K3BIN bench $m --tokens 32 --prompt-tokens 64 --no-probe"
    "$K3BIN" bench "$m" --tokens 32 --prompt-tokens 64 --no-probe --no-resident 2>/dev/null | head -2
done
# Kimi K3 at its real widths (2 layers, ~24.5 GB: generated only when asked,
# K3_BENCH_REAL=1, and when the disk has 40 GB free); per-token costs at the
# real widths, next to k3 plan's prediction for the same budget.
if [ "${K3_BENCH_REAL:-0}" = 1 ] && [ ! -f models/k3-real-widths/config.json ]; then
    free_gb=$(df -P -k models | awk 'NR == 2 {print int($4 / 1048576)}')
    if [ "$free_gb" -ge 40 ]; then
        "$K3BIN" gen models/k3-real-widths --preset k3-real-widths --shards 4 >/dev/null 2>&1
    else
        echo "bench: k3-real-widths needs ~25 GB and $free_gb GB are free; skipped"
    fi
fi
if [ -f models/k3-real-widths/config.json ]; then
    for mem in 6G 10G; do
        echo
        echo "== models/k3-real-widths under --mem $mem (and k3 plan's prediction)"
        "$K3BIN" bench models/k3-real-widths --mem $mem --tokens 8 --prompt-tokens 32 --no-resident 2>/dev/null
        "$K3BIN" plan models/k3-real-widths --mem $mem --prompt 32 2>/dev/null | tail -3
    done
fi
# Speculative decoding, side by side in one run, alternating (k3 bench's
# draft pass): --draft none, --draft ngram and an oracle draft (the plain
# run's own next tokens, i.e. a model that repeats the paragraph it was
# given) on a repetitive prompt; demo fully resident and with its trunk
# streaming through the ring (--mem 100M). Random weights do not repeat
# text, so ngram finds little to draft there: the oracle shows what a pass
# of verified drafts is worth. A trained model (models/k3-mini) when present.
for m in models/demo models/k3-mini; do
    [ -f "$m/config.json" ] || continue
    for mem in "" "--mem 100M"; do
        echo
        echo "== speculative decoding: $K3BIN bench $m $mem --tokens 32 --prompt-tokens 48 --draft-rounds 3 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
        "$K3BIN" bench "$m" $mem --tokens 32 --prompt-tokens 48 --draft-rounds 3 --no-probe --no-resident 2>/dev/null |
            grep -E '^(decode|draft|verify) '
    done
done
# The same on text a user would send: a prompt asking to repeat a paragraph
# given in it, and one asking to re-emit a code block, through k3 run
# --chat with --draft none and --draft ngram alternating (same answers
# asserted, tokens/s, ratio, draft_accept_rate, tokens_per_pass). Trained
# models only (random weights do not repeat text): models/k3-mini, and any
# in K3_BENCH_TEXT_MODELS (space-separated directories).
for m in models/k3-mini ${K3_BENCH_TEXT_MODELS:-}; do
    [ -f "$m/config.json" ] || continue
    echo
    sh tools/bench_draft_text.sh "$m" 3 256
done
if [ -f models/demo/config.json ]; then
    for mem in 300M 150M; do
        echo
        echo "== models/demo streamed under --mem $mem"
        "$K3BIN" bench models/demo --mem $mem --tokens 32 --prompt-tokens 64 2>/dev/null
    done
fi
exit 0
