#!/bin/sh
# bench_peer_ladder.sh - the memory ladder of a K3-shaped model, k3 against a
# peer or against another packing of the same model, side by side in one run
# (issue 28 "no waiting rung", issue 27's ladder). A measurement, not a test.
#
#   MODE=peer sh tools/bench_peer_ladder.sh     k3 against kimi-k3-in-c
#   MODE=q8   sh tools/bench_peer_ladder.sh     bf16 trunk against a Q8_0 trunk
#
# MODE=peer: k3 bench MODEL --mem M against kimi-k3-in-c (PEER, its packed
# trunk PEER_TRUNK) on the same checkpoint, for M in BUDGETS (1G 2G 4G 8G
# 16G). The peer takes two budgets, trunk and expert cache: it gets the
# trunk first (its own advice, "trunk-first"): trunk = min(M - 0.17 GB, the
# packed trunk), cache = the rest (at least 0.07 GB: the 17 expert slots
# it insists on for top-16), 0.1 GB left for its
# embedding, states and buffers (its peak RSS is printed to check that it
# stayed inside M). Both decode greedily; the peer's ids are checked
# against k3's own greedy choice (k3 eval over the peer's prompt and output:
# each row's argmax must be the peer's next id), once per run.
# MODE=q8: k3 bench MODEL against k3 bench Q8MODEL (`k3 pack MODEL Q8MODEL
# --trunk Q8_0`, the experts stay MXFP4) at BUDGETS (4G 8G 16G), and the
# KL divergence of Q8MODEL against MODEL (k3 eval --save-base / --kl-base)
# on the first KL_TOKENS tokens of KL_TEXT.
#
# Each (budget, side) runs REPEAT times, the sides taking turns; the fastest
# of each side is printed (the machine is shared: the load is printed too).
# In the same run: the memory read bandwidth (bench_kernels, 2 threads) and
# the disk (tools/disk_rate.py: 4 MiB O_DIRECT reads of MODEL's largest
# file, 4 in flight). Columns:
# s/token; ring wait per token (k3 bench's breakdown wait_trunk, the peer's
# "of which overlapped" figure gives none); bytes read per token; the
# ratio to max(I/O floor, memory floor): the I/O floor is the bytes read
# per token at the disk's rate, the memory floor the weights one token
# touches (the whole trunk and top_k experts per MoE layer) at the read
# bandwidth.
#
# Environment: MODEL (/tmp/k3-16g), Q8MODEL (/tmp/k3-16g-q8t), PEER
# (/tmp/ladder_peer/bin/k3), PEER_TRUNK (/tmp/k3-16g-peertrunk, made by the
# peer's own pack_trunk.py, in its tools folder: MODEL PEER_TRUNK N_LAYERS), BUDGETS, REPEAT
# (2), SUMMARY_ONLY (1: print the table of the runs already in OUT),
# TOKENS (k3 bench decode steps, 8), PEER_GEN (peer tokens, 4: its
# first step runs the prompt, the others are timed), THREADS (compute
# threads of both sides, 2; 1 on a loaded machine, where 2 threads wait at
# barriers for cores others hold), K3 (./k3), OUT
# (tests/out/peer_ladder), KL_TEXT (docs/ARCHITECTURE.md), KL_TOKENS (about 384).
cd "$(dirname "$0")/.." || exit 1
MODE=${MODE:-peer}
MODEL=${MODEL:-/tmp/k3-16g}
Q8MODEL=${Q8MODEL:-/tmp/k3-16g-q8t}
PEER=${PEER:-/tmp/ladder_peer/bin/k3}
PEER_TRUNK=${PEER_TRUNK:-/tmp/k3-16g-peertrunk}
REPEAT=${REPEAT:-2}
TOKENS=${TOKENS:-8}
PEER_GEN=${PEER_GEN:-4}
THREADS=${THREADS:-2}
PROMPT_IDS=${PROMPT_IDS:-1,2,3,4}
K3=${K3:-./k3}
OUT=${OUT:-tests/out/peer_ladder}
KL_TEXT=${KL_TEXT:-docs/ARCHITECTURE.md}
KL_TOKENS=${KL_TOKENS:-384}
PY=/usr/bin/python3
case $MODE in
peer) BUDGETS=${BUDGETS:-1G 2G 4G 8G 16G}; SIDES="k3 peer" ;;
q8) BUDGETS=${BUDGETS:-4G 8G 16G}; SIDES="bf16 q8" ;;
*) echo "bench_peer_ladder.sh: MODE must be peer or q8, not '$MODE'" >&2; exit 2 ;;
esac
[ -f "$MODEL/config.json" ] || { echo "bench_peer_ladder.sh: $MODEL: no config.json (k3 gen $MODEL --preset k3-16g)" >&2; exit 1; }
if [ $MODE = peer ]; then
    [ -x "$PEER" ] || { echo "bench_peer_ladder.sh: $PEER: no peer binary (build kimi-k3-in-c under /tmp)" >&2; exit 1; }
    [ -f "$PEER_TRUNK/trunk.json" ] || { echo "bench_peer_ladder.sh: $PEER_TRUNK: no packed trunk (the peer's own pack_trunk.py)" >&2; exit 1; }
