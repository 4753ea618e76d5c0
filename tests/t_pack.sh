#!/bin/sh
# t_pack.sh - `k3 pack`: the packed layout (docs/ARCHITECTURE.md, "The packed layout") and its refusals.
#
# Packs tiny (1 shard), small (3 shards), a tied-embedding and an fp8 (with
# _scale_inv companions) checkpoint from tests/ref/gen_ckpt.py, k3-tiny (K3
# layout: language_model. prefix, MXFP4 experts in lexicographic page order,
# vision tensors) and demo with a 1 MiB buffer (tensors larger than the
# buffer), then checks every layout invariant independently in Python: every
# tensor byte-equal to the source, 64-byte tensor alignment, 4 KiB runs and
# pages, one page per expert with gate|up|down and companions, zero padding,
# file sizes, config verbatim, fingerprint, tokenizer files copied, and
# `k3 pack --check` (manifest bounds + file checksums). Refusals: missing
# SRC, SRC not a model, SRC already packed, DST not empty (with and without
# --force), not enough space (a small tmpfs when we can mount one, and the
# test-only --simulate-free-bytes hook), kill -9 mid-pack (DST absent, the
# partial dir not loadable, a re-run succeeds), SIGINT (clean, exit 130).
# When `k3 eval` loads packed directories, logits must be byte-identical.
cd "$(dirname "$0")/.." || exit 1
K3=${K3:-./k3}
PY=/usr/bin/python3
OUT=tests/out/pack
umount $OUT/smallfs 2>/dev/null
rm -rf $OUT
mkdir -p $OUT

. tests/lib.sh

# expect NAME WANT_CODE WANT_TEXT -- command...   (one line on stderr, exit code, text)
expect() {
    name=$1 want=$2 text=$3
    shift 4
    "$@" >$OUT/stdout 2>$OUT/stderr
    code=$?
    lines=$(wc -l < $OUT/stderr)
    if [ $code -ne $want ]; then
        fail "$name" "exit code $code, want $want: $(head -c 300 $OUT/stderr)"
    elif [ "$lines" -ne 1 ]; then
        fail "$name" "want exactly one line on stderr, got $lines: $(head -c 300 $OUT/stderr)"
    elif ! grep -q -- "$text" $OUT/stderr; then
        fail "$name" "message lacks '$text': $(cat $OUT/stderr)"
    else
        pass "$name: $(cat $OUT/stderr)"
    fi
}

# check_layout SRC DST: independent check of the packed layout against the source.
check_layout() {
    $PY - "$1" "$2" <<'EOF'
import json, os, re, struct, sys
src, dst = sys.argv[1], sys.argv[2]
A, TA = 4096, 64
def die(msg):
    print(msg); sys.exit(1)
def fnv(h, b):
    for c in b:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
m = json.load(open(os.path.join(dst, "manifest.json")))
if (m["format"], m["version"], m["alignment"]) != ("k3-packed", 2, 4096): die("bad header")
# tables.bin, read independently of the C reader (layout in engine/formats/manifest.h)
tb = open(os.path.join(dst, "tables.bin"), "rb").read()
magic, tver, hb, nt, nl, npg, rb, nb, tsum = struct.unpack_from("<8sIIIIIIQQ", tb, 0)
if (magic, tver, hb, rb) != (b"K3TABLES", 1, 64, 88): die("tables.bin header")
if len(tb) != m["tables"]["bytes"] or len(tb) != 64 + 88 * nt + 16 * nl + 16 * npg + nb: die("tables.bin size")
if fnv(1469598103934665603, tb[64:]) != tsum or "%016x" % tsum != m["tables"]["checksum"]: die("tables.bin checksum")
FILES = ["trunk", "experts", "embed", "head"]
names = tb[64 + 88 * nt + 16 * nl + 16 * npg:].split(b"\0")[:-1]
if len(names) != nt: die("tables.bin names")
m["tensors"] = []
for i in range(nt):
    o = 64 + 88 * i
    off, nbytes = struct.unpack_from("<QQ", tb, o)
    shape = list(struct.unpack_from("<8q", tb, o + 16))
    dt, nd, fi = tb[o + 80], tb[o + 81], tb[o + 82]
    m["tensors"].append({"name": names[i].decode(), "dtype": m["tables"]["dtypes"][dt], "shape": shape[:nd],
                         "file": FILES[fi], "offset": off, "bytes": nbytes})
o = 64 + 88 * nt
m["layers"] = [dict(zip(("trunk_offset", "trunk_bytes"), struct.unpack_from("<QQ", tb, o + 16 * l))) for l in range(nl)]
o += 16 * nl
m["experts"]["pages"] = [list(struct.unpack_from("<IIQ", tb, o + 16 * k)) for k in range(npg)]
# the source, read independently
shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
srct, fp = {}, 1469598103934665603
for sh in shards:
    p = os.path.join(src, sh)
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    size = len(raw)
    fp = fnv(fp, sh.encode()); fp = fnv(fp, struct.pack("<Q", size)); fp = fnv(fp, raw[:8 + n])
    data = size - (8 + n); sample = min(data, 4096)          # four 4 KiB samples of the data area
    for k in range(4):
        if sample:
            at = 8 + n + (data - sample) * k // 3
            fp = fnv(fp, raw[at:at + sample])
    for k, v in hdr.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]
        srct[k] = (v["dtype"], v["shape"], raw[8 + n + a:8 + n + b])
