#!/bin/sh
# t_history.sh - drives the real `k3 history` commands against temporary
# databases: list/show/search/export/import/rm, bad ids and usage errors,
# a garbage database file, and a crash test that kill -9s a writer at random
# moments (>= 20 times) and checks after each kill that the database passes
# the integrity checks and holds every message reported as committed.
# Prints PASS/FAIL lines (tests/run.sh counts them).
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
if [ ! -x "$K3" ]; then
    echo "FAIL t_history: $K3 not built"
    exit 1
fi
T=$(mktemp -d /tmp/k3-t-history-XXXXXX) || exit 1
FAILED=0

. tests/lib.sh

# run NAME EXPECTED_RC CMD... : runs CMD with stdout/stderr in $T/out and
# $T/err; on a wrong exit code returns 1 and leaves the reason in $WHY.
WHY=""
run() {
    name=$1; want=$2; shift 2
    "$@" > "$T/out" 2> "$T/err"
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        WHY="$name: exit $rc, expected $want: $(head -c 300 "$T/err")"
        return 1
    fi
    WHY="$name: unexpected output: $(head -c 300 "$T/out")"
    return 0
}

# A hand-written export: quotes, an apostrophe, FTS operator words, a
# non-ASCII title, stats and an interrupted answer.
write_fixture() {   # FILE ID TITLE
    cat > "$1" <<EOF
{
  "format": "k3-history",
  "version": 1,
  "id": "$2",
  "title": "$3",
  "model_path": "models/demo",
  "model_fingerprint": "fp-demo",
  "system_prompt": "Be brief.",
  "sampling": {"temperature": 0.5},
  "created_ms": 1700000000000,
  "updated_ms": 1700000001000,
  "messages": [
    {"seq": 1, "role": "user", "status": "complete", "content": "Why don't we say \"hello\" AND NEAR(x) -y * here?", "created_ms": 1700000000000},
    {"seq": 2, "role": "assistant", "status": "interrupted", "content": "Because the penguins were busy", "created_ms": 1700000001000,
     "prompt_tokens": 20, "generated_tokens": 5, "ttft_ms": 150.0, "prefill_ms": 140.0, "decode_ms": 500.0,
     "engine_stats": {"bytes_read": 1234, "hit_rate": 0.5}}
  ]
}
EOF
}

DB=$T/h.db
write_fixture "$T/a.json" abc12345 "Penguin talk"
write_fixture "$T/b.json" abc19999 "Second chat"

# import / list / show
if run import 0 "$K3" history import "$T/a.json" --db "$DB" && grep -q 'imported abc12345' "$T/out" &&
   run import2 0 "$K3" history --db "$DB" import "$T/b.json"; then pass history_cli_import
else fail history_cli_import "$WHY"; fi

if run list 0 "$K3" history list --db "$DB" && grep -q '^abc12345 .*Penguin talk' "$T/out" &&
   [ "$(grep -c '^abc1' "$T/out")" -eq 2 ]; then pass history_cli_list
else fail history_cli_list "$WHY"; fi

if run show 0 "$K3" history show abc123 --db "$DB" && grep -q "Why don't we say" "$T/out" &&
   grep -q 'interrupted' "$T/out" && grep -q 'Be brief' "$T/out"; then pass history_cli_show
else fail history_cli_show "$WHY"; fi

# search: apostrophes, quotes, operators as plain text
ok=1
for q in "don't" '"hello' 'hello AND' 'NEAR(x)' 'penguins'; do
    if ! run "search $q" 0 "$K3" history search "$q" --db "$DB" || ! grep -q '^abc12345' "$T/out"; then ok=0; bad_q=$WHY; fi
done
if run "search -y" 0 "$K3" history search --db "$DB" -- -y && grep -q '^abc12345' "$T/out"; then :; else ok=0; bad_q=$WHY; fi
if run "search *" 0 "$K3" history search '*' --db "$DB" && grep -q '\[\*\]' "$T/out"; then :; else ok=0; bad_q=$WHY; fi
if run "search none" 0 "$K3" history search zzzqqq --db "$DB" && [ ! -s "$T/out" ]; then :; else ok=0; bad_q=$WHY; fi
[ $ok -eq 1 ] && pass history_cli_search || fail history_cli_search "$bad_q"

# export md/json, json round trip through a second database
if run export_md 0 "$K3" history export abc12345 --format md --db "$DB" && grep -q '^# Penguin talk' "$T/out" &&
   grep -q '^## Assistant (interrupted)' "$T/out"; then pass history_cli_export_md
else fail history_cli_export_md "$WHY"; fi
if run export_json 0 "$K3" history export abc12345 --format json -o "$T/e1.json" --db "$DB" &&
   run reimport 0 "$K3" history import "$T/e1.json" --db "$T/h2.db" &&
   run reexport 0 "$K3" history export last --format json -o "$T/e2.json" --db "$T/h2.db" &&
   cmp -s "$T/e1.json" "$T/e2.json"; then pass history_cli_json_roundtrip