else
    [ -f "$Q8MODEL/config.json" ] || [ -f "$Q8MODEL/manifest.json" ] ||
        { echo "bench_peer_ladder.sh: $Q8MODEL: no model (k3 pack $MODEL $Q8MODEL --trunk Q8_0)" >&2; exit 1; }
fi
mkdir -p $OUT

# the machine in this run: read bandwidth (2 threads) and the disk
measure_machine() {
    ./build/tools/bench_kernels --quick --json 2>/dev/null |
        $PY -c "import json,sys; print(json.load(sys.stdin)['bandwidth']['read_gbs_2t'])" > $OUT/membw 2>/dev/null ||
        echo 0 > $OUT/membw
    big=$(ls -S "$MODEL"/*.safetensors "$MODEL"/* 2>/dev/null | head -1)
    # as k3's reader: 4 MiB O_DIRECT reads, 4 in flight (the one disk
    # measure of the tools: bench_stream.sh and bench_llamacpp.sh use it too)
    nice $PY tools/disk_rate.py "$big" 4096 4 3 > $OUT/disk 2>/dev/null || echo 0 > $OUT/disk
}

# the bytes one token touches: the trunk and top_k experts of each MoE layer
touched_bytes() {
    $K3 plan "$1" --json 2>/dev/null | $PY -c "
import json,sys
p=json.load(sys.stdin)
print(int(p['trunk_bytes'] + p['head_bytes'] + p['moe_layers'] * p['top_k'] * p['expert_slot_bytes']))" 2>/dev/null || echo 0
}

# k3_side NAME MODEL BUDGET REP: k3 bench, its JSON kept
k3_side() {
    nice $K3 bench "$2" --mem $3 --threads $THREADS --tokens $TOKENS --prompt-tokens 8 --json --no-probe --no-draft \
        --no-token-by-token --no-warm-prompt --no-resident --resident-s-per-token 0 \
        > $OUT/$1-$3-$4.json 2> $OUT/$1-$3-$4.err
}

# peer_side BUDGET REP: kimi-k3-in-c, trunk first, with its JSON and log
peer_side() {
    split=$($PY -c "
m={'K':2**10,'M':2**20,'G':2**30}; s='$1'; b=float(s[:-1])*m[s[-1].upper()]/1e9
import json; t=json.load(open('$PEER_TRUNK/trunk.json'))
trunk_gb=sum(l['nbytes'] for l in t['layers'])/1e9
trunk=min(b-0.17, trunk_gb+0.05); print('%.3f %.3f'%(trunk, max(b-0.1-trunk, 0.07)))")
    set -- "$@" $split
    OMP_NUM_THREADS=$THREADS nice $PEER "$MODEL" --trunk "$PEER_TRUNK" --trunk-gb $3 --cache-gb $4 --ids $PROMPT_IDS \
        --gen $PEER_GEN --incremental --out $OUT/peer-$1-$2.json > $OUT/peer-$1-$2.log 2>&1
}

# greedy ids: k3's argmax over the peer's prompt and output must be its ids
check_ids() {
    log=$(ls $OUT/peer-*.json 2>/dev/null | head -1)
    [ -n "$log" ] || { echo "ids: no peer run to check"; return; }
    ids=$($PY -c "import json; print(' '.join(map(str,json.load(open('$log'))['full_ids'])))")
    nice $K3 eval "$MODEL" --mem 4G --threads $THREADS --ids "$ids" --logits $OUT/ids.f32 2>/dev/null
    $PY - "$log" $OUT/ids.f32 <<'EOF'
import json, struct, sys
run = json.load(open(sys.argv[1]))
full, gen = run['full_ids'], run['generated_ids']
raw = open(sys.argv[2], 'rb').read()
n = len(full); vocab = len(raw) // 4 // n
rows = [struct.unpack_from('<%df' % vocab, raw, 4 * vocab * t) for t in range(n)]
p = len(full) - len(gen)
mine = [max(range(vocab), key=rows[t].__getitem__) for t in range(p - 1, n - 1)]
same = mine == gen
print('greedy ids: kimi-k3-in-c %s, k3 %s: %s' % (gen, mine, 'the same' if same else 'DIFFERENT'))
EOF
}

[ -n "${SUMMARY_ONLY:-}" ] || echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), MODE=$MODE, REPEAT=$REPEAT, THREADS=$THREADS, TOKENS=$TOKENS, PEER_GEN=$PEER_GEN, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${SUMMARY_ONLY:-}" ] || measure_machine
echo "# read bandwidth $(cat $OUT/membw) GB/s (2 threads), disk $(cut -c1-5 $OUT/disk) GB/s (4 MiB O_DIRECT, 4 at once)"
[ -n "${SUMMARY_ONLY:-}" ] && REPEAT=0    # SUMMARY_ONLY=1: the table of the runs in OUT, none run
for b in $BUDGETS; do
    for rep in $(seq 1 $REPEAT); do
        for side in $SIDES; do
            case $side in
            k3) k3_side k3 "$MODEL" $b $rep ;;
            bf16) k3_side bf16 "$MODEL" $b $rep ;;
            q8) k3_side q8 "$Q8MODEL" $b $rep ;;
            peer) peer_side $b $rep ;;
            esac
            echo "# $b rep $rep $side done $(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg)" >&2
        done
    done
done
echo "# load after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
[ $MODE = peer ] && check_ids
TOUCH_A=$(touched_bytes "$MODEL")
TOUCH_B=$TOUCH_A
[ $MODE = q8 ] && TOUCH_B=$(touched_bytes "$Q8MODEL")
$PY - "$OUT" "$MODE" "$(cat $OUT/membw)" "$(cat $OUT/disk)" "$TOUCH_A" "$TOUCH_B" "$BUDGETS" "$SIDES" <<'EOF'
import glob, json, os, re, sys
out, mode, membw, disk, touch_a, touch_b, budgets, sides = sys.argv[1:]
membw, disk = float(membw) * 1e9, float(disk) * 1e9
touch = {'k3': float(touch_a), 'bf16': float(touch_a), 'q8': float(touch_b), 'peer': float(touch_a)}

def k3_run(path):
    try:
        j = json.load(open(path))
        b = j['breakdown_s_per_token']
        return dict(s=j['decode_s_per_token'], wait=b.get('wait_trunk'), bytes=j['bytes_read_per_token']['total'],
                    rss=j['peak_rss_bytes'], slots=j['plan']['expert_slots'], pinned=j['plan']['pinned_units'])
    except Exception:
        return None

def peer_run(log, js):
    # its step table's READ GB counts expert reads; the streamed trunk
    # (packed minus pinned, "trunk stream: X GB packed, n/N layers PINNED
    # (Y GB)") is read once more every step
    try:
        text = open(log).read()
        steps = [(float(m.group(1)), float(m.group(2))) for m in
                 re.finditer(r'^\s*[1-9]\d*\s+\d+\s+([0-9.]+)\s+[0-9.]+\s+([0-9.]+)', text, re.M)]
        t = re.search(r'trunk stream: ([0-9.]+) GB packed, \d+/\d+ layers PINNED \(([0-9.]+) GB\)', text)
        trunk_gb = float(t.group(1)) - float(t.group(2)) if t else 0
        rss = re.search(r'PEAK RSS for the whole run: ([0-9.]+) (MB|GB)', text)
        rss_b = float(rss.group(1)) * (1e9 if rss.group(2) == 'GB' else 1e6) if rss else 0
        return dict(s=sum(s for s, _ in steps) / len(steps), wait=None,
                    bytes=(sum(g for _, g in steps) / len(steps) + trunk_gb) * 1e9, rss=rss_b, slots=None, pinned=None)
    except Exception:
        return None

names = {'k3': 'k3', 'peer': 'kimi-k3-in-c', 'bf16': 'bf16 trunk', 'q8': 'Q8_0 trunk'}
print('| budget | side | s/token (fastest, all) | ring wait s/token (share) | MB read/token | peak RSS MiB | x max(I/O, memory floor) |')
print('|---|---|---|---|---|---|---|')
best = {}
for b in budgets.split():
    for side in sides.split():
        runs = []
        for path in sorted(glob.glob('%s/%s-%s-*.%s' % (out, side, b, 'log' if side == 'peer' else 'json'))):
            r = peer_run(path, path[:-3] + 'json') if side == 'peer' else k3_run(path)
            if r: runs.append(r)
        if not runs:
            print('| %s | %s | failed (see %s/%s-%s-*) | | | | |' % (b, names[side], out, side, b)); continue
        r = min(runs, key=lambda x: x['s'])
        best[(b, side)] = r['s']
        floor = max(r['bytes'] / disk if disk else 0, touch[side] / membw if membw else 0)
        print('| %s | %s | %.3f (%s) | %s | %.0f | %.0f | %s |' % (
            b, names[side], r['s'], ' / '.join('%.3f' % x['s'] for x in runs),
            '%.3f (%.0f%%)' % (r['wait'], 100 * r['wait'] / r['s']) if r['wait'] is not None else '-',
            r['bytes'] / 1e6, r['rss'] / 1048576,
            '%.2f' % (r['s'] / floor) if floor else '-'))
a, c = sides.split()
print()
print('| budget | %s / %s (s/token, fastest of each) |' % (names[c], names[a]))
print('|---|---|')
for b in budgets.split():
    if (b, a) in best and (b, c) in best:
        print('| %s | %.2fx |' % (b, best[(b, c)] / best[(b, a)]))
print()
print('memory floor: %.3f GB a token at %.1f GB/s = %.3f s; disk %.2f GB/s' % (
    touch['k3'] / 1e9, membw / 1e9, touch['k3'] / membw if membw else 0, disk / 1e9))
EOF
if [ $MODE = q8 ]; then                   # the text cut to about KL_TOKENS tokens (2 bytes a token here)
    head -c $((KL_TOKENS * 2)) "$KL_TEXT" > $OUT/kl.txt
    echo "KL divergence of the Q8_0 trunk against the bf16 trunk, $(wc -c < $OUT/kl.txt) bytes of $KL_TEXT:"
    nice $K3 eval "$MODEL" --threads $THREADS --text-file $OUT/kl.txt --save-base $OUT/base.k3kl 2> $OUT/kl-base.err ||
        { echo "k3 eval --save-base failed: $(tail -1 $OUT/kl-base.err)"; exit 1; }
    nice $K3 eval "$Q8MODEL" --threads $THREADS --kl-base $OUT/base.k3kl 2>&1 | tail -12
fi
