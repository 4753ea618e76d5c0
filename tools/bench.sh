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

# ---------------------------------------------------------------------------
# MODEL DECODE SPEED (tok/s) -- placeholder for the lead to extend.
# Runs `k3 bench` on each model directory listed in $K3_BENCH_MODELS (default:
# models/small models/demo) that exists, if the k3 binary has a bench command.
# Guarded so that `make bench` works on a checkout without models.
# ---------------------------------------------------------------------------
models=${K3_BENCH_MODELS:-"models/small models/demo"}
if [ -x "$K3BIN" ] && "$K3BIN" help 2>/dev/null | grep -q '^ *bench '; then
    for m in $models; do
        if [ -f "$m/config.json" ]; then
            echo
            echo "== model: $K3BIN bench $m"
            "$K3BIN" bench "$m" || echo "bench: k3 bench $m exited with status $?"
        fi
    done
else
    echo
    echo "(model decode benchmark skipped: $K3BIN has no bench command yet)"
fi
exit 0
