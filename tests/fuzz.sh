#!/bin/sh
# fuzz.sh SECONDS [TARGET...] - build the libFuzzer targets (clang,
# ASan+UBSan) and run each for SECONDS seconds from a seed corpus made of
# real files at their real sizes (-max_len is at least the largest seed).
# Every parser that reads a file from outside has a target:
#   safetensors       a shard's header (engine/formats/safetensors.c)
#   gguf              a GGUF file's header and metadata (engine/formats/gguf.c)
#   gguf_vocab        a GGUF's vocabulary made a tokenizer (engine/formats/gguf_vocab.c)
#   index             model.safetensors.index.json beside a real shard
#   config            config.json
#   tiktoken          tiktoken.model (then one encode + decode)
#   tokenizer_config  tokenizer_config.json (the added tokens)
#   manifest          manifest.json of a packed model, its .bin files present
#   manifest_tables   tables.bin of a packed model (its manifest.json made to
#                     record the input's size and checksum)
#   session           a session / snapshot file (k3 chat --resume)
#   history_import    `k3 history import` JSON
# `make test` runs it briefly (t_fuzz.sh); `make fuzz` runs it for longer.
# K3_FUZZ_RUNS=N runs N executions per target instead of SECONDS.
# Prints one PASS/FAIL line per target with its executions and coverage.
cd "$(dirname "$0")/.." || exit 1
SECS=${1:-10}
[ $# -gt 0 ] && shift
TARGETS=${*:-safetensors gguf gguf_vocab index config tiktoken tokenizer_config manifest manifest_tables session history_import}
OUT=${K3_FUZZ_OUT:-build/fuzz}
mkdir -p $OUT
CC=clang
# The kernels' flags of this machine's ARCH (x86-64-v3: AVX2/FMA/F16C), as the Makefile sets them.
ARCH_FLAGS=$(make -s --no-print-directory CC=clang print-arch-flags)
FLAGS="-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE $ARCH_FLAGS -Iinclude $(for d in base kernels text formats io weights model plan; do printf -- "-Iengine/%s " $d; done) -Ioffline -DK3_NUMERICS_KEY=\"$(make -s --no-print-directory print-numerics-key)\""
SEEDMODEL=tests/out/fuzz_seed_model
[ -f $SEEDMODEL/config.json ] || ./k3 gen $SEEDMODEL --preset tiny >/dev/null 2>&1
./k3 pack --verify $SEEDMODEL.packed >/dev/null 2>&1 || ./k3 pack $SEEDMODEL $SEEDMODEL.packed --force >/dev/null 2>&1
ENGINE_SRCS=$(ls engine/*/*.c)
export K3_FUZZ_MODEL=$SEEDMODEL K3_FUZZ_PACKED=$SEEDMODEL.packed
for target in $TARGETS; do
    corpus=$OUT/corpus_$target
    mkdir -p $corpus
    libs="-ljansson -lpcre2-8"
    extra=""
    case $target in
    safetensors)
        srcs="engine/formats/safetensors.c engine/kernels/dtype.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        # seeds: small valid shards (every dtype, 1-4 dims) and a real shard.
        # An input is a u64 LE count of the file bytes after it, then the
        # file's first bytes (fuzz_safetensors.c): the real shard's seed is
        # its whole header with the data section counted, not carried.
        /usr/bin/python3 -c "
import struct, json
def shard(entries):
    h, off, data = {'__metadata__': {'format': 'pt'}}, 0, b''
    for name, dt, shape, size in entries:
        n = size
        for d in shape: n *= d
        h[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + n]}
        off += n; data += bytes(n)
    j = json.dumps(h).encode(); j += b' ' * (-len(j) % 8)
    return struct.pack('<Q', len(j)) + j + data
def seed(raw):
    n = 8 + struct.unpack('<Q', raw[:8])[0]
    return struct.pack('<Q', len(raw) - min(n, len(raw))) + raw[:n]
open('$corpus/seed_small', 'wb').write(seed(shard([('a.weight', 'BF16', [4, 8], 2), ('b', 'F32', [3], 4), ('c', 'F8_E4M3', [2, 2, 2], 1), ('d', 'I64', [], 8)])))
open('$corpus/seed_one', 'wb').write(seed(shard([('x', 'F16', [2, 3, 1, 1], 2)])))
open('$corpus/seed_shard', 'wb').write(seed(open('$SEEDMODEL/model.safetensors', 'rb').read()))
" ;;
    gguf)
        srcs="engine/formats/gguf.c engine/formats/gguf_checkpoint.c engine/formats/config.c engine/formats/safetensors.c engine/kernels/dtype.c engine/kernels/quant_types.c engine/kernels/quant_grids.c engine/kernels/quant_iq1.c engine/kernels/convert.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        # seeds: the header of a Kimi Linear 48B Q4_K_M file at its real size
        # (6 MB: 163840 tokens, 163328 merges, 610 tensor infos; its 32 GB
        # data section counted, not carried), a file of every value and block
        # type, and part 2 of a split set, each as fuzz_gguf.c takes them.
        [ $corpus/seed_kimi_linear -nt tests/ref/gguf_np.py ] || /usr/bin/python3 tests/ref/gguf_np.py fuzz-seed-kimi-linear $corpus/seed_kimi_linear
        /usr/bin/python3 tests/ref/gguf_np.py write-types $OUT/seed_types.gguf
        mkdir -p $OUT/seed_split && /usr/bin/python3 tests/ref/gguf_np.py write-split $OUT/seed_split m 2
        for f in $OUT/seed_types.gguf $OUT/seed_split/m-00002-of-00002.gguf; do
            /usr/bin/python3 -c "import struct, sys; d = open(sys.argv[1], 'rb').read(); open(sys.argv[2], 'wb').write(struct.pack('<Q', 0) + d)" \
                $f $corpus/seed_$(basename $f .gguf)
        done ;;
    gguf_vocab)
        srcs="engine/formats/gguf_vocab.c engine/formats/gguf.c engine/formats/gguf_checkpoint.c engine/formats/config.c engine/formats/safetensors.c engine/kernels/dtype.c engine/kernels/quant_types.c engine/kernels/quant_grids.c engine/kernels/quant_iq1.c engine/kernels/convert.c engine/text/tokenizer.c engine/text/byte_spelling.c engine/text/pretokenize.c engine/text/unicode_class.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        # seeds: the seed model's vocabulary as llama.cpp's converter writes it
        # (tests/ref/gguf_vocab.py), models/k3-mini's as llama.cpp's gguf-py
        # wrote it (the committed fixture) and a synthetic one at Kimi's sizes
        # (163,840 ids, 7 MB), each as fuzz_gguf.c takes a file
        /usr/bin/python3 tests/ref/gguf_vocab.py write $SEEDMODEL $OUT/seed_vocab.gguf
        if [ ! $OUT/seed_kimi_vocab.gguf -nt tests/ref/gguf_vocab.py ]; then
            /usr/bin/python3 tests/ref/gguf_vocab.py synthetic $OUT/seed_kimi_vocab
            /usr/bin/python3 tests/ref/gguf_vocab.py write $OUT/seed_kimi_vocab $OUT/seed_kimi_vocab.gguf
        fi
        for f in $OUT/seed_vocab.gguf tests/fixtures/gguf/k3mini_vocab.gguf $OUT/seed_kimi_vocab.gguf; do
            /usr/bin/python3 -c "import struct, sys; d = open(sys.argv[1], 'rb').read(); open(sys.argv[2], 'wb').write(struct.pack('<Q', 0) + d)" \
                $f $corpus/seed_$(basename $f .gguf)
        done ;;
    index)
        srcs="engine/formats/safetensors.c engine/kernels/dtype.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        /usr/bin/python3 -c "
import json, struct
raw = open('$SEEDMODEL/model.safetensors', 'rb').read()
h = json.loads(raw[8:8 + struct.unpack('<Q', raw[:8])[0]])
wm = {k: 'model.safetensors' for k in h if k != '__metadata__'}
json.dump({'metadata': {'total_size': len(raw)}, 'weight_map': wm}, open('$corpus/seed_index', 'w'), indent=2)
" ;;
    config)
        srcs="engine/formats/config.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        cp $SEEDMODEL/config.json $corpus/seed_config
        [ -f tests/out/asan/k3tiny/config.json ] && cp tests/out/asan/k3tiny/config.json $corpus/seed_config_k3 ;;
    tiktoken)
        srcs="engine/text/tokenizer.c engine/text/pretokenize.c engine/text/unicode_class.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        cp $SEEDMODEL/tiktoken.model $corpus/seed_tiktoken ;;
    tokenizer_config)
        srcs="engine/text/tokenizer.c engine/text/pretokenize.c engine/text/unicode_class.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        cp $SEEDMODEL/tokenizer_config.json $corpus/seed_tokcfg ;;
    manifest)
        srcs="engine/formats/manifest.c engine/formats/manifest_tables.c engine/kernels/dtype.c engine/kernels/quant_types.c engine/kernels/quant_grids.c engine/kernels/quant_iq1.c engine/kernels/convert.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        cp $SEEDMODEL.packed/manifest.json $corpus/seed_manifest ;;
    manifest_tables)
        srcs="engine/formats/manifest.c engine/formats/manifest_tables.c engine/kernels/dtype.c engine/kernels/quant_types.c engine/kernels/quant_grids.c engine/kernels/quant_iq1.c engine/kernels/convert.c engine/base/error.c engine/base/file_read.c engine/base/fnv.c engine/base/strtab.c"
        cp $SEEDMODEL.packed/tables.bin $corpus/seed_tables
        # a second seed: the same tables with the expert pages of a MoE layout, when t_pack made one
        [ -f tests/out/pack/p_k3tiny/tables.bin ] && cp tests/out/pack/p_k3tiny/tables.bin $corpus/seed_tables_k3tiny ;;
    session)
        srcs="$ENGINE_SRCS"
        libs="-fopenmp -ljansson -lpcre2-8 -luring -lm -lpthread"
        extra='-fopenmp -DK3_NUMERICS_KEY="fuzz"'   # the Makefile's key; seeds come from this binary
        rm -f $corpus/seed_session ;;
    history_import)
        srcs="history/*.c"
        libs="-lsqlite3 -ljansson"
        extra="-Ihistory"
        ./k3 history import tests/fuzz/seed_history.json --db $OUT/seed_history.db >/dev/null 2>&1
        ./k3 history export last --format json --db $OUT/seed_history.db > $corpus/seed_export 2>/dev/null
        rm -rf $OUT/seed_history.db*
        cp tests/fuzz/seed_history.json $corpus/seed_hand ;;
    *)
        echo "FAIL fuzz $target: no such target"
        continue ;;
    esac
    bin=$OUT/fuzz_$target
    newest=$(ls -t tests/fuzz/fuzz_$target.c $srcs engine/*/*.h include/*.h history/*.h 2>/dev/null | head -1)
    if [ ! -x $bin ] || [ "$newest" -nt $bin ]; then
        # shellcheck disable=SC2086
        if ! $CC $FLAGS $extra -o $bin tests/fuzz/fuzz_$target.c $srcs $libs 2>$OUT/build_$target.log; then
            echo "FAIL fuzz $target: build failed: $(grep -m1 error $OUT/build_$target.log)"
            continue
        fi
    fi
    if [ $target = session ] && [ ! -f $corpus/seed_session ]; then
        K3_FUZZ_SESSION_SEED=$corpus/seed_session $bin -runs=0 $corpus >/dev/null 2>&1
    fi
    maxlen=$(ls -l $corpus | awk 'NR > 1 && $5 > m {m = $5} END {print m + 0}')
    [ "$maxlen" -lt 8192 ] && maxlen=8192
    if [ -n "$K3_FUZZ_RUNS" ]; then limit="-runs=$K3_FUZZ_RUNS"; else limit="-max_total_time=$SECS"; fi
    if ASAN_OPTIONS=detect_leaks=1 $bin $limit -max_len=$maxlen -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix=$OUT/crash_$target- $corpus > $OUT/run_$target.log 2>&1; then
        runs=$(grep -o 'Done [0-9]* runs' $OUT/run_$target.log | grep -o '[0-9]*')
        cov0=$(grep -m1 'INITED' $OUT/run_$target.log | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
        cov1=$(grep 'cov: ' $OUT/run_$target.log | tail -1 | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
        echo "PASS fuzz $target: $runs runs, no crash, cov ${cov0:-?} at start -> ${cov1:-?} (max_len $maxlen)"
    else
        echo "FAIL fuzz $target: crash, see $OUT/run_$target.log: $(grep -m1 -E 'ERROR|runtime error' $OUT/run_$target.log)"
    fi
done
