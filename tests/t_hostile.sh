#!/bin/sh
# t_hostile.sh - files from outside and files k3 writes, as an attacker or an
# unlucky user would arrange them (issue 10 part A). Each check names the
# defect it guards: a weight_map value that once reached a use-after-free, a
# safetensors header a few bytes short, a FIFO or /dev/zero in place of a
# file, output to a device, a FIFO or through a symlink, predictable temp
# names, a failed --trace write, broken manifests, imports with absurd numbers.
# K3=build-asan/k3 runs the same checks on the sanitizer build.
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
K3=${K3:-./k3}
OUT=${HOSTILE_OUT:-tests/out/hostile}
mkdir -p $OUT
GOOD=$OUT/good
[ -f $GOOD/config.json ] || ./k3 gen $GOOD --preset tiny --seed 2 >/dev/null 2>&1
# a packed copy left by an earlier run is used only if this k3 verifies it (an older format is re-packed)
./k3 pack --verify $GOOD.packed >/dev/null 2>&1 || ./k3 pack $GOOD $GOOD.packed --force >/dev/null 2>&1

# expect NAME WANT_CODE WANT_TEXT command... : exit code, one stderr line
# containing WANT_TEXT (empty: anything), and no sanitizer report.
expect() {
    name=$1 want=$2 text=$3
    shift 3
    timeout ${K3_TIMEOUT:-30} "$@" >$OUT/stdout 2>$OUT/stderr </dev/null
    code=$?
    if grep -q "Sanitizer\|runtime error" $OUT/stderr; then
        echo "FAIL $name: $(grep -m1 -E 'ERROR|runtime error' $OUT/stderr)"
    elif [ $code -eq 124 ]; then
        echo "FAIL $name: hung (killed after ${K3_TIMEOUT:-30} s)"
    elif [ $code -ne $want ]; then
        echo "FAIL $name: exit code $code, want $want: $(head -c 300 $OUT/stderr)"
    elif [ $want -ne 0 ] && [ "$(wc -l < $OUT/stderr)" -ne 1 ]; then
        echo "FAIL $name: want one line on stderr: $(head -c 300 $OUT/stderr)"
    elif [ -n "$text" ] && ! grep -q -- "$text" $OUT/stderr; then
        echo "FAIL $name: message lacks '$text': $(head -c 300 $OUT/stderr)"
    else
        echo "PASS $name"
    fi
}

# ---- defect 2: bad weight_map values (use-after-free under ASan before)
for mode in index_slash index_dotdot index_empty index_nonstring; do
    $PY tests/ref/corrupt_ckpt.py $GOOD $OUT/$mode $mode
    expect "weight_map $mode" 1 "is not a plain file name" $K3 eval $OUT/$mode --ids "1 2" --logits $OUT/x.f32
done

# ---- defect 12: the tensors must tile the data area exactly
for k in 1 2 3 4 5 6 7; do
    $PY tests/ref/corrupt_ckpt.py $GOOD $OUT/short$k header_short$k
    expect "safetensors header $k bytes short" 1 "end $k bytes before the end of the file" \
        $K3 eval $OUT/short$k --ids "1 2" --logits $OUT/x.f32
done
expect "pack refuses a header 3 bytes short" 1 "end 3 bytes before" $K3 pack $OUT/short3 $OUT/short3.packed --force
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/trailing trailing_bytes
expect "safetensors trailing bytes" 1 "8 bytes before the end" $K3 eval $OUT/trailing --ids "1 2" --logits $OUT/x.f32

# ---- defect 11: a FIFO in place of any model file: one line, no hang
for src in good good.packed; do
    for f in $(ls $OUT/$src); do
        case $f in generation_config.json) continue ;; esac
        rm -rf $OUT/fifo && cp -r $OUT/$src $OUT/fifo && rm $OUT/fifo/$f && mkfifo $OUT/fifo/$f
        expect "FIFO as $src/$f" 1 "fifo/$f: not a regular file" $K3 run $OUT/fifo -p hi -n 1
    done
done
rm -rf $OUT/fifo && cp -r $GOOD $OUT/fifo
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/fifo index_slash && rm $OUT/fifo/model.safetensors.index.json && mkfifo $OUT/fifo/model.safetensors.index.json
expect "FIFO as model.safetensors.index.json" 1 "not a regular file" $K3 run $OUT/fifo -p hi -n 1

# ---- defect 10: whole-file reads are capped and refuse non-regular files
rm -rf $OUT/zero && cp -r $GOOD $OUT/zero && rm $OUT/zero/tiktoken.model && ln -s /dev/zero $OUT/zero/tiktoken.model
expect "/dev/zero as tiktoken.model" 1 "not a regular file" $K3 run $OUT/zero -p hi -n 1
expect "--prompt-file /dev/zero" 1 "not a regular file" $K3 run $GOOD --prompt-file /dev/zero -n 1
expect "--text-file /dev/zero" 1 "not a regular file" $K3 tokenize $GOOD --text-file /dev/zero
expect "--chat /dev/zero" 1 "not a regular file" $K3 tokenize $GOOD --chat /dev/zero
expect "history import /dev/zero" 1 "not a regular file" $K3 history import /dev/zero --db $OUT/h.db
rm -f $OUT/huge.txt && truncate -s 17M $OUT/huge.txt
expect "--prompt-file over the limit" 1 "more than the limit" $K3 run $GOOD --prompt-file $OUT/huge.txt -n 1
rm -f $OUT/huge.txt

