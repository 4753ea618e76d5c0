#!/bin/sh
# t_draft.sh - exact speculative decoding (--draft ngram, k3_session_eval_draft).
#
# 1. tests/tool_draft.c on every family of generated model (Kimi Linear:
#    tiny, small, demo; Kimi K3: k3-tiny), fully resident and streamed under
#    a budget: drafts all kept, none kept and partly kept, greedy and seeded
#    sampling; the tokens, the logits sampled from and the saved session
#    must be bit-identical to plain decoding.
# 2. The front ends: k3 run and a three-turn k3 chat give the same answers
#    with --draft ngram as with --draft none, greedy and seeded.
#    The trained k3-mini asked to repeat a paragraph: the same answer with
#    and without drafts, greedy and seeded.
# 3. k3 bench --json reports draft_accept_rate, tokens_per_pass and every
#    mode's figures, with identical tokens, and verify_pass_cost.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/draft
mkdir -p $OUT
K3=${K3:-./k3}
TOOL=${K3_TESTBIN:-build/tests}/tool_draft

for p in tiny small k3-tiny demo; do
    [ -f $OUT/$p/config.json ] || $K3 gen $OUT/$p --preset $p --seed 7 >/dev/null 2>&1
done

# the smallest budget each model takes (k3's own message), plus room for the tool's context
min_mem() { $K3 eval $OUT/$1 --ids "1" --logits $OUT/min.f32 --mem 1M 2>&1 | grep -o 'use --mem [0-9]*M' | grep -o '[0-9]*'; }

# (under the sanitizers, tests/t_sanitize.sh, the 560 MB demo is left out:
# the other models run the same code)
RUNS='tiny;small;k3-tiny;small --mem +3;k3-tiny --mem +3'
[ -n "$K3_SANITIZER" ] || RUNS="$RUNS;demo --quick;demo --mem +12 --quick"
IFS=';'
set -f
for run in $RUNS; do
    unset IFS
    set -- $run
    m=$1
    shift
    args=""
    while [ $# -gt 0 ]; do
        case $1 in
        --mem) args="$args --mem $(( $(min_mem $m) $2 ))M"; shift ;;
        *) args="$args $1" ;;
        esac
        shift
    done
    mkdir -p $OUT/files_$m
    $TOOL $OUT/$m $OUT/files_$m $args 2>$OUT/tool.err | sed "s/^PASS draft /PASS draft $m /; s/^FAIL draft /FAIL draft $m /"
    [ -s $OUT/tool.err ] && echo "FAIL draft $m$args: $(head -c 300 $OUT/tool.err)"
done
set +f

# k3 run: same text with and without drafts (greedy, seeded). Random-weight
# models rarely repeat, so whether a run drafts depends on its tokens; the
# drafts verified over all these runs must not be none.
# run_both LABEL DONE_TEXT k3-run-arguments...: the same `k3 run` with
# --draft none and --draft ngram; PASS if the ngram run printed DONE_TEXT and
# both printed the same text; adds the draft tokens verified to $verified
run_both() {
    label=$1 done_text=$2
    shift 2
    $K3 run "$@" --draft none > $OUT/run_none.txt 2>$OUT/run_none.err
    $K3 run "$@" --draft ngram > $OUT/run_ngram.txt 2>$OUT/run_ngram.err
    n=$(grep -o 'drafts [0-9]* of [0-9]*' $OUT/run_ngram.err | awk '{print $4}')
    verified=$((verified + ${n:-0}))
    if ! grep -q "$done_text" $OUT/run_ngram.err || [ ! -s $OUT/run_none.txt ]; then
        echo "FAIL draft $label: $(tail -n 1 $OUT/run_ngram.err)"
    elif cmp -s $OUT/run_none.txt $OUT/run_ngram.txt; then
        echo "PASS draft $label: --draft ngram prints what --draft none does (${n:-0} draft tokens verified)"
    else
        echo "FAIL draft $label: --draft ngram and --draft none differ"
    fi
}
PROMPT="one two three four five six seven eight one two three four five six seven eight one two three four"
verified=0
for m in tiny k3-tiny; do
    for s in "" "--temp 0.9 --top-p 0.95 --seed 11"; do
        run_both "k3 run $m ${s:-greedy}" "generated 48 tokens" $OUT/$m -p "$PROMPT" -n 48 $s
    done
