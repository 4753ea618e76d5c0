#!/bin/sh
# fuzz.sh SECONDS - build the libFuzzer targets (clang, ASan+UBSan) and run
# each for SECONDS seconds from a seed corpus made of real files.
# `make test` runs it briefly (t_fuzz.sh); `make fuzz` runs it for longer.
# Prints one PASS/FAIL line per target.
cd "$(dirname "$0")/.." || exit 1
SECS=${1:-10}
OUT=build/fuzz
mkdir -p $OUT
CC=clang
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -Iinclude -Iengine -Ioffline"
SEEDMODEL=tests/out/fuzz_seed_model
[ -f $SEEDMODEL/config.json ] || ./k3 gen $SEEDMODEL --preset tiny >/dev/null 2>&1
[ -f $SEEDMODEL.packed/manifest.json ] || ./k3 pack $SEEDMODEL $SEEDMODEL.packed --force >/dev/null 2>&1
for target in safetensors config manifest tokenizer_config; do
    corpus=$OUT/corpus_$target
    mkdir -p $corpus
    case $target in
    safetensors)
        srcs="engine/safetensors.c engine/dtype.c engine/error.c engine/file_read.c engine/fnv.c"
        # seeds: small valid shards (every dtype, 1-4 dims) and a real header
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
open('$corpus/seed_small', 'wb').write(shard([('a.weight', 'BF16', [4, 8], 2), ('b', 'F32', [3], 4), ('c', 'F8_E4M3', [2, 2, 2], 1), ('d', 'I64', [], 8)]))
open('$corpus/seed_one', 'wb').write(shard([('x', 'F16', [2, 3, 1, 1], 2)]))
"
        head -c 8192 $SEEDMODEL/model.safetensors > $corpus/seed_header ;;
    config)
        srcs="engine/config.c engine/error.c engine/file_read.c"
        cp $SEEDMODEL/config.json $corpus/seed_config ;;
    manifest)
        srcs="engine/manifest.c engine/dtype.c engine/error.c engine/file_read.c engine/fnv.c"
        cp $SEEDMODEL.packed/manifest.json $corpus/seed_manifest 2>/dev/null ;;
    tokenizer_config)
        srcs="engine/tokenizer.c engine/pretokenize.c engine/unicode_class.c engine/error.c engine/file_read.c engine/fnv.c"
        cp $SEEDMODEL/tokenizer_config.json $corpus/seed_tokcfg ;;
    esac
    if ! $CC $FLAGS -o $OUT/fuzz_$target tests/fuzz/fuzz_$target.c $srcs -ljansson -lpcre2-8 2>$OUT/build_$target.log; then
        echo "FAIL fuzz $target: build failed: $(head -3 $OUT/build_$target.log)"
        continue
    fi
    if $OUT/fuzz_$target -max_total_time=$SECS -max_len=8192 -timeout=10 -artifact_prefix=$OUT/crash_$target- \
        $corpus > $OUT/run_$target.log 2>&1; then
        runs=$(grep -o 'Done [0-9]* runs' $OUT/run_$target.log | grep -o '[0-9]*')
        echo "PASS fuzz $target: ${SECS}s, no crash ($runs runs)"
    else
        echo "FAIL fuzz $target: crash, see $OUT/run_$target.log: $(grep -m1 'ERROR' $OUT/run_$target.log)"
    fi
done