# ---- defect 3: output files
rm -rf $OUT/w && mkdir -p $OUT/w
if [ "$(id -u)" = 0 ] && mknod $OUT/w/full c 1 7 2>/dev/null && mknod $OUT/w/null c 1 3 2>/dev/null; then
    expect "--logits to a full device fails" 1 "No space left" $K3 eval $GOOD --ids "1 2" --logits $OUT/w/full
    if [ -c $OUT/w/full ]; then echo "PASS --logits does not replace a device node"
    else echo "FAIL --logits does not replace a device node: $OUT/w/full is now $(stat -c %F $OUT/w/full)"; fi
    expect "--logits to a null device" 0 "" $K3 eval $GOOD --ids "1 2" --logits $OUT/w/null
    [ -c $OUT/w/null ] && echo "PASS --logits to /dev/null stays a device" || echo "FAIL --logits to /dev/null stays a device: replaced"
fi
mkfifo $OUT/w/fifo
(timeout 30 cat $OUT/w/fifo | wc -c > $OUT/w/fifo.bytes) &
expect "--logits into a FIFO" 0 "" $K3 eval $GOOD --ids "1 2" --logits $OUT/w/fifo
wait
if [ -p $OUT/w/fifo ] && [ "$(cat $OUT/w/fifo.bytes)" = 6144 ]; then echo "PASS --logits into a FIFO is written directly"
else echo "FAIL --logits into a FIFO is written directly: $(stat -c %F $OUT/w/fifo), $(cat $OUT/w/fifo.bytes) bytes read"; fi
echo old > $OUT/w/target && ln -s target $OUT/w/link
expect "--logits through a symlink" 0 "" $K3 eval $GOOD --ids "1 2" --logits $OUT/w/link
if [ -L $OUT/w/link ] && [ "$(stat -c %s $OUT/w/target)" = 6144 ]; then echo "PASS --logits writes through a symlink"
else echo "FAIL --logits writes through a symlink: link $(stat -c %F $OUT/w/link), target $(stat -c %s $OUT/w/target) bytes"; fi
echo precious > $OUT/w/victim
for tmpname in out.f32.tmp out.f32.tmp1 out.f32.tmp$$; do ln -sf victim $OUT/w/$tmpname; done
expect "--logits with planted temp names" 0 "" $K3 eval $GOOD --ids "1 2" --logits $OUT/w/out.f32
if [ "$(cat $OUT/w/victim)" = precious ] && [ "$(stat -c %s $OUT/w/out.f32)" = 6144 ] && [ -z "$(ls -a $OUT/w | grep -E '^\.out\.f32\.[A-Za-z0-9]{6}$')" ]; then
    echo "PASS no predictable temp names, no temp left"
else echo "FAIL no predictable temp names, no temp left: victim '$(cat $OUT/w/victim)', $(ls -a $OUT/w | tr '\n' ' ')"; fi
# history export -o: device, symlink
cat > $OUT/import.json <<'EOF'
{"format": "k3-history", "version": 1, "title": "t", "messages": [{"role": "user", "content": "hi"}]}
EOF
$K3 history import $OUT/import.json --db $OUT/w/h.db >/dev/null 2>&1
ID=$($K3 history list --db $OUT/w/h.db 2>/dev/null | awk 'NR==2 {print $1}')
echo old > $OUT/w/etarget && ln -sf etarget $OUT/w/elink
expect "history export -o through a symlink" 0 "" $K3 history export "$ID" --format md -o $OUT/w/elink --force --db $OUT/w/h.db
if [ -L $OUT/w/elink ] && grep -q hi $OUT/w/etarget; then echo "PASS history export -o writes through a symlink"
else echo "FAIL history export -o writes through a symlink: $(stat -c %F $OUT/w/elink)"; fi
if [ -c $OUT/w/full ]; then
    expect "history export -o to a full device" 1 "No space left" $K3 history export "$ID" --format md -o $OUT/w/full --force --db $OUT/w/h.db
    [ -c $OUT/w/full ] && echo "PASS history export -o keeps the device node" || echo "FAIL history export -o keeps the device node: replaced"
fi
expect "--trace /dev/full fails" 1 "No space left" $K3 eval $GOOD --ids "1 2 3" --logits $OUT/x.f32 --trace /dev/full
expect "--trace to a file" 0 "" $K3 eval $GOOD --ids "1 2 3" --logits $OUT/x.f32 --trace $OUT/w/trace.txt
[ -s $OUT/w/trace.txt ] && echo "PASS --trace file written" || echo "FAIL --trace file written: empty"