if m["source"]["fingerprint"] != "%016x" % fp: die("fingerprint %s != %016x" % (m["source"]["fingerprint"], fp))
if [s["name"] for s in m["source"]["shards"]] != shards: die("shard list")
if m["config"] != json.load(open(os.path.join(src, "config.json"))): die("config not verbatim")
cfg = m["config"].get("text_config", m["config"])
skip = lambda n: n.startswith("vision_tower.") or n.startswith("mm_projector.")
want = {k for k in srct if not skip(k)}
have = [t["name"] for t in m["tensors"]]
if len(have) != len(set(have)): die("duplicate tensor names")
if set(have) != want: die("tensor set differs: missing %s extra %s" % (sorted(want - set(have))[:3], sorted(set(have) - want)[:3]))
files = {}
for f in ("trunk", "experts", "embed", "head"):
    data = open(os.path.join(dst, f + ".bin"), "rb").read()
    if len(data) != m["files"][f + ".bin"] or len(data) % A: die("%s.bin size %d vs %d" % (f, len(data), m["files"][f + ".bin"]))
    files[f] = data
# every tensor: aligned, in its file, byte-equal to the source, same dtype/shape
used = {f: [] for f in files}
for t in m["tensors"]:
    dt, shape, raw = srct[t["name"]]
    if (t["dtype"], t["shape"], t["bytes"]) != (dt, shape, len(raw)): die("meta differs for " + t["name"])
    o = t["offset"]
    if o % TA: die("tensor %s misaligned at %d" % (t["name"], o))
    if files[t["file"]][o:o + t["bytes"]] != raw: die("bytes differ for " + t["name"])
    used[t["file"]].append((o, o + t["bytes"], t["name"]))
for f, iv in used.items():          # no overlap, padding zero
    iv.sort()
    pos = 0
    for a, b, name in iv:
        if a < pos: die("overlap at %s" % name)
        if files[f][pos:a].count(0) != a - pos: die("nonzero padding in %s.bin before %s" % (f, name))
        pos = b
    if files[f][pos:].count(0) != len(files[f]) - pos: die("nonzero tail padding in %s.bin" % f)
byname = {t["name"]: t for t in m["tensors"]}
L = cfg["num_hidden_layers"]
rx = re.compile(r"^(?:language_model\.)?model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(.+)$")
rl = re.compile(r"^(?:language_model\.)?model\.layers\.(\d+)\.")
# trunk runs: forward order, 4 KiB aligned/padded; each layer's non-expert tensors inside its run
if len(m["layers"]) != L: die("layers %d != %d" % (len(m["layers"]), L))
prev = 0
for l, r in enumerate(m["layers"]):
    if r["trunk_offset"] % A or r["trunk_bytes"] % A or r["trunk_offset"] < prev: die("layer run %d" % l)
    prev = r["trunk_offset"] + r["trunk_bytes"]
if prev != len(files["trunk"]): die("trunk.bin is not exactly the layer runs")
pages = {}
for l, e, o in m["experts"]["pages"]:
    if (l, e) in pages: die("page twice")
    if o % A: die("page misaligned")
    pages[(l, e)] = o