done
[ $verified -gt 0 ] && echo "PASS draft k3 run: $verified draft tokens verified over the runs" ||
    echo "FAIL draft k3 run: no draft was verified in any run"

# The trained k3-mini (in the repository) asked to repeat a paragraph: the
# prompt-lookup drafter (long matches, periodic continuation) drafts from the
# paragraph and from the answer's own repeats; the answer must be the same
# with and without drafts, greedy and seeded, and drafts must be verified.
MINI=models/k3-mini
if [ -f $MINI/config.json ]; then
    REPEAT="Repeat this: The harbour lay quiet in the grey morning light. The boats rocked against the old stone wall, and the gulls called over the water."
    verified=0
    for s in "" "--temp 0.8 --seed 3"; do
        run_both "k3 run k3-mini repeat-a-paragraph ${s:-greedy}" "generated" $MINI --chat -p "$REPEAT" -n 96 --threads 1 $s
    done
    [ $verified -gt 0 ] && echo "PASS draft k3 run k3-mini: $verified draft tokens verified" ||
        echo "FAIL draft k3 run k3-mini: no draft was verified"
fi

# k3 chat: three turns, the same answers (the session after each answer is
# what the next turn builds on)
for s in "" "--temp 0.8 --seed 5"; do
    for d in none ngram; do
        rm -f $OUT/chat_$d.db
        printf 'Say one two three one two three\nAgain: one two three\nAnd once more\n' |
            $K3 chat --lines $OUT/tiny --db $OUT/chat_$d.db --json -n 24 --draft $d $s > $OUT/chat_$d.jsonl 2>$OUT/chat_$d.err
    done
    /usr/bin/python3 - "$OUT/chat_none.jsonl" "$OUT/chat_ngram.jsonl" "${s:-greedy}" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
label = "k3 chat tiny, three turns, " + sys.argv[3]
if len(a) != 3 or len(b) != 3:
    print(f"FAIL draft {label}: {len(a)} and {len(b)} turns")
elif [t["text"] for t in a] != [t["text"] for t in b]:
    print(f"FAIL draft {label}: the answers differ with --draft ngram")
elif "drafted_tokens" not in b[0] or "decode_passes" not in b[0]:
    print(f"FAIL draft {label}: no drafted_tokens / decode_passes in the --json line")
else:
    print(f"PASS draft {label}: the same answers with --draft ngram "
          f"({sum(t['draft_kept_tokens'] for t in b)} of {sum(t['drafted_tokens'] for t in b)} drafted kept)")
EOF
done

# k3 bench --json: the speculative figures
$K3 bench $OUT/tiny --tokens 16 --prompt-tokens 24 --json --no-probe --no-resident > $OUT/bench.json 2>$OUT/bench.err
/usr/bin/python3 - "$OUT/bench.json" <<'EOF'
import json, sys
try:
    b = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL draft k3 bench --json: not JSON ({e})")
    sys.exit(0)
bad = [k for k in ("draft_accept_rate", "tokens_per_pass", "draft") if b.get(k) is None]
d = b.get("draft") or {}
if bad:
    print(f"FAIL draft k3 bench --json: missing {bad}")
elif d.get("identical") is not True:
    print("FAIL draft k3 bench --json: the modes' tokens are not identical")
elif not (d["oracle"]["tokens_per_pass"] > 2 and d["none"]["tokens_per_pass"] == 1):
    print(f"FAIL draft k3 bench --json: tokens per pass none {d['none']['tokens_per_pass']} oracle {d['oracle']['tokens_per_pass']}")
elif not (isinstance(b.get("verify_pass_cost"), dict) and len(b["verify_pass_cost"]["pass_over_step"]) == 8
          and all(r > 0 for r in b["verify_pass_cost"]["pass_over_step"]) and b["verify_pass_cost"]["step_ms"] > 0):
    print(f"FAIL draft k3 bench --json: verify_pass_cost is {b.get('verify_pass_cost')}")
else:
    print(f"PASS draft k3 bench --json: draft_accept_rate {b['draft_accept_rate']}, tokens_per_pass {b['tokens_per_pass']}, "
          f"oracle {d['oracle']['tokens_per_pass']} tokens/pass, tokens identical, "
          f"a pass of 8 costs {b['verify_pass_cost']['pass_over_step'][7]} steps")
EOF
exit 0
