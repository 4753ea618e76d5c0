#!/bin/sh
# t_everyday.sh - what ollama and llm users reach for, through the real
# binary (plain mode and the command line; the full screen is in
# t_tui_everyday.sh):
#  - k3 gen marks random weights in config.json; k3 models lists model
#    directories (DIR, $K3_MODELS) with size, type (BF16, F8_E4M3, BF16 +
#    MXFP4 experts, from the tensors) and architecture; k3 help models
#    names the real checkpoints, the download and the --mem to choose;
#  - a piped stdin is one message (as llm); --lines keeps one per line;
#    """ opens a multi-line message, a line ending in """ sends it;
#  - --json --stream prints one object per token whose texts add up to the
#    answer and whose count is the answer's token count, with disk bytes
#    under a memory budget;
#  - history list|show|search --json; search takes rout* and a OR b;
#  - the shared commands in plain mode: /show, /set n=N and the ollama
#    spelling, /rename, /copy without a terminal (a clear error), /raw.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
PY=/usr/bin/python3
OUT=tests/out/everyday
rm -rf $OUT
mkdir -p $OUT/models
K3=${K3:-./k3}
export XDG_DATA_HOME=$PWD/$OUT/xdg XDG_STATE_HOME=$PWD/$OUT/xdg HOME=$PWD/$OUT/home
M=$OUT/models/small
$K3 gen $M --preset small --seed 7 >/dev/null 2>&1

# 1. the random-weights marker
if $PY -c "import json,sys; sys.exit(0 if json.load(open('$M/config.json')).get('k3_random_weights') is True else 1)"; then
    pass "k3 gen writes \"k3_random_weights\": true into config.json"
else fail "k3 gen random-weights marker" "$(grep -c k3_random $M/config.json) in config.json"; fi

# 2. k3 models: a directory of models (one packed), $K3_MODELS, nothing found
mkdir -p $OUT/models/not_a_model
$K3 pack $M $OUT/models/small_packed >/dev/null 2>&1
$K3 models $OUT/models > $OUT/models.txt 2>&1
if grep -q "^$M  *28.0 MB  BF16  *kimi_linear, 8 layers, 16 experts top-4, bfloat16, random weights" $OUT/models.txt \
    && grep -q "^$OUT/models/small_packed  *28.1 MB  BF16  *kimi_linear, .*, packed, random weights" $OUT/models.txt \
    && ! grep -q not_a_model $OUT/models.txt; then pass "k3 models DIR lists the models with size, type and architecture (one packed)"
else fail "k3 models DIR" "$(cat $OUT/models.txt)"; fi
$K3 models models/k3-mini > $OUT/models_mini.txt 2>&1
grep -q "^models/k3-mini  *1.9 MB  BF16 + MXFP4 experts  kimi_k3" $OUT/models_mini.txt &&
    pass "k3 models names the trained demo's type as its tensors are: BF16 + MXFP4 experts" ||
    fail "k3 models type of k3-mini" "$(cat $OUT/models_mini.txt)"
$PY tests/ref/gen_ckpt.py $OUT/fp8 --dtype fp8 --seed 13 --hidden 160 --moe-inter 136 >/dev/null 2>&1
$K3 models $OUT/fp8 > $OUT/models_fp8.txt 2>&1
grep -q "^$OUT/fp8  .*  F8_E4M3  *kimi_linear, 4 layers, 8 experts top-2, bfloat16$" $OUT/models_fp8.txt &&
    pass "k3 models names an fp8 checkpoint's type F8_E4M3 (its quantization_config is not MXFP4)" ||
    fail "k3 models type of an fp8 checkpoint" "$(cat $OUT/models_fp8.txt)"
K3_MODELS=$OUT/models $K3 models > $OUT/models_env.txt 2>&1
grep -q "^$M " $OUT/models_env.txt && pass "k3 models reads \$K3_MODELS" || fail "k3 models \$K3_MODELS" "$(cat $OUT/models_env.txt)"
$K3 models $OUT/models/not_a_model > $OUT/none.txt 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "no model directories found" $OUT/none.txt && pass "k3 models says when it finds none" \
    || fail "k3 models, none" "rc $rc: $(cat $OUT/none.txt)"
$K3 models /nonexistent/dir > $OUT/bad.txt 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "not a directory" $OUT/bad.txt && pass "k3 models on a missing directory: one-line error, exit 1" \
    || fail "k3 models missing dir" "rc $rc: $(cat $OUT/bad.txt)"