# ---- defect 13: eval and bench need no tokenizer; added tokens anywhere
# below vocab_size (not on a BPE rank) are accepted
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/fewer_ranks fewer_ranks
expect "eval: added tokens past the reserved slots" 0 "" $K3 eval $OUT/fewer_ranks --ids "1 2" --logits $OUT/x.f32
expect "run: added tokens past the reserved slots" 0 "" $K3 run $OUT/fewer_ranks -p "hi" -n 1
expect "decode an added token past the reserved slots" 0 "" $K3 tokenize $OUT/fewer_ranks --decode "767"
grep -q '\[PAD\]' $OUT/stdout && echo "PASS added token 767 decodes to its name" || echo "FAIL added token 767 decodes to its name: '$(cat $OUT/stdout)'"
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/tok_rank added_token_rank
expect "added token on a BPE rank refused" 1 "collides with a BPE rank" $K3 run $OUT/tok_rank -p hi -n 1
expect "eval ignores a broken tokenizer" 0 "" $K3 eval $OUT/tok_rank --ids "1 2" --logits $OUT/x.f32
expect "bench ignores a broken tokenizer" 0 "" $K3 bench $OUT/tok_rank --tokens 2 --prompt-tokens 4 --json
$PY tests/ref/corrupt_ckpt.py $GOOD $OUT/tok_past added_token_past_vocab
expect "added token past vocab_size refused" 1 "not below vocab_size" $K3 run $OUT/tok_past -p hi -n 1

# ---- runtime integrity: units.sum (per-unit checksums written by pack)
rm -rf $OUT/integ && cp -r $GOOD.packed $OUT/integ
[ -f $OUT/integ/units.sum ] && echo "PASS pack writes units.sum" || echo "FAIL pack writes units.sum: missing"
expect "pack --verify on an intact model" 0 "" $K3 pack --verify $OUT/integ
off=$(awk '$NF == 5 && $(NF-1) == "expert" && $(NF-2) == 2 {print $2}' $OUT/integ/units.sum)
printf 'XXXX' | dd of=$OUT/integ/experts.bin bs=1 seek=$((${off:-0} + 8)) conv=notrunc 2>/dev/null
expect "load refuses an expert page overwritten in place" 1 "layer 2 expert 5 .* does not match its checksum" \
    $K3 eval $OUT/integ --ids "1 2" --logits $OUT/x.f32
rm -rf $OUT/integ && cp -r $GOOD.packed $OUT/integ
off=$(awk '$NF == "trunk" && $(NF-1) == 1 {print $2}' $OUT/integ/units.sum)
printf 'XXXX' | dd of=$OUT/integ/trunk.bin bs=1 seek=$((${off:-0} + 5000)) conv=notrunc 2>/dev/null
expect "pack --verify names a trunk run overwritten past the sampled bytes" 1 "layer 1 trunk .* does not match" \
    $K3 pack --verify $OUT/integ

# ---- defect 14: small items
for c in empty garbage version old; do
    rm -rf $OUT/mf && cp -r $GOOD.packed $OUT/mf
    case $c in
    empty) : > $OUT/mf/manifest.json; want="end of file" ;;          # jansson's words
    garbage) echo 'xx{' > $OUT/mf/manifest.json; want="'{' expected" ;;
    version) sed -i 's/"version": *2,/"version": 99,/' $OUT/mf/manifest.json; want="version 99 is not supported" ;;
    old) sed -i 's/"version": *2,/"version": 1,/' $OUT/mf/manifest.json; want="re-pack it with .k3 pack SRC" ;;
    esac
    expect "manifest.json $c says what is wrong" 1 "manifest.json: .*$want" $K3 eval $OUT/mf --ids "1 2" --logits $OUT/x.f32
done
expect "pack to an empty name" 1 "directory name is empty" $K3 pack $GOOD ''
expect "eval id outside the vocabulary" 1 "outside the vocabulary" $K3 eval $GOOD --ids "1 99999" --logits $OUT/x.f32
expect "tokenize --decode id outside the vocabulary" 1 "outside the vocabulary" $K3 tokenize $GOOD --decode "1 99999"
cat > $OUT/import_big.json <<'EOF'
{"format": "k3-history", "version": 1, "title": "t", "messages": [{"role": "assistant", "content": "x", "generated_tokens": 1e300}]}
EOF
expect "history import generated_tokens 1e300" 1 "generated_tokens" $K3 history import $OUT/import_big.json --db $OUT/h2.db
IDS=$(seq 3 2502 | awk '{printf "%d ", $1 % 700}')
$K3 eval $GOOD --ids "$IDS" --logits $OUT/long.f32 > /dev/null 2> $OUT/long.err
if grep -q "eval: 1024 of 2500 tokens" $OUT/long.err && grep -q "eval: 2048 of 2500 tokens" $OUT/long.err && [ "$(stat -c %s $OUT/long.f32)" = 7680000 ]; then
    echo "PASS eval of 2500 ids shows progress"
else echo "FAIL eval of 2500 ids shows progress: $(head -c 300 $OUT/long.err)"; fi
exit 0