pb = m["experts"]["page_bytes"]
if pages and (pb % A or len(files["experts"]) != len(pages) * pb): die("experts.bin size %d != %d pages x %d" % (len(files["experts"]), len(pages), pb))
offs = sorted(pages.values())
if any(b - a < pb for a, b in zip(offs, offs[1:])): die("pages overlap")
if sorted(pages) != list(pages) and sorted(pages, key=lambda k: pages[k]) != sorted(pages): die("pages not in (layer, expert) order")
per_page, nexp = {}, {}
for name in have:
    t = byname[name]
    mx = rx.match(name)
    if mx:
        l, e = int(mx.group(1)), int(mx.group(2))
        if t["file"] != "experts": die(name + " not in experts.bin")
        if (l, e) not in pages: die("no page for %s" % name)
        if not (pages[(l, e)] <= t["offset"] and t["offset"] + t["bytes"] <= pages[(l, e)] + pb): die(name + " outside its page")
        per_page.setdefault((l, e), []).append((t["offset"], mx.group(3)))
        nexp[l] = max(nexp.get(l, 0), e + 1)
    elif rl.match(name):
        l = int(rl.match(name).group(1))
        r = m["layers"][l]
        if t["file"] != "trunk" or not (r["trunk_offset"] <= t["offset"] and t["offset"] + t["bytes"] <= r["trunk_offset"] + r["trunk_bytes"]):
            die(name + " not inside its layer run")
if len(pages) != sum(nexp.values()) or m["experts"]["n_layers_moe"] != len(nexp): die("one page per expert")
if nexp and set(nexp.values()) != {cfg["num_experts"]}: die("experts per layer %s" % nexp)
rank = {"w1": 0, "gate_proj": 0, "w3": 1, "up_proj": 1, "w2": 2, "down_proj": 2}
for k, lst in per_page.items():     # gate | up | down, each with its companions next to it
    lst.sort()
    if lst[0][0] != pages[k]: die("page %s does not start with a tensor" % (k,))
    order = [(rank.get(s.split(".")[0], 3), s.split(".")[0]) for _, s in lst]
    if order != sorted(order): die("page %s order %s" % (k, [s for _, s in lst]))
    if len({s.split(".")[0] for _, s in lst}) != len([1 for i, x in enumerate(order) if i == 0 or order[i - 1] != x]): die("companions apart in %s" % (k,))
# embedding rows, head
e = m["embed"]; et = byname[e["name"]]
if et["file"] != "embed" or et["offset"] != 0 or e["rows"] * e["row_bytes"] != et["bytes"] or e["rows"] != et["shape"][0]: die("embed")
h = m["head"]; nt = byname[h["norm"]]
if nt["file"] != "head" or nt["offset"] != 0: die("norm not first in head.bin")
tied = bool(cfg.get("tie_word_embeddings", False))
if h["tied"] != tied: die("tied flag")
if tied:
    if h["lm_head"] != e["name"]: die("tied lm_head is not the embedding")
else:
    lt = byname[h["lm_head"]]
    if lt["file"] != "head" or lt["offset"] <= nt["offset"]: die("lm_head not after the norm in head.bin")
for f in ("config.json", "tiktoken.model", "tokenizer_config.json", "generation_config.json"):
    if os.path.exists(os.path.join(src, f)) and open(os.path.join(src, f), "rb").read() != open(os.path.join(dst, f), "rb").read():
        die(f + " not copied")
print("%d tensors, %d layers, %d pages of %d bytes" % (len(have), L, len(pages), pb))
EOF
}

# pack_and_check NAME SRC DST [pack options]
pack_and_check() {
    name=$1 src=$2 dst=$3
    shift 3
    if ! $K3 pack $src $dst "$@" >$OUT/stdout 2>$OUT/stderr; then
        fail "pack $name" "$(cat $OUT/stderr)"
        return
    fi
    if [ -e $dst.partial ]; then fail "pack $name" "$dst.partial left behind"; return; fi
    if ! r=$(check_layout $src $dst); then fail "pack $name: layout" "$r"; return; fi
    if ! $K3 pack --check $dst >$OUT/stdout 2>$OUT/check; then fail "pack $name: --check" "$(cat $OUT/check)"; return; fi
    pass "pack $name: $r; $(grep -o 'in [0-9.]* s.*' $OUT/stderr)"
}

# eval_same NAME HF PACKED: logits byte-identical, when eval can load a packed dir
eval_same() {
    ids="1 5 9 200 3 77 12 4"
    if ! $K3 eval $2 --ids "$ids" --logits $OUT/hf.f32 >/dev/null 2>$OUT/eval_hf; then
        fail "eval $1 (HF)" "$(cat $OUT/eval_hf)"
        return
    fi
    if ! $K3 eval $3 --ids "$ids" --logits $OUT/packed.f32 >/dev/null 2>$OUT/eval_packed; then
        if grep -q "no \*.safetensors files found" $OUT/eval_packed; then
            echo "SKIP eval $1: k3 eval does not load packed directories yet ($(head -c 120 $OUT/eval_packed))"
        else
            fail "eval $1 (packed)" "$(cat $OUT/eval_packed)"
        fi
        return
    fi
    if cmp -s $OUT/hf.f32 $OUT/packed.f32; then pass "eval $1: packed logits byte-identical to HF"
    else fail "eval $1" "packed logits differ from HF"; fi
}

