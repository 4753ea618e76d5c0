#!/bin/sh
# t_gguf_vocab.sh - `k3 tokenize FILE.gguf`: the tokenizer built from a GGUF's
# vocabulary (engine/formats/gguf_vocab.c) against the model's own
# tiktoken.model + tokenizer_config.json. tests/ref/gguf_vocab.py writes the
# GGUF as llama.cpp's converter does (docs/MODEL.md, "The vocabulary in a
# GGUF"): on a generated tiny model (vocab_size 768 < 512 ranks + 258
# specials: the converter drops the last two slots, as for the real Kimi)
# the ids and decoded bytes must be the tiktoken path's; on models/k3-mini
# every id must decode as in llama.cpp's own file
# (tests/fixtures/gguf/k3mini_vocab.gguf); a synthetic vocabulary at Kimi's
# sizes gives the same ids and bytes; every bad variant is refused with
# one line naming the file; a tiktoken.model beside the file is used first.
# tests/test_gguf_vocab.c runs the whole corpus.
# Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh).
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
PY=/usr/bin/python3
GEN=tests/ref/gguf_vocab.py
W=tests/out/gguf_vocab
TINY=$W/tiny
mkdir -p "$W"

if [ ! -f "$TINY/tiktoken.model" ] && ! "$K3" gen "$TINY" --preset tiny > "$W/gen.log" 2>&1; then
    echo "FAIL gguf_vocab_gen: $K3 gen $TINY --preset tiny failed: $(tail -n 1 "$W/gen.log")"
    exit 1
fi
if ! $PY $GEN write "$TINY" "$W/tiny.gguf" 2> "$W/write.err"; then
    echo "FAIL gguf_vocab_write: $(tail -n 1 "$W/write.err")"
    exit 1
fi

# ---- the same ids and the same decoded bytes as the tiktoken path
printf 'The quick brown fox. 人工智能是计算机科学 日本語のテキスト 한국어 12345 3.14 😀🚀 👨‍👩‍👧‍👦\n\tint main(void) { return 0; }\n' > "$W/mixed.txt"
printf 'before<|im_end|>after [EOS][BOS] <|reserved_token_767|> <|reserved_token_768|> <|im_ x' > "$W/specials.txt"
printf "I'LL do it, don't worry. Größe ¿Dónde? Ελληνικά Привет مرحبا e\314\201   \r\n\n  x" > "$W/latin.txt"
bad=""
for name in mixed specials latin; do
    "$K3" tokenize "$TINY" --text-file "$W/$name.txt" > "$W/$name.tik" 2>&1
    "$K3" tokenize "$W/tiny.gguf" --text-file "$W/$name.txt" > "$W/$name.gguf.ids" 2>&1
    cmp -s "$W/$name.tik" "$W/$name.gguf.ids" && [ -s "$W/$name.tik" ] || bad="$bad $name"
done
if [ -z "$bad" ]; then echo "PASS gguf_vocab_tiny_ids"
else echo "FAIL gguf_vocab_tiny_ids: ids differ for$bad (see $W/*.tik vs $W/*.gguf.ids)"; fi
all_ids=$(seq 0 769 | tr '\n' ' ')
"$K3" tokenize "$TINY" --decode "$(seq 0 767 | tr '\n' ' ')" > "$W/all.tik" 2> "$W/all.err"
"$K3" tokenize "$W/tiny.gguf" --decode "$(seq 0 767 | tr '\n' ' ')" > "$W/all.gguf.txt" 2>> "$W/all.err"
if cmp -s "$W/all.tik" "$W/all.gguf.txt" && [ -s "$W/all.tik" ] &&
   "$K3" tokenize "$W/tiny.gguf" --decode "$all_ids" > /dev/null 2>&1 &&
   ! "$K3" tokenize "$W/tiny.gguf" --decode "770" > /dev/null 2>&1; then
    echo "PASS gguf_vocab_tiny_decode"
else
    echo "FAIL gguf_vocab_tiny_decode: every id 0..767 decodes otherwise, or the vocabulary is not 0..769 ($(head -n 1 "$W/all.err"))"
fi

# ---- this generator and llama.cpp's gguf-py give the same vocabulary for models/k3-mini
$PY $GEN write models/k3-mini "$W/mini.gguf"
ids=$(seq 0 2049 | tr '\n' ' ')
"$K3" tokenize "$W/mini.gguf" --decode "$ids" > "$W/mini.ours" 2> "$W/mini.err"
"$K3" tokenize tests/fixtures/gguf/k3mini_vocab.gguf --decode "$ids" > "$W/mini.llamacpp" 2>> "$W/mini.err"
"$K3" tokenize models/k3-mini --decode "$ids" > "$W/mini.tik" 2>> "$W/mini.err"
if [ -s "$W/mini.tik" ] && cmp -s "$W/mini.ours" "$W/mini.llamacpp" && cmp -s "$W/mini.tik" "$W/mini.llamacpp"; then
    echo "PASS gguf_vocab_writer_matches_llamacpp"
else
    echo "FAIL gguf_vocab_writer_matches_llamacpp: ids 0..2049 decode differently ($(head -n 1 "$W/mini.err"))"
