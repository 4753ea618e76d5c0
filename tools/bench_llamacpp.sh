#!/bin/sh
# bench_llamacpp.sh [GGUF...] - k3 against llama.cpp on the same GGUF file in
# the same run (issue 27): llama-bench -t 2 -p 0 -n N, then k3 bench FILE
# --tokens N, each fully resident and inside memory cgroups of 1/2 and 1/4
# of the file's size. Prints s/token and bytes read per token for both.
#
#   LLAMA=/tmp/llama.cpp SIDES="llama llama-nr k3" N=16 REPEAT=2 \
#       sh tools/bench_llamacpp.sh models/kl-4g-Q8_0.gguf models/kl-4g-Q4_K_M.gguf
#
# Sides: llama = llama-bench (its defaults: weights repacked for the CPU, so
# K-quant weights are copied into anonymous memory, ~0.9 GB for the Q4_K_M
# file: inside a cgroup smaller than that it is OOM-killed); llama-nr =
# llama-completion --no-repack -n N (weights used in place from the mmap;
# s/token from its "eval time" line); k3 = k3 bench; k3base = k3 bench of
# another build (K3_BASE, e.g. main's, built under /tmp), for a before/after
# in the same run. Each (budget, side) runs
# REPEAT times, the sides taking turns, and the fastest run is printed (K3_ARGS
# go to k3 bench, e.g. "--activations q8"): on a
# shared machine the spread between runs is large (OpenMP threads that
# spin while other processes hold the cores), so compare rows of one run.
#
# The model: `k3 gen models/kl-4g --preset kl-4g` (3.9 GB bf16),
# tools/hf_to_gguf.py to BF16, llama-quantize to Q8_0 and Q4_K_M.
# Bytes read are the process's own (/proc/PID/io read_bytes, sampled every
# 50 ms by tools/bench_llamacpp_io.py until it exits), divided by the tokens
# decoded (llama-bench decodes a warm-up token and then N tokens per run).
# Resident: the file is read into the page cache first. Under a cgroup
# limit, the file's cached pages are dropped first (posix_fadvise
# DONTNEED) so that every page the run touches is charged to its cgroup.
# k3 bench reads the limit itself (no --mem) and reports its own figures;
# the outer read_bytes is printed beside them. A measurement, not a test:
# needs root and the cgroup v1 memory hierarchy (as tools/cgroup_ladder.sh).
cd "$(dirname "$0")/.." || exit 1
LLAMA=${LLAMA:-/tmp/llama.cpp}
K3=${K3:-./k3}
K3_BASE=${K3_BASE:-/tmp/k3-base/k3}
N=${N:-16}
REPEAT=${REPEAT:-2}
SIDES=${SIDES:-llama llama-nr k3}
BUDGETS=${BUDGETS:-resident half quarter}
FILES=${*:-models/kl-4g-Q8_0.gguf models/kl-4g-Q4_K_M.gguf}
OUT=tests/out/bench_llamacpp
mkdir -p $OUT
PY=/usr/bin/python3
CGLINE=$(grep ':memory:' /proc/self/cgroup | head -1 | cut -d: -f3)
BASE=/sys/fs/cgroup/memory$CGLINE
[ -d "$BASE" ] || { echo "bench_llamacpp: no cgroup v1 memory hierarchy at $BASE"; exit 1; }

# page cache: warm (cat) or drop (fadvise DONTNEED) one file
cache() {
    $PY -c "
import os, sys
fd = os.open(sys.argv[2], os.O_RDONLY)
if sys.argv[1] == 'drop':
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
else:
    while os.read(fd, 1 << 24):
        pass
os.close(fd)" $1 "$2"
}

# run CMD... inside cgroup $CG; prints 'read_bytes wall_s' of the process to $OUT/io
in_cgroup() {
    sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' $CG $PY tools/bench_llamacpp_io.py $OUT/io "$@"
}

echo "bench_llamacpp: N=$N, $(nproc) CPUs, $(uptime | sed 's/.*load/load/')"
echo "llama.cpp ${LLAMA_COMMIT:-(tree at $LLAMA)}, $($K3 --version 2>/dev/null | head -1)"
# the disk in this run, as k3's reader uses it (O_DIRECT, 4 MiB, 4 and 8 at once)
for f in $FILES; do
    [ -f "$f" ] && echo "disk: $(nice $PY tools/disk_rate.py "$f" 4096 4 3) GB/s at depth 4," \
        "$(nice $PY tools/disk_rate.py "$f" 4096 8 3) GB/s at depth 8 (4 MiB O_DIRECT reads of $(basename "$f"))"