# ---- models
$K3 gen $OUT/tiny --preset tiny --seed 2 >/dev/null 2>&1
$K3 gen $OUT/small --preset small --shards 3 --seed 3 >/dev/null 2>&1
$K3 gen $OUT/k3tiny --preset k3-tiny >/dev/null 2>&1
$K3 gen $OUT/demo --preset demo --shards 2 >/dev/null 2>&1
$PY tests/ref/gen_ckpt.py $OUT/tied --dtype bf16 --tie --layers 5 --seed 14 >/dev/null 2>&1
$PY tests/ref/gen_ckpt.py $OUT/fp8 --dtype fp8 --shards 2 --seed 13 --hidden 160 --moe-inter 136 >/dev/null 2>&1

# ---- layouts
pack_and_check "tiny (1 shard)" $OUT/tiny $OUT/p_tiny
pack_and_check "small (3 shards)" $OUT/small $OUT/p_small
pack_and_check "k3-tiny (K3 layout, MXFP4 pages, vision skipped)" $OUT/k3tiny $OUT/p_k3tiny
if [ -f $OUT/tied/config.json ]; then pack_and_check "tied embeddings" $OUT/tied $OUT/p_tied; fi
if [ -f $OUT/fp8/config.json ]; then pack_and_check "fp8 with scale companions" $OUT/fp8 $OUT/p_fp8; fi
pack_and_check "demo, 1 MiB buffer (tensors larger than the buffer)" $OUT/demo $OUT/p_demo --buffer 1

if [ "$($PY -c "import struct;print(struct.unpack_from('<I', open('$OUT/p_k3tiny/tables.bin','rb').read(), 24)[0])")" -gt 0 ]; then
    pass "k3-tiny: expert pages present"
else
    fail "k3-tiny" "no expert pages"
fi

# ---- refusals
mkdir -p $OUT/empty_dir $OUT/notmodel
echo hello > $OUT/notmodel/README
expect "refuse: missing SRC" 1 "nope" -- $K3 pack $OUT/nope $OUT/d_nope
expect "refuse: SRC not a model (empty dir)" 1 "not a model directory" -- $K3 pack $OUT/empty_dir $OUT/d_empty
expect "refuse: SRC not a model (no shards)" 1 "safetensors" -- sh -c "cp $OUT/tiny/config.json $OUT/notmodel/ && $K3 pack $OUT/notmodel $OUT/d_nm"
expect "refuse: SRC already packed" 1 "already a packed model" -- $K3 pack $OUT/p_tiny $OUT/d_pp
mkdir -p $OUT/full_dst && echo x > $OUT/full_dst/keep
expect "refuse: DST not empty" 1 "not empty" -- $K3 pack $OUT/tiny $OUT/full_dst
expect "refuse: DST not empty and not packed, even with --force" 1 "not a packed model" -- $K3 pack $OUT/tiny $OUT/full_dst --force
[ -f $OUT/full_dst/keep ] && pass "refused DST left untouched" || fail "refused DST" "keep file gone"
expect "refuse: DST packed without --force" 1 "use --force" -- $K3 pack $OUT/small $OUT/p_tiny
if $K3 pack $OUT/small $OUT/p_tiny --force 2>$OUT/stderr && r=$(check_layout $OUT/small $OUT/p_tiny) && [ ! -e $OUT/p_tiny.partial ]; then
    pass "--force replaces a packed DST: $r"
else
    fail "--force replace" "$(cat $OUT/stderr) $r"
fi
mkdir -p $OUT/empty_dst
if $K3 pack $OUT/tiny $OUT/empty_dst 2>$OUT/stderr && [ -f $OUT/empty_dst/manifest.json ]; then pass "an existing empty DST is used"
else fail "existing empty DST" "$(cat $OUT/stderr)"; fi
expect "refuse: DST parent missing" 1 "parent directory" -- $K3 pack $OUT/tiny $OUT/no/such/dst
expect "refuse: DST is a file" 1 "not a directory" -- $K3 pack $OUT/tiny $OUT/notmodel/README
expect "refuse: DST named .partial" 1 ".partial" -- $K3 pack $OUT/tiny $OUT/x.partial
expect "usage: missing DST" 2 "need SRC and DST" -- $K3 pack $OUT/tiny
expect "usage: bad option" 2 "unknown option" -- $K3 pack $OUT/tiny $OUT/d --bogus

