# lib.sh - what the shell suites share (sourced: `. tests/lib.sh`).
# Every check prints one line, "PASS name" or "FAIL name: why"; tests/run.sh
# counts them.
# A reason on several lines is folded onto the one line; FAILED=1 lets a
# script keep its work files for a look when something failed.
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $(printf "%s" "$2" | tr "\n" " ")"; FAILED=1; }

# run_pool JOBS DIR SCRIPT...: run the scripts, at most JOBS at a time, each
# as `sh SCRIPT` with its output in DIR/NAME.out, its stderr in DIR/NAME.err
# its exit status in DIR/NAME.rc and its wall seconds in DIR/NAME.secs
# (NAME: the script's file name without .sh). Each script gets its own
# empty XDG_CACHE_HOME (DIR/NAME.cache): the engine plans at the speeds
# k3 plan caches there, so no script's plans may depend on what another
# script (or the tester's own ~/.cache) probed. Returns when every script
# has ended; the caller reads the files in its own order, so the log does
# not depend on which finished first.
run_pool() {
    pool_jobs=$1 pool_dir=$2
    shift 2
    mkdir -p "$pool_dir"
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" | xargs -P "$pool_jobs" -I{} sh -c \
        'n=$(basename "$1" .sh); a=$(date +%s); rm -rf "$2/$n.cache"
         XDG_CACHE_HOME="$PWD/$2/$n.cache" sh "$1" > "$2/$n.out" 2> "$2/$n.err"; echo $? > "$2/$n.rc"
         echo $(( $(date +%s) - a )) > "$2/$n.secs"' _ {} "$pool_dir"
}

# Scripts that must run alone: they measure this machine (k3 plan's
# probes, memory cgroups), build other trees from the same sources (a probe
# file another script's build would pick up), or are whole sanitizer passes
# of their own.
K3_SERIAL_SCRIPTS="t_door t_numerics_key t_plan t_trust t_arch t_sanitize t_tsan t_serve_asan t_fuzz"
is_serial_script() {
    case " $K3_SERIAL_SCRIPTS " in *" $(basename "$1" .sh) "*) return 0 ;; esac
    return 1
}

# store_answer MODEL DB ID FILE: a conversation in DB whose id is ID and
# whose answer is FILE's text (a one-word chat, exported, its answer
# replaced, imported again; the export stays in FILE.json): a known
# answer for the screen tests.
store_answer() {
    printf 'hello\n' | ${K3:-./k3} chat "$1" --db "$2" -n 2 >/dev/null 2>&1
    ${K3:-./k3} history export last --db "$2" --format json -o "$4.json" 2>/dev/null
    /usr/bin/python3 - "$4.json" "$3" "$4" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["id"] = sys.argv[2]
for m in d["messages"]:
    if m["role"] == "assistant":
        m["content"] = open(sys.argv[3], encoding="utf-8").read()
json.dump(d, open(sys.argv[1], "w"))
PY
    ${K3:-./k3} history import "$4.json" --db "$2" >/dev/null 2>&1
}