fi

# ---- at Kimi's sizes (163,584 ranks, vocab_size 163,840, a 7 MB header): a
# synthetic vocabulary (tests/ref/gguf_vocab.py synthetic), the same ids and
# every id's bytes
KIMI=$W/kimi_size
$PY $GEN synthetic "$KIMI" && $PY $GEN write "$KIMI" "$W/kimi_size.gguf"
cat "$W/mixed.txt" "$W/latin.txt" "$W/specials.txt" > "$W/kimi_text.txt"
"$K3" tokenize "$KIMI" --text-file "$W/kimi_text.txt" > "$W/kimi.tik" 2>&1
"$K3" tokenize "$W/kimi_size.gguf" --text-file "$W/kimi_text.txt" > "$W/kimi.gguf.ids" 2>&1
if [ "$(wc -w < "$W/kimi.tik")" -gt 50 ] && cmp -s "$W/kimi.tik" "$W/kimi.gguf.ids"; then echo "PASS gguf_vocab_kimi_size_ids"
else echo "FAIL gguf_vocab_kimi_size_ids: $(head -c 200 "$W/kimi.gguf.ids")"; fi
: > "$W/kimi_all.tik"
: > "$W/kimi_all.gguf.txt"
for start in $(seq 0 16384 163841); do
    end=$((start + 16383))
    [ $end -gt 163841 ] && end=163841
    ids=$(seq $start $end | tr '\n' ' ')
    "$K3" tokenize "$KIMI" --decode "$ids" >> "$W/kimi_all.tik" 2>&1
    "$K3" tokenize "$W/kimi_size.gguf" --decode "$ids" >> "$W/kimi_all.gguf.txt" 2>&1
done
if [ "$(wc -c < "$W/kimi_all.tik")" -gt 1000000 ] && cmp -s "$W/kimi_all.tik" "$W/kimi_all.gguf.txt"; then
    echo "PASS gguf_vocab_kimi_size_every_id"
else
    echo "FAIL gguf_vocab_kimi_size_every_id: ids 0..163841 decode otherwise ($(head -c 200 "$W/kimi_all.gguf.txt"))"
fi

# ---- bad vocabularies: exit 1, one line naming the file and the defect
$PY $GEN defects > "$W/defects.txt"
while IFS="	" read -r name msg; do
    f="$W/bad_$name.gguf"
    if ! $PY $GEN write models/k3-mini "$f" "$name" 2> "$W/bad.err"; then
        echo "FAIL gguf_vocab_bad_$name: the generator failed: $(tail -n 1 "$W/bad.err")"
        continue
    fi
    "$K3" tokenize "$f" --text hi > "$W/bad.out" 2> "$W/bad.err"
    rc=$?
    if [ $rc -eq 1 ] && [ ! -s "$W/bad.out" ] && [ "$(wc -l < "$W/bad.err")" -eq 1 ] &&
       grep -qF -- "$f: " "$W/bad.err" && grep -qF -- "$msg" "$W/bad.err"; then
        echo "PASS gguf_vocab_bad_$name"
    else
        echo "FAIL gguf_vocab_bad_$name: exit $rc, stderr '$(head -n 1 "$W/bad.err")' (want '$msg')"
    fi
done < "$W/defects.txt"

# ---- a folder holding only the GGUF reads its vocabulary; a tiktoken.model
# beside the file wins (as k3_model_open chooses)
rm -rf "$W/folder" && mkdir -p "$W/folder" && cp tests/fixtures/gguf/k3mini_vocab.gguf "$W/folder/"
"$K3" tokenize "$W/folder" --text-file "$W/mixed.txt" > "$W/folder.ids" 2>&1
"$K3" tokenize models/k3-mini --text-file "$W/mixed.txt" > "$W/folder.tik" 2>&1
if [ -s "$W/folder.tik" ] && cmp -s "$W/folder.ids" "$W/folder.tik"; then echo "PASS gguf_vocab_folder"
else echo "FAIL gguf_vocab_folder: $(head -c 200 "$W/folder.ids")"; fi
echo garbage > "$W/folder/tiktoken.model" && cp models/k3-mini/tokenizer_config.json "$W/folder/"
"$K3" tokenize "$W/folder/k3mini_vocab.gguf" --text hi > /dev/null 2> "$W/beside.err"
rc=$?
if [ $rc -eq 1 ] && grep -qF -- "$W/folder/tiktoken.model:1:" "$W/beside.err"; then echo "PASS gguf_vocab_tiktoken_beside_wins"
else echo "FAIL gguf_vocab_tiktoken_beside_wins: exit $rc, '$(head -n 1 "$W/beside.err")'"; fi

# ---- --chat needs the model folder's chat format: a usage error on a .gguf
"$K3" tokenize "$W/tiny.gguf" --chat "$W/mixed.txt" > /dev/null 2> "$W/chat.err"
rc=$?
if [ $rc -eq 2 ] && grep -qF -- "--chat needs the model's folder" "$W/chat.err"; then echo "PASS gguf_vocab_chat_refused"
else echo "FAIL gguf_vocab_chat_refused: exit $rc, '$(head -n 1 "$W/chat.err")'"; fi
exit 0