$K3 help models > $OUT/help_models.txt 2>&1
missing=""
for s in "moonshotai/Kimi-Linear-48B-A3B-Instruct" "moonshotai/Kimi-K3" "hf download" "huggingface-cli download" \
         "k3 pack" "--mem 16G" "s/token" "98 GB" "1.56 TB" "estimate"; do
    grep -q -- "$s" $OUT/help_models.txt || missing="$missing '$s'"
done
[ -z "$missing" ] && pass "k3 help models: repositories, download, disk, pack, --mem, speed" || fail "k3 help models" "missing$missing"

# 3. a piped stdin is one message; --lines keeps one per line
printf 'line one\nline two\n' | $K3 chat $M --db $OUT/p.db --json -n 3 > $OUT/whole.jsonl 2>$OUT/whole.err
$K3 history export last --db $OUT/p.db --format json > $OUT/whole.json 2>&1
if [ "$(wc -l < $OUT/whole.jsonl)" -eq 1 ] && $PY - $OUT/whole.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["messages"]
sys.exit(0 if [x["content"] for x in m if x["role"] == "user"] == ["line one\nline two"] else 1)
PY
then pass "piped stdin is one message (two lines, one turn)"
else fail "piped stdin is one message" "$(wc -l < $OUT/whole.jsonl) turns; $(cat $OUT/whole.err)"; fi
printf 'line one\nline two\n' | $K3 chat $M --db $OUT/p.db --json --lines -n 3 > $OUT/lines.jsonl 2>$OUT/lines.err
[ "$(wc -l < $OUT/lines.jsonl)" -eq 2 ] && pass "--lines: one turn per line" || fail "--lines" "$(wc -l < $OUT/lines.jsonl) turns: $(cat $OUT/lines.err)"
printf '/set\n' | $K3 chat $M --db $OUT/p.db --resume last > $OUT/one.out 2>$OUT/one.err
grep -q 'n=512 (answer length)' $OUT/one.err && [ ! -s $OUT/one.out ] && pass "one piped line is taken as typed (/set runs as a command)" \
    || fail "one piped line" "$(cat $OUT/one.err)"

# 4. """ multi-line input in plain mode
printf 'a\n"""b\nc"""\n"""\nd\ne\n"""\n"""f"""\n' | $K3 chat $M --db $OUT/ml.db --json --lines -n 2 > $OUT/ml.jsonl 2>$OUT/ml.err
$K3 history export last --db $OUT/ml.db --format json > $OUT/ml.json 2>&1
if $PY - $OUT/ml.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["messages"]
got = [x["content"] for x in m if x["role"] == "user"]
want = ["a", "b\nc", "d\ne", "f"]
print(got) if got != want else None
sys.exit(0 if got == want else 1)
PY
then pass "\"\"\" multi-line messages in plain mode (4 messages, newlines kept)"
else fail "\"\"\" multi-line in plain mode" "$(cat $OUT/ml.err)"; fi

# 5. --json --stream: one object per token, at a budget that streams from disk
# a budget just above the model's minimum (which depends on the build: ASan's is larger), so experts stream
MIN=$($K3 chat $M --db $OUT/s.db --mem 1M < /dev/null 2>&1 | sed -n 's/.*use --mem \([0-9]*\)M or more.*/\1/p')
printf 'Tell me about routing\n' | $K3 chat $M --db $OUT/s.db --json --stream -n 12 --mem $((${MIN:-40} + 4))M > $OUT/stream.jsonl 2>$OUT/stream.err
if $PY - $OUT/stream.jsonl <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
toks, turn = lines[:-1], lines[-1]
ok = len(toks) == turn["generated_tokens"] and len(toks) > 0
ok = ok and all(set(t) >= {"text", "id", "t_ms", "bytes_read", "hit"} for t in toks)
joined = "".join(t["text"] for t in toks)   # bytes of a character cut by the end come as U+FFFD in the total
ok = ok and turn["text"].startswith(joined) and set(turn["text"][len(joined):]) <= {"\ufffd"}
ok = ok and all(t["t_ms"] > 0 for t in toks) and all(toks[i]["t_ms"] <= toks[i + 1]["t_ms"] for i in range(len(toks) - 1))
ok = ok and sum(t["bytes_read"] for t in toks) > 0 and all(t["hit"] is None or 0 <= t["hit"] <= 1 for t in toks)
if not ok: print(len(toks), turn, toks[:3])
sys.exit(0 if ok else 1)
PY
then pass "--json --stream: one object per token (text adds up to the answer, t_ms rising, bytes read under --mem)"
else fail "--json --stream" "$(tail -c 300 $OUT/stream.err)"; fi
printf 'x\n' | $K3 chat $M --db $OUT/s.db --stream > /dev/null 2>$OUT/stream_only.err; rc=$?
[ $rc -eq 2 ] && pass "--stream without --json is a usage error" || fail "--stream without --json" "rc $rc"