# not enough space: a real small filesystem when we may mount one, and the test hook
SMALLFS=$OUT/smallfs
mkdir -p $SMALLFS
if mount -t tmpfs -o size=4m k3packtest $SMALLFS 2>/dev/null; then
    expect "refuse: not enough space (4 MiB tmpfs)" 1 "not enough free space: need" -- $K3 pack $OUT/small $SMALLFS/p
    if [ -e $SMALLFS/p ] || [ -e $SMALLFS/p.partial ]; then fail "no-space leaves nothing" "$(ls $SMALLFS)"
    else pass "no-space refusal left nothing on the small filesystem"; fi
    pack_and_check "tiny into the 4 MiB tmpfs" $OUT/tiny $SMALLFS/p_tiny
    umount $SMALLFS
else
    echo "SKIP not enough space on a tmpfs: cannot mount one here"
fi
expect "refuse: not enough space (--simulate-free-bytes)" 1 "available" -- $K3 pack $OUT/small $OUT/d_space --simulate-free-bytes 100000
[ -e $OUT/d_space ] || [ -e $OUT/d_space.partial ] && fail "no-space hook" "left files" || pass "no-space hook left nothing"

# ---- interrupted runs
# kill -9 mid-copy of a throttled run: no DST, the partial dir has no manifest and does not load,
# and a re-run removes it and succeeds.
$K3 pack $OUT/small $OUT/p_kill --throttle 4 2>/dev/null &
pid=$!
i=0
while [ $i -lt 50 ] && [ ! -f $OUT/p_kill.partial/experts.bin ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -e $OUT/p_kill ]; then fail "kill -9 mid-pack" "DST exists"
elif [ ! -d $OUT/p_kill.partial ]; then fail "kill -9 mid-pack" "no partial dir (run finished too early?)"
elif [ -e $OUT/p_kill.partial/manifest.json ]; then fail "kill -9 mid-pack" "partial dir has a manifest"
elif $K3 pack --check $OUT/p_kill.partial >/dev/null 2>&1; then fail "kill -9 mid-pack" "partial dir loads"
else pass "kill -9 mid-pack: no DST, partial dir without manifest does not load"; fi
if $K3 pack $OUT/small $OUT/p_kill 2>$OUT/stderr && grep -q "removed .*partial" $OUT/stderr &&
   r=$(check_layout $OUT/small $OUT/p_kill) && [ ! -e $OUT/p_kill.partial ]; then
    pass "re-run after kill -9 succeeds: $r"
else
    fail "re-run after kill -9" "$(cat $OUT/stderr) $r"
fi
# SIGINT: clean stop, exit 130, nothing left
$K3 pack $OUT/small $OUT/p_int --throttle 4 2>$OUT/int_err &
pid=$!
i=0
while [ $i -lt 50 ] && [ ! -f $OUT/p_int.partial/experts.bin ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
kill -INT $pid
wait $pid
code=$?
if [ $code -eq 130 ] && [ ! -e $OUT/p_int ] && [ ! -e $OUT/p_int.partial ] && grep -q interrupted $OUT/int_err; then
    pass "SIGINT mid-pack: exit 130, DST and DST.partial absent"
else
    fail "SIGINT mid-pack" "exit $code, $(ls -d $OUT/p_int* 2>/dev/null) $(cat $OUT/int_err)"
fi
# corruption after packing is caught by --check
cp -r $OUT/p_small $OUT/p_corrupt
printf 'X' | dd of=$OUT/p_corrupt/experts.bin bs=1 seek=100 conv=notrunc 2>/dev/null
expect "--check catches a corrupted experts.bin" 1 "checksum" -- $K3 pack --check $OUT/p_corrupt
truncate -s 4096 $OUT/p_corrupt/trunk.bin
expect "--check catches a truncated trunk.bin" 1 "trunk.bin" -- $K3 pack --check $OUT/p_corrupt

# ---- same logits from the packed layout (once eval loads packed dirs)
$K3 pack $OUT/tiny $OUT/p_tiny2 2>/dev/null
eval_same tiny $OUT/tiny $OUT/p_tiny2
eval_same k3-tiny $OUT/k3tiny $OUT/p_k3tiny
eval_same demo $OUT/demo $OUT/p_demo
eval_same "small (3 shards)" $OUT/small $OUT/p_kill
[ -d $OUT/p_tied ] && eval_same "tied embeddings" $OUT/tied $OUT/p_tied
[ -d $OUT/p_fp8 ] && eval_same "fp8 with scale companions" $OUT/fp8 $OUT/p_fp8
rm -rf $OUT/demo $OUT/p_demo    # 1.1 GB
exit 0