else fail history_cli_json_roundtrip "$WHY"; fi

# bad ids and usage errors: one line on stderr, exit 1 (error) or 2 (usage)
ok=1
run ambiguous 1 "$K3" history show abc1 --db "$DB" && grep -q 'ambiguous' "$T/err" && [ "$(wc -l < "$T/err")" -eq 1 ] || { ok=0; bad_e=$WHY; }
run unknown 1 "$K3" history show 0000 --db "$DB" && grep -q 'no conversation' "$T/err" || { ok=0; bad_e=$WHY; }
run nonhex 1 "$K3" history rm 'x;DROP' --yes --db "$DB" || { ok=0; bad_e=$WHY; }
run no_format 2 "$K3" history export abc12345 --db "$DB" || { ok=0; bad_e=$WHY; }
run bad_format 2 "$K3" history export abc12345 --format pdf --db "$DB" || { ok=0; bad_e=$WHY; }
run bad_sub 2 "$K3" history frobnicate --db "$DB" || { ok=0; bad_e=$WHY; }
run bad_opt 2 "$K3" history list --bogus --db "$DB" || { ok=0; bad_e=$WHY; }
run missing_db 1 "$K3" history show last --db "$T/nope.db" || { ok=0; bad_e=$WHY; }
[ -e "$T/nope.db" ] && { ok=0; bad_e="a read-only command created $T/nope.db"; }
for sub in list show search export import rm; do
    run "help $sub" 0 "$K3" history $sub --help && grep -q "usage: k3 history $sub" "$T/out" || { ok=0; bad_e=$WHY; }
done
[ $ok -eq 1 ] && pass history_cli_errors || fail history_cli_errors "$bad_e"

# rm
if run rm 0 "$K3" history rm abc12345 --yes --db "$DB" && grep -q 'deleted abc12345' "$T/out" &&
   run rm_again 1 "$K3" history show abc12345 --db "$DB" &&
   run rm_search 0 "$K3" history search penguins --db "$DB" && ! grep -q abc12345 "$T/out" &&
   grep -q abc19999 "$T/out"; then pass history_cli_rm
else fail history_cli_rm "$WHY"; fi

# a garbage file: one clear line naming it, exit 1, file untouched
head -c 5000 /dev/urandom > "$T/garbage.db"
cp "$T/garbage.db" "$T/garbage.orig"
if run garbage 1 "$K3" history list --db "$T/garbage.db" && [ "$(wc -l < "$T/err")" -eq 1 ] &&
   grep -q "garbage.db: not a SQLite database" "$T/err" && cmp -s "$T/garbage.db" "$T/garbage.orig"; then
    pass history_cli_garbage_db
else fail history_cli_garbage_db "$WHY"; fi

# kill -9 at random moments while a writer commits messages and snapshots
CDB=$T/crash.db
kills=0; bad=""; total=0
i=0
while [ $i -lt 24 ]; do
    i=$((i + 1))
    "$K3" history stress --db "$CDB" --n 1000000 > "$T/committed.$i" 2> "$T/stress.err" &
    pid=$!
    r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
    delay=$(awk -v r="$r" 'BEGIN { printf "%.3f", 0.01 + (r % 300) / 1000 }')
    sleep "$delay"
    if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
    wait $pid 2>/dev/null
    # killed before it made the database (a slow start: ASan's took over
    # 10 ms in CI) and so before any commit: nothing to check yet
    if [ ! -e "$CDB" ] && ! grep -q '^committed ' "$T/committed.$i"; then continue; fi
    if ! "$K3" history check --db "$CDB" --ids "$T/committed.$i" > "$T/check.out" 2> "$T/check.err"; then
        bad="kill $i: $(head -3 "$T/check.err" | tr '\n' ' ')"
        break
    fi
    if command -v sqlite3 > /dev/null 2>&1; then
        ic=$(sqlite3 "$CDB" 'PRAGMA integrity_check' 2>&1)
        if [ "$ic" != "ok" ]; then bad="kill $i: sqlite3 integrity_check: $ic"; break; fi
    fi
    n=$(grep -c '^committed ' "$T/committed.$i")
    total=$((total + n))
done
if [ -n "$bad" ]; then fail history_kill9_crash "$bad"
elif [ $kills -lt 20 ]; then fail history_kill9_crash "only $kills of $i writers were still running when killed"
elif [ $total -eq 0 ]; then fail history_kill9_crash "no message was ever committed"
else pass history_kill9_crash; echo "  ($kills kills, $total committed messages all present)" >&2; fi

if [ $FAILED -eq 0 ]; then rm -rf "$T"; else echo "t_history: files kept in $T" >&2; fi
exit $FAILED