# 6. history --json and search operators
printf 'routing experts per token\nzebra crossing ahead\nthe cat sat\n' | $K3 chat $M --db $OUT/h.db --lines -n 2 >/dev/null 2>&1
$K3 history list --db $OUT/h.db --json > $OUT/list.json 2>&1
$K3 history show last --db $OUT/h.db --json > $OUT/show.json 2>&1
$K3 history export last --db $OUT/h.db --format json > $OUT/export.json 2>&1
if $PY -c "
import json,sys
l = json.load(open('$OUT/list.json'))
sys.exit(0 if isinstance(l, list) and len(l) == 1 and l[0]['turns'] == 3 and len(l[0]['id']) == 8 else 1)" \
    && cmp -s $OUT/show.json $OUT/export.json; then pass "history list --json (an array) and show --json (the JSON export)"
else fail "history list/show --json" "$(head -c 300 $OUT/list.json)"; fi
hits() { $K3 history search "$@" --db $OUT/h.db --json 2>/dev/null | $PY -c "import json,sys; print(' '.join(sorted(h['snippet'] for h in json.load(sys.stdin))))" 2>/dev/null; } 
H=$(hits 'rout*')
echo "$H" | grep -q '\[routing\]' && pass "history search rout* matches 'routing' (prefix)" || fail "search prefix" "got '$H'"
H=$(hits zebra OR routing)
echo "$H" | grep -q '\[zebra\]' && echo "$H" | grep -q '\[routing\]' && pass "history search 'zebra OR routing' matches either" \
    || fail "search OR" "got '$H'"
H=$(hits cat sat)
[ "$H" = "the [cat] [sat]" ] && pass "history search: plain words still AND" || fail "search AND" "got '$H'"
H=$(hits 'OR')
[ -z "$H" ] && pass "history search: a lone OR is literal text (no match, no error)" || fail "search lone OR" "got '$H'"

# 7. the shared commands in plain mode
printf '/show\n/set parameter num_predict 2\nhello\n/set\n/rename Plain title\n/copy\n/raw\n/bye\nnever sent\n' |
    $K3 chat $M --db $OUT/c.db --plain --lines --json > $OUT/cmds.jsonl 2>$OUT/cmds.err
missing=""
for s in "random weights (k3 gen)" "architecture  kimi_linear: 8 layers (6 KDA" "experts       16 routed, top 4" \
         "type          BF16" "dtype         bfloat16" "context       4096 tokens" "file size     28.0 MB" "plan          fully resident" \
         "n=2 (answer length)" "renamed to \"Plain title\"" "/copy: no terminal" "line mode always prints answers"; do
    grep -q -- "$s" $OUT/cmds.err || missing="$missing '$s'"
done
G=$($PY -c "import json; print(json.loads(open('$OUT/cmds.jsonl').readline())['generated_tokens'])" 2>/dev/null)
if [ -z "$missing" ] && [ "$G" = 2 ] && $K3 history list --db $OUT/c.db | grep -q 'Plain title' \
    && [ "$(wc -l < $OUT/cmds.jsonl)" -eq 1 ]; then
    pass "plain mode: /show, /set parameter num_predict 2 (answer of 2 tokens), /set, /rename, /copy, /raw, /bye"
else fail "plain-mode commands" "generated '$G', missing$missing"; fi
# the history keeps the model's type: history show, the Markdown and JSON exports, an import of it
$K3 history show last --db $OUT/c.db > $OUT/type_show.txt 2>&1
$K3 history export last --db $OUT/c.db --format md > $OUT/type.md 2>&1
$K3 history export last --db $OUT/c.db --format json -o $OUT/type.json --force 2>/dev/null
$K3 history import $OUT/type.json --db $OUT/type_imported.db >/dev/null 2>&1
TI=$($K3 history list --db $OUT/type_imported.db --json 2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)[0]['model_type'])" 2>&1)
if grep -q '^model: .*small (.*), type BF16$' $OUT/type_show.txt && grep -q '^- model type: BF16$' $OUT/type.md &&
    grep -q '"model_type": "BF16"' $OUT/type.json && [ "$TI" = BF16 ]; then
    pass "history show, export (md, json) and import keep the model's type (BF16)"
else fail "history model type" "show: $(grep model: $OUT/type_show.txt); md: $(grep type $OUT/type.md); imported '$TI'"; fi
