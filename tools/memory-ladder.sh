#!/bin/sh
# memory-ladder.sh MODEL [BUDGET...] - run `k3 bench` under a cgroup memory
# limit equal to each budget, swap off, and print a table (Markdown).
#
# The limit is the same number as --mem, so the run proves the budget is
# hard: an RSS (page cache included, as the cgroup charges it) above it is an
# OOM kill, reported as such. Supports cgroup v1 (memory controller, as on
# this machine), cgroup v2 and, failing both, systemd-run. Needs root.
# Budgets default to a ladder from the model's minimum to fully resident.
# Environment: K3 (binary, default ./k3), TOKENS (32), PROMPT (64),
# DRAFT_ROUNDS (rounds of k3 bench's speculative pass, default 1).
# Per rung: the first prompt after opening (cold: reads and first touch of
# every arena page) and a second one on the warmed model (warm), prompt
# bytes against the least possible, decode with and without n-gram drafts
# (and the oracle draft's ceiling), hit rate, peak RSS and floor ratio.
set -u
MODEL=${1:?usage: memory-ladder.sh MODEL [BUDGET...]}
shift
K3=${K3:-./k3}
TOKENS=${TOKENS:-32}
PROMPT=${PROMPT:-64}
DRAFT_ROUNDS=${DRAFT_ROUNDS:-1}
PY=/usr/bin/python3

if [ $# -eq 0 ]; then
    MIN=$($K3 bench "$MODEL" --mem 1M --no-probe 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*')
    SIZE=$(du -sm "$MODEL" | cut -f1)
    [ -n "$MIN" ] || { echo "cannot find the minimum budget of $MODEL" >&2; exit 1; }
    set -- $((MIN + 2))M $((MIN + (SIZE - MIN) / 8))M $((MIN + (SIZE - MIN) / 4))M $((MIN + (SIZE - MIN) / 2))M $((SIZE + 200))M
fi

# the resident decode time, measured once outside any limit
RES=$($K3 bench "$MODEL" --tokens $TOKENS --prompt-tokens $PROMPT --json --no-probe --no-token-by-token --no-draft \
      --no-warm-prompt 2>/dev/null |
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
echo "| budget | prefill s/token cold / warm | prefill MB / least | decode s/token (CPU) | ngram draft: speedup, kept, tokens/pass | oracle speedup | MB read/token | read GB/s | device GB/s | true hit | peak RSS MiB | floor ratio | OOM |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for b in "$@"; do
    bytes=$(to_bytes $b)
    out=$(run_limited $bytes $K3 bench "$MODEL" --mem $b --tokens $TOKENS --prompt-tokens $PROMPT --json \
          --no-resident --resident-s-per-token $RES --no-token-by-token --draft-rounds $DRAFT_ROUNDS 2>/dev/null)
    rc=$?
    OOM=$(cat $OOMF 2>/dev/null); [ -n "$OOM" ] || OOM=0
    echo "$out" | $PY -c "
import json, sys
try:
    d = json.loads(sys.stdin.read())
except Exception:
    print('| $b | failed (exit $rc) | | | | | | | | | | | $OOM |'); sys.exit()
t = d['bytes_read_per_token']['total'] / 1e6
warm = '%.4f' % d['prefill_warm_s_per_token'] if d.get('prefill_warm_s_per_token') is not None else 'n/a'
dr = d.get('draft') or {}
ng, orc = dr.get('ngram'), dr.get('oracle')
ngram = '%.2fx, %.0f%%, %.2f' % (ng['speedup'], 100 * ng['accept_rate'], ng['tokens_per_pass']) if ng else 'n/a'
oracle = '%.2fx' % orc['speedup'] if orc else 'n/a'
print('| $b | %.4f / %s | %.0f / %.0f | %.4f (%.4f) | %s | %s | %.1f | %.2f | %s | %.1f%% | %.0f | %.2f | $OOM |' % (
    d['prefill_s_per_token'], warm, d['prefill_bytes'] / 1e6, d['prefill_bytes_min'] / 1e6,
    d['decode_s_per_token'], d['cpu_s_per_token']['decode'], ngram, oracle, t, d['read_gbps'],
    '%.2f' % d['device_gbps'] if d['device_gbps'] else 'n/a', 100 * d['true_hit_rate'],
    d['peak_rss_bytes'] / 1048576, d['floor_ratio']))
"
done
