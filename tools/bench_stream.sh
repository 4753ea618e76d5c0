#!/bin/sh
# bench_stream.sh - streamed decode of one model at a few budgets, two k3
# builds side by side in one run (before/after a change to the reader or
# the scheduling of reads), against the disk's rate measured in the same
# run. A measurement, not a test.
#
#   MODEL=/tmp/k3-16g BUDGETS="1G 2G" REPEAT=2 K3_BASE=/tmp/k3-base/k3 \
#       sh tools/bench_stream.sh [extra k3 bench args]
#
# Each (budget, side) runs REPEAT times, the sides taking turns; the fastest
# run of each is printed: decode s/token, the breakdown's ring wait
# (wait_trunk) and expert wait per token, MB read per token, and the ratio
# to the I/O floor (bytes per token over the disk's best rate below).
# The disk: tools/disk_rate.py on the model's largest file, O_DIRECT 4 MiB
# reads at depth 4 and 8 (k3's reader: 4 threads by default, --io-depth).
cd "$(dirname "$0")/.." || exit 1
MODEL=${MODEL:-/tmp/k3-16g}
BUDGETS=${BUDGETS:-1G 2G}
REPEAT=${REPEAT:-2}
TOKENS=${TOKENS:-8}
K3=${K3:-./k3}
K3_BASE=${K3_BASE:-/tmp/k3-base/k3}
OUT=${OUT:-tests/out/bench_stream}
PY=/usr/bin/python3
mkdir -p $OUT
rm -f $OUT/*.json
big=$(ls -S "$MODEL"/*.safetensors "$MODEL"/*.gguf "$MODEL" 2>/dev/null | head -1)
[ -f "$big" ] || { echo "bench_stream.sh: $MODEL: no model file" >&2; exit 1; }
d4=$(nice $PY tools/disk_rate.py "$big" 4096 4 3)
d8=$(nice $PY tools/disk_rate.py "$big" 4096 8 3)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $MODEL, tokens $TOKENS, REPEAT $REPEAT, $(uptime | sed 's/.*load/load/')"
echo "# disk $d4 GB/s at depth 4, $d8 GB/s at depth 8 (4 MiB O_DIRECT reads of $(basename "$big"))"
echo "# base $K3_BASE, new $K3; extra args: $*"
for budget in $BUDGETS; do
    r=0
    while [ $r -lt $REPEAT ]; do
        r=$((r + 1))
        for side in base new; do
            bin=$K3; [ $side = base ] && bin=$K3_BASE
            nice $bin bench "$MODEL" --mem $budget --tokens $TOKENS --prompt-tokens 8 --no-draft --no-token-by-token \
                --no-warm-prompt --no-resident --json "$@" \
                > $OUT/$budget.$side.$r.json 2> $OUT/$budget.$side.err || echo "# $budget $side run $r failed: $(tail -1 $OUT/$budget.$side.err)"
        done
    done
done
echo "# load after the runs: $(uptime | sed 's/.*average: //')"
$PY - "$OUT" "$BUDGETS" "$d4" "$d8" <<'EOF'
import glob, json, sys
out, budgets, d4, d8 = sys.argv[1], sys.argv[2].split(), float(sys.argv[3]), float(sys.argv[4])
disk = max(d4, d8) * 1e9
print('| budget | side | s/token (fastest; all) | ring wait s/token (share) | expert wait s/token | MB read/token | device GB/s | x I/O floor |')
print('|---|---|---|---|---|---|---|---|')
for b in budgets:
    for side in ('base', 'new'):
        runs = []
        for p in sorted(glob.glob('%s/%s.%s.*.json' % (out, b, side))):
            try:
                runs.append(json.load(open(p)))
            except ValueError:
                pass
        if not runs:
            print('| %s | %s | failed | | | | | |' % (b, side))
            continue
        best = min(runs, key=lambda d: d['decode_s_per_token'])
        s, br = best['decode_s_per_token'], best['breakdown_s_per_token']
        by = best['bytes_read_per_token']['total']
        dev = (best.get('device_gbps') or 0) * 1e9 or disk
        print('| %s | %s | %.3f (%s) | %.3f (%.0f%%) | %.3f | %.0f | %.2f | %.2f |' % (
            b, side, s, ' '.join('%.3f' % d['decode_s_per_token'] for d in runs), br['wait_trunk'],
            100 * br['wait_trunk'] / s, br['wait_experts'], by / 1e6, dev / 1e9, s / (by / dev) if by else 0))
EOF
