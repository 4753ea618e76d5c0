#!/bin/sh
# bench_floor.sh - resident decode against the memory floor (issue 28), side
# by side in one run: each run of `k3 bench MODEL --activations PATH` comes
# right after `bench_kernels --experts`, whose best 2-thread read of 1 GiB
# (at least 4x the L3) that minute gives the floor: the bytes one token
# touches (the whole trunk and top_k experts of each MoE layer, from
# `k3 plan --json`) over that bandwidth. A measurement, not a test.
#
#   sh tools/bench_floor.sh            MODEL=/tmp/k3-16g, PATHS="q8 f32", REPEAT=4
#
# Prints one row a run (the paths take turns) and, per path, the fewest,
# median and most times the floor. Environment: MODEL (/tmp/k3-16g), PATHS,
# REPEAT (4), TOKENS (decode steps, 32), K3 (./k3), OUT (tests/out/bench_floor).
cd "$(dirname "$0")/.." || exit 1
MODEL=${MODEL:-/tmp/k3-16g}
PATHS=${PATHS:-q8 f32}
REPEAT=${REPEAT:-4}
TOKENS=${TOKENS:-32}
K3=${K3:-./k3}
OUT=${OUT:-tests/out/bench_floor}
PY=/usr/bin/python3
[ -f "$MODEL/config.json" ] || { echo "bench_floor.sh: $MODEL: no config.json (k3 gen $MODEL --preset k3-16g)" >&2; exit 1; }
[ -x build/tools/bench_kernels ] || { echo "bench_floor.sh: build/tools/bench_kernels not built (make)" >&2; exit 1; }
mkdir -p $OUT
: > $OUT/runs.txt
touched=$($K3 plan "$MODEL" --json 2>/dev/null | $PY -c "
import json,sys
p=json.load(sys.stdin)
print(int(p['trunk_bytes'] + p['head_bytes'] + p['moe_layers'] * p['top_k'] * p['expert_slot_bytes']))") ||
    { echo "bench_floor.sh: k3 plan $MODEL failed" >&2; exit 1; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $MODEL, $($K3 --version | grep '^kernels'), tokens $TOKENS"
echo "# a token touches $($PY -c "print(round($touched / 1e9, 3))") GB (trunk + top_k experts a MoE layer)"
echo "| run | path | load | read GB/s (2 threads) | floor s | s/token | x floor |"
echo "|---|---|---|---|---|---|---|"
r=0
while [ $r -lt $REPEAT ]; do
    r=$((r + 1))
    for path in $PATHS; do
        # the best 2-thread read, before or after the expert waves
        bw=$(build/tools/bench_kernels --experts 2>/dev/null |
            sed -n 's/.*memory read bandwidth.* \([0-9.]*\) GB\/s (2 threads).*/\1/p' | sort -n | tail -1)
        load=$(cut -d' ' -f1 /proc/loadavg)
        $K3 bench "$MODEL" --tokens $TOKENS --prompt-tokens 1 --activations $path --no-draft \
            --no-token-by-token --no-probe --no-warm-prompt --no-resident --json > $OUT/$path-$r.json 2>$OUT/$path-$r.err ||
            { echo "bench_floor.sh: k3 bench failed: $(tail -1 $OUT/$path-$r.err)" >&2; exit 1; }
        s=$($PY -c "import json; print(json.load(open('$OUT/$path-$r.json'))['decode_s_per_token'])")
        $PY -c "
bw, s, b = float('$bw'), float('$s'), $touched
floor = b / (bw * 1e9)
print('| $r | $path | $load | %.2f | %.4f | %.4f | %.2f |' % (bw, floor, s, s / floor))" | tee -a $OUT/runs.txt
    done
done
echo
for path in $PATHS; do
    grep "| $path |" $OUT/runs.txt | $PY -c "
import sys, statistics
x = sorted(float(l.split('|')[7]) for l in sys.stdin)
print('$path: %.2f-%.2fx the floor, median %.2fx, %d of %d runs at or under 1.25x' %
      (x[0], x[-1], statistics.median(x), sum(v <= 1.25 for v in x), len(x)))"
done
