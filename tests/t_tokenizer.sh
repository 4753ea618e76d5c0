#!/bin/sh
# t_tokenizer.sh - `k3 tokenize` against the independent Python reference
# (tests/ref/tok_ref.py) on a generated tokenizer: pre-tokens (via
# test_tokenizer --pretok, including every Unicode 14 character), encode of
# mixed texts, decode round trips, chat rendering, and the error exits.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
TOKTEST=${TOKTEST:-${K3_TESTBIN:-build/tests}/test_tokenizer}   # its --pretok mode prints pre-tokens
PY=/usr/bin/python3
REF=tests/ref/tok_ref.py
DIR=tests/out/tok_model
W=tests/out/tok_work
mkdir -p "$W"

if [ ! -f "$DIR/tiktoken.model" ] || [ ! -f "$DIR/config.json" ]; then
    if ! "$K3" gen "$DIR" --preset tiny > "$W/gen.log" 2>&1; then
        echo "FAIL tok_gen: $K3 gen $DIR --preset tiny failed: $(tail -n 1 "$W/gen.log")"
        exit 1
    fi
fi
if ! $PY -c 'import regex' 2> /dev/null; then
    echo "FAIL tok_reference: $PY lacks the regex module (apt-get install python3-regex)"
    exit 1
fi

# ---- the test texts (printf interprets the escapes; files have no BOM)
printf 'The quick brown fox jumps over the lazy dog. Hello, world! "Quotes" (parens) [brackets] {braces}; a-b_c/d.\nSecond line... end?' > "$W/english.txt"
printf '人工智能是计算机科学的一个分支。中文English混合、日本語のテキスト（カタカナ）ですね。々〆ー 한국어 문장.' > "$W/cjk.txt"
printf '12345678 3.14159 -42 +7 1,000,000 2024-05-17T12:34:56Z 0x7fff 1e-6 50%% $19.99 ٣٤٥ Ⅻ ½ 12abc34' > "$W/digits.txt"
printf 'Emoji 😀😃 🚀🌍 👨‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 ❤️ ☕ ✅❌ 🏳️‍🌈 end😀' > "$W/emoji.txt"
printf 'a   b\n\n  c\t\t\n   \r\n  x  \n\n\n    y \302\240\302\240z\343\200\200w\302\205v\034u   \000nul' > "$W/whitespace.txt"
printf '#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n\tfor (int i = 0; i < argc; i++) {\n\t\tprintf("%%s\\n", argv[i]);\n\t}\n\treturn 0; // done\n}\n\ndef f(x):\n    return {"k": [x, x**2]}  # dict\n' > "$W/code.txt"
printf "I'LL do it, don't worry. WE'RE here; they've gone. She'd say it's fine. ſ's 'S 'T'RE x'll Y'D" > "$W/contractions.txt"
printf 'before<|im_end|>after <|im_user|>user<|im_middle|>hi<|im_end|>[EOS][BOS] <|reserved_token_517|> <|im_ <|im_end|<|im_end|>' > "$W/specials.txt"
printf 'Français: où est la bibliothèque? Größe, Straße, Ärger. Español: ¿Dónde? niño. Tiếng Việt. Ελληνικά. Привет мир. مرحبا. e\314\201 a\314\212' > "$W/latin.txt"
$PY - "$W" << 'EOF'
import random, sys
w = sys.argv[1]
# runs past the 25,000-character limit on both sides of the split rule
open(w + "/longruns.txt", "w", encoding="utf-8", newline="").write(
    "ab" * 13000 + " " * 26000 + "x" + "\n" * 100 + "中" * 25100 + "!" * 30)
random.seed(7)
pool = list("abcXYZ  \t\n\r'sStTdLm09.,;:!?-_()<>|/\\\"") + [
    "\u00e9", "\u0301", "\u01c5", "\u02b0", "\u30fc", "\u3001", "\u4e2d", "\u6587", "\u65e5",
    "\u306e", "\u30ab", "\ud55c", "\u0663", "\u216b", "\u0085", "\u00a0", "\u3000", "\u2028",
    "\u001c", "\u200b", "\U0001f600", "\u200d", "\ufe0f", "\U0001f1eb", "\u3005", "\uff71",
    "\uff21", "<|im_end|>", "[EOS]", "<|im_", "\u017f"]
open(w + "/random.txt", "w", encoding="utf-8", newline="").write(
    "".join(random.choice(pool) for _ in range(3000)))
# every code point assigned in Unicode 14 (PCRE2 10.42's tables; Python's
# `regex` already knows Unicode 15 additions) in letter, space, digit and
# line contexts, so each character class is compared
import unicodedata
cps = [chr(c) for c in range(0x110000)
       if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) != "Cn"]
open(w + "/allchars.txt", "w", encoding="utf-8", newline="").write(
    "".join("a" + c + " " + c + "1" + c + "\n" for c in cps))
EOF

