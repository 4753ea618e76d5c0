#!/bin/sh
# memory-ladder.sh MODEL [BUDGET...] - run `k3 bench` under a cgroup memory
# limit equal to each budget, swap off, and print a table (Markdown).
#
# The limit is the same number as --mem, so the run proves the budget is
# hard: an RSS (page cache included, as the cgroup charges it) above it is an
# OOM kill, reported as such. Supports cgroup v1 (memory controller, as on
# this machine), cgroup v2 and, failing both, systemd-run. Needs root.
# Budgets default to a ladder from the model's minimum to fully resident.
# Environment: K3 (binary, default ./k3), TOKENS (32), PROMPT (64).
set -u
MODEL=${1:?usage: memory-ladder.sh MODEL [BUDGET...]}
shift
K3=${K3:-./k3}
TOKENS=${TOKENS:-32}
PROMPT=${PROMPT:-64}
PY=/usr/bin/python3

if [ $# -eq 0 ]; then
    MIN=$($K3 bench "$MODEL" --mem 1M --no-probe 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
    SIZE=$(du -sm "$MODEL" | cut -f1)
    [ -n "$MIN" ] || { echo "cannot find the minimum budget of $MODEL" >&2; exit 1; }
    set -- $((MIN + 2))M $((MIN + (SIZE - MIN) / 8))M $((MIN + (SIZE - MIN) / 4))M $((MIN + (SIZE - MIN) / 2))M $((SIZE + 200))M
fi

# the resident decode time, measured once outside any limit
RES=$($K3 bench "$MODEL" --tokens $TOKENS --prompt-tokens $PROMPT --json --no-probe 2>/dev/null |
      $PY -c "import json,sys; print(json.load(sys.stdin)['resident_s_per_token'] or 0)" 2>/dev/null)
[ -n "$RES" ] || RES=0

to_bytes() { $PY -c "
s='$1'; m={'K':1<<10,'M':1<<20,'G':1<<30}
print(int(float(s[:-1])*m[s[-1].upper()]) if s[-1].upper() in m else int(s))"; }

# run_limited BYTES cmd... : run cmd in a fresh memory cgroup limited to BYTES, swap off
run_limited() {
    bytes=$1; shift
    name=k3ladder$$
    if [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then
        cg=/sys/fs/cgroup/memory/$name
        mkdir -p $cg
        echo $bytes > $cg/memory.limit_in_bytes
        [ -f $cg/memory.memsw.limit_in_bytes ] && echo $bytes > $cg/memory.memsw.limit_in_bytes
        echo 0 > $cg/memory.swappiness 2>/dev/null
        sh -c "echo \$\$ > $cg/cgroup.procs && exec \"\$@\"" sh "$@"
        rc=$?
        grep -o 'oom_kill [0-9]*' $cg/memory.oom_control 2>/dev/null | grep -o '[0-9]*$' > $OOMF || echo 0 > $OOMF
        rmdir $cg 2>/dev/null
    elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        cg=/sys/fs/cgroup/$name
        mkdir -p $cg
        echo $bytes > $cg/memory.max
        echo 0 > $cg/memory.swap.max 2>/dev/null
        sh -c "echo \$\$ > $cg/cgroup.procs && exec \"\$@\"" sh "$@"
        rc=$?
        grep -o 'oom_kill [0-9]*' $cg/memory.events 2>/dev/null | grep -o '[0-9]*$' > $OOMF || echo 0 > $OOMF
        rmdir $cg 2>/dev/null
    else
        systemd-run --scope --quiet -p MemoryMax=$bytes -p MemorySwapMax=0 "$@"
        rc=$?
        echo unknown > $OOMF
    fi
    return $rc
}

OOMF=$(mktemp)
trap 'rm -f $OOMF' EXIT
echo "| budget | decode s/token | tok/s | prefill tok/s | MB read/token | read GB/s | device GB/s | true hit | peak RSS MiB | floor ratio | OOM |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for b in "$@"; do
    bytes=$(to_bytes $b)
    out=$(run_limited $bytes $K3 bench "$MODEL" --mem $b --tokens $TOKENS --prompt-tokens $PROMPT --json \
          --no-resident --resident-s-per-token $RES 2>/dev/null)
    rc=$?
    OOM=$(cat $OOMF 2>/dev/null); [ -n "$OOM" ] || OOM=0
    echo "$out" | $PY -c "
import json, sys
try:
    d = json.loads(sys.stdin.read())
except Exception:
    print('| $b | failed (exit $rc) | | | | | | | | | $OOM |'); sys.exit()
t = d['bytes_read_per_token']['total'] / 1e6
print('| $b | %.4f | %.2f | %.1f | %.1f | %.2f | %.2f | %.1f%% | %.0f | %.2f | $OOM |' % (
    d['decode_s_per_token'], d['decode_tok_per_s'], d['prefill_tokens_per_s'], t, d['read_gbps'],
    d['device_gbps'], 100 * d['true_hit_rate'], d['peak_rss_bytes'] / 1048576, d['floor_ratio']))
"
done
