#!/bin/sh
# cgroup_ladder.sh [MODEL] [SIZES...] - k3 run, k3 chat --plain and k3 bench
# without --mem inside memory cgroups of each size (default 150M 300M 600M),
# so the plan must come from the cgroup's limit. Prints, per size and
# command, the exit code, the process's peak RSS (/usr/bin/time), the
# cgroup's peak usage (memory.max_usage_in_bytes), OOM kills and the limit
# the plan names. A measurement, not a test: needs root and a cgroup v1
# memory hierarchy (as tests/t_trust.sh); model default tests/out/trust/demo.
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
M=${1:-tests/out/trust/demo}
[ $# -gt 0 ] && shift
SIZES=${*:-150M 300M 600M}
OUT=tests/out/cgroup_ladder
mkdir -p $OUT
[ -f $M/config.json ] || $K3 gen $M --preset demo >/dev/null 2>&1
CGLINE=$(grep ':memory:' /proc/self/cgroup | head -1 | cut -d: -f3)
BASE=/sys/fs/cgroup/memory$CGLINE
[ -d "$BASE" ] || { echo "no cgroup v1 memory hierarchy at $BASE"; exit 1; }
printf 'hello\nhow are you?\n' > $OUT/chat.in
echo "model $M, $(uptime | sed 's/.*load/load/')"
printf '%-6s %-6s %4s %12s %12s %4s  %s\n' limit cmd exit peak_rss_MiB cg_peak_MiB oom plan
for size in $SIZES; do
    CG=$BASE/k3_ladder_$$_$size
    mkdir $CG || exit 1
    echo $size > $CG/memory.limit_in_bytes
    for cmd in run chat bench; do
        echo 0 > $CG/memory.max_usage_in_bytes
        kills0=$(grep -o 'oom_kill [0-9]*' $CG/memory.oom_control | grep -o '[0-9]*')
        rm -rf $OUT/chat.db*
        case $cmd in
        run) set -- $K3 run $M -p "Hello there" -n 3 ;;
        chat) set -- sh -c "$K3 chat $M --plain --db $OUT/chat.db -n 2 < $OUT/chat.in" ;;
        bench) set -- $K3 bench $M --tokens 2 --prompt-tokens 4 ;;
        esac
        sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' $CG /usr/bin/time -f "%M" -o $OUT/rss "$@" >$OUT/$cmd.out 2>$OUT/$cmd.err
        code=$?
        rss_kb=$(tail -1 $OUT/rss)
        case $rss_kb in *[!0-9]*|'') rss_kb=0 ;; esac
        peak=$(cat $CG/memory.max_usage_in_bytes)
        kills=$(grep -o 'oom_kill [0-9]*' $CG/memory.oom_control | grep -o '[0-9]*')
        plan=$(grep -o 'budget [0-9.]* GiB[^;]*' $OUT/$cmd.err | head -1)
        limit=$(grep -o 'limit: [^)]*' $OUT/$cmd.err | head -1 | sed 's/of .*k3_ladder_[0-9]*_/of ../')
        printf '%-6s %-6s %4s %12s %12s %4s  %s; %s\n' $size $cmd $code $((rss_kb / 1024)) $((peak / 1048576)) \
            $((${kills:-0} - ${kills0:-0})) "$plan" "$limit"
    done
    rmdir $CG
done