# ---- pre-tokenisation: C (PCRE2) vs Python (regex with && intersections)
if [ -x "$TOKTEST" ]; then
    for name in english cjk digits emoji whitespace code contractions specials latin longruns random allchars; do
        "$TOKTEST" --pretok < "$W/$name.txt" > "$W/$name.c.pieces"
        $PY $REF "$DIR" pretok < "$W/$name.txt" > "$W/$name.py.pieces"
        if cmp -s "$W/$name.c.pieces" "$W/$name.py.pieces"; then echo "PASS tok_pretok_$name"
        else echo "FAIL tok_pretok_$name: pre-tokens differ (see $W/$name.c.pieces vs $W/$name.py.pieces)"; fi
    done
else
    echo "FAIL tok_pretok: $TOKTEST not built (set TOKTEST=path/to/test_tokenizer)"
fi

# ---- encode: C vs Python, then decode back to the same bytes
for name in english cjk digits emoji whitespace code contractions specials latin longruns random; do
    f="$W/$name.txt"
    if ! "$K3" tokenize "$DIR" --text-file "$f" > "$W/$name.c.ids" 2> "$W/$name.c.err"; then
        echo "FAIL tok_encode_$name: k3 tokenize failed: $(head -n 1 "$W/$name.c.err")"
        continue
    fi
    $PY $REF "$DIR" encode < "$f" > "$W/$name.py.ids"
    if ! cmp -s "$W/$name.c.ids" "$W/$name.py.ids"; then
        echo "FAIL tok_encode_$name: ids differ from $REF (see $W/$name.c.ids vs $W/$name.py.ids)"
        continue
    fi
    echo "PASS tok_encode_$name"
    [ "$name" = longruns ] && continue    # too many ids for one command-line argument
    "$K3" tokenize "$DIR" --decode "$(cat "$W/$name.c.ids")" > "$W/$name.back" 2> "$W/$name.d.err"
    if cmp -s "$W/$name.back" "$f"; then
        echo "PASS tok_decode_$name"
    else
        echo "FAIL tok_decode_$name: --decode does not give back $f ($(head -n 1 "$W/$name.d.err"))"
    fi
done

# ---- decode of ids that split characters: both replace the same way
ids="$(cat "$W/emoji.c.ids") 240 159 65"
"$K3" tokenize "$DIR" --decode "$ids" > "$W/partial.c.txt"
$PY $REF "$DIR" decode "$ids" > "$W/partial.py.txt"
if cmp -s "$W/partial.c.txt" "$W/partial.py.txt"; then echo "PASS tok_decode_replacement"
else echo "FAIL tok_decode_replacement: U+FFFD replacement differs from Python"; fi

# ---- chat rendering: system, user, assistant + generation prompt
cat > "$W/chat.json" << 'EOF'
[
  {"role": "system", "content": "You are a helpful assistant. 你好!"},
  {"role": "user", "content": "What is 12345 + 678?\n\tShow <|im_end|> steps."},
  {"role": "assistant", "content": "It's 13023. 😀"}
]
EOF
if "$K3" tokenize "$DIR" --chat "$W/chat.json" > "$W/chat.c.ids" 2> "$W/chat.err" &&
   $PY $REF "$DIR" chat "$W/chat.json" > "$W/chat.py.ids" && cmp -s "$W/chat.c.ids" "$W/chat.py.ids"; then
    echo "PASS tok_chat"
else
    echo "FAIL tok_chat: C and Python chat ids differ or failed ($(head -n 1 "$W/chat.err"))"
fi

# ---- exit codes and one-line errors
expect_exit() {   # name, wanted code, wanted substring of stdout+stderr, command...
    name=$1 want=$2 msg=$3
    shift 3
    "$@" > "$W/exit.out" 2> "$W/exit.err"
    rc=$?
    if [ $rc -eq "$want" ] && cat "$W/exit.out" "$W/exit.err" | grep -qF -- "$msg" &&
       [ "$(wc -l < "$W/exit.err")" -le 1 ]; then
        echo "PASS $name"
    else
        echo "FAIL $name: exit $rc (want $want), stderr '$(head -n 1 "$W/exit.err")'"
    fi
}
printf 'ok\377bad' > "$W/invalid.txt"
echo '[{"role": "user", "content": "hi"}' > "$W/bad.json"
expect_exit tok_help 0 "usage: k3 tokenize" "$K3" tokenize --help
expect_exit tok_usage_no_mode 2 "give one of" "$K3" tokenize "$DIR"
expect_exit tok_bad_id 1 "outside the vocabulary" "$K3" tokenize "$DIR" --decode "1 99999999"   # an error (1) like eval, not usage
expect_exit tok_invalid_utf8 1 "$W/invalid.txt: invalid UTF-8 at byte 2" "$K3" tokenize "$DIR" --text-file "$W/invalid.txt"
expect_exit tok_bad_json 1 "$W/bad.json:" "$K3" tokenize "$DIR" --chat "$W/bad.json"
expect_exit tok_missing_model 1 "tests/out/no_such_model/tiktoken.model" "$K3" tokenize tests/out/no_such_model --text hi
exit 0