done
printf '%-24s %-9s %-8s %10s %14s %10s %s\n' file budget side s_per_tok bytes_per_tok peak_MiB note
for f in $FILES; do
    [ -f "$f" ] || { echo "bench_llamacpp: $f: no such file"; continue; }
    size=$(stat -c %s "$f")
    for budget in $BUDGETS; do
        case $budget in
        resident) limit=-1 ;;
        half) limit=$((size / 2)) ;;
        quarter) limit=$((size / 4)) ;;
        esac
        rm -f $OUT/best.*
        r=0
        while [ $r -lt $REPEAT ]; do
            r=$((r + 1))
            for side in $SIDES; do
                CG=$BASE/k3_llcpp_$$_${budget}_$side
                mkdir $CG || exit 1
                echo $limit > $CG/memory.limit_in_bytes
                if [ $budget = resident ]; then cache warm "$f"; else cache drop "$f"; fi
                note=""
                case $side in
                llama)
                    in_cgroup nice $LLAMA/build/bin/llama-bench -m "$f" -t 2 -p 0 -n $N -r 1 -o json \
                        > $OUT/llama.json 2> $OUT/llama.err
                    ts=$($PY -c "import json; print(json.load(open('$OUT/llama.json'))[0]['avg_ts'])" 2>/dev/null)
                    spt=$($PY -c "print('%.4f' % (1 / $ts))" 2>/dev/null || echo fail)
                    tokens=$((N + 1)) ;;
                llama-nr)
                    in_cgroup nice $LLAMA/build/bin/llama-completion -m "$f" -t 2 -n $N -p "the" --no-repack \
                        -no-cnv --ignore-eos --temp 0 -c 64 < /dev/null > $OUT/llama-nr.out 2> $OUT/llama-nr.err
                    spt=$(grep -a ' eval time' $OUT/llama-nr.err | grep -v prompt |
                          sed 's/.*(\s*\([0-9.]*\) ms per token.*/\1/' | awk '{printf "%.4f", $1 / 1000}')
                    [ -n "$spt" ] || spt=fail
                    tokens=$((N + 3)) ;;   # a warm-up token, the prompt (2 tokens), N - 1 decode steps
                k3|k3base)
                    bin=$K3; [ $side = k3base ] && bin=$K3_BASE
                    in_cgroup nice $bin bench "$f" $K3_ARGS --tokens $N --prompt-tokens 1 --json --no-draft \
                        --no-token-by-token --no-warm-prompt --no-resident --no-probe > $OUT/$side.json 2> $OUT/$side.err
                    spt=$($PY -c "import json; print('%.4f' % json.load(open('$OUT/$side.json'))['decode_s_per_token'])" 2>/dev/null || echo fail)
                    note=$($PY -c "
import json; d = json.load(open('$OUT/$side.json')); b = d['breakdown_s_per_token']
print('k3 own bytes/token %.0f, wait experts %.4f trunk %.4f s/token' % (
    d['bytes_read_per_token']['total'], b['wait_experts'], b['wait_trunk']))" 2>/dev/null)
                    tokens=$((N + 1)) ;;
                esac
                rb=$(cut -d' ' -f1 $OUT/io 2>/dev/null)
                bpt=$((${rb:-0} / tokens))
                peak=$(($(cat $CG/memory.max_usage_in_bytes) / 1048576))
                oom=$(grep -o 'oom_kill [0-9]*' $CG/memory.oom_control | grep -o '[0-9]*')
                [ "$spt" = fail ] && note="failed (oom kills ${oom:-0}): $(tail -1 $OUT/$side.err | cut -c1-60)"
                line=$(printf '%-24s %-9s %-8s %10s %14s %10s %s' "$(basename $f)" $budget $side "$spt" $bpt $peak "$note")
                prev=$(cat $OUT/best.$side 2>/dev/null | awk '{print $4}')
                if [ -z "$prev" ] || [ "$prev" = fail ] ||
                   { [ "$spt" != fail ] && awk "BEGIN {exit !($spt < $prev)}"; }; then
                    echo "$line" > $OUT/best.$side
                fi
                echo "$line" >> $OUT/all_runs.txt
                rmdir $CG 2>/dev/null
            done
        done
        for side in $SIDES; do cat $OUT/best.$side; done
    done
done
