#!/bin/sh
# arch_check.sh ARCH - one portable build against the host build (issue 15).
#
# Builds ARCH (generic: the portable C kernels on this machine; aarch64: the
# NEON kernels, cross-compiled with aarch64-linux-gnu-gcc and run under
# qemu-aarch64 unless this machine is aarch64), then:
#   - its engine unit tests, told which kernels they must find in use
#     (K3_EXPECT_KERNELS: a build that fell back to other kernels fails);
#   - for generic, the whole forward-vs-numpy-reference suite (t_forward.sh)
#     with its binaries;
#   - `k3 eval --logits` of this build and of the host's ./k3 on test models
#     of every stored format (bf16, f32 in shards, f16, fp8 with block
#     scales, mixed, and the Kimi K3 layout with MXFP4 experts): the files
#     must be byte-identical.
# Every check prints "PASS ARCH: ..." or "FAIL ARCH: ...". Emulated aarch64
# is tested for correctness only, never for speed.
cd "$(dirname "$0")/.." || exit 1
A=$1
OUT=tests/out/arch/$A
mkdir -p $OUT
PY=/usr/bin/python3
HOST_K3=./k3
case "$A" in
generic)
    MAKE_ARGS="ARCH=generic"; EXPECT=generic; RUN="" ;;
aarch64)
    EXPECT=aarch64; RUN=""; MAKE_ARGS="ARCH=aarch64"
    if [ "$(uname -m)" != aarch64 ]; then
        MAKE_ARGS="ARCH=aarch64 CC=aarch64-linux-gnu-gcc"; RUN=qemu-aarch64
        for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
            if ! command -v $tool >/dev/null; then
                echo "FAIL $A: $tool is not installed (make deps-cross)"
                exit 0
            fi
        done
    fi ;;
x86-64-v3)
    MAKE_ARGS="ARCH=x86-64-v3"; EXPECT=x86-64-v3; RUN="" ;;
*)
    echo "FAIL arch_check: unknown ARCH '$A' (x86-64-v3, aarch64 or generic)"; exit 0 ;;
esac
[ -x $HOST_K3 ] || make -j2 --no-print-directory all > $OUT/host-build.log 2>&1
B=$(make -s --no-print-directory $MAKE_ARGS print-build 2>/dev/null)
[ -n "$B" ] || B=build-$A

start=$(date +%s)
if make -j2 --no-print-directory $MAKE_ARGS all > $OUT/build.log 2>&1; then
    echo "PASS $A: build ($B, $(($(date +%s) - start)) s)"
else
    echo "FAIL $A: build failed: $(grep -m1 -E 'error|Error' $OUT/build.log)"
    exit 0
fi
if [ "$B" = build ]; then K3=./k3; else K3=$B/k3; fi

# Engine unit tests, lines prefixed with the ARCH.
start=$(date +%s)
for t in test_kernels test_quant_matvec test_k3_ops test_sampler test_manifest test_tokenizer; do
    K3_EXPECT_KERNELS=$EXPECT $RUN $B/tests/$t > $OUT/$t.txt 2>>$OUT/stderr.log
    rc=$?
    sed "s/^\(PASS\|FAIL\) /\1 $A: /" $OUT/$t.txt
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' $OUT/$t.txt; then
        echo "FAIL $A: $t exited with status $rc"
    fi
done
echo "$A: unit tests took $(($(date +%s) - start)) s${RUN:+ under $RUN}" >&2

# The forward pass against the numpy reference, with this build's binaries
# (generic only: under emulation the byte comparison below stands for it,
# the host build's logits being checked against the reference by t_forward.sh).
if [ "$A" = generic ]; then
    K3=$K3 TOOL=$B/tests/tool_engine FORWARD_OUT=$OUT/forward sh tests/t_forward.sh 2>>$OUT/stderr.log |
        sed "s/^\(PASS\|FAIL\) /\1 $A: /"
fi

# Logits of this build and the host build, byte for byte.
M=tests/out/arch/models
mkdir -p $M
[ -f $M/tiny/config.json ] || $HOST_K3 gen $M/tiny --preset tiny --seed 21 >/dev/null 2>&1
[ -f $M/small_f32/config.json ] || $HOST_K3 gen $M/small_f32 --preset small --dtype f32 --shards 2 --seed 22 >/dev/null 2>&1
[ -f $M/k3_tiny/config.json ] || $HOST_K3 gen $M/k3_tiny --preset k3-tiny --seed 23 >/dev/null 2>&1
[ -f $M/py_f16/config.json ] || $PY tests/ref/gen_ckpt.py $M/py_f16 --dtype f16 --seed 24 >/dev/null
[ -f $M/py_fp8/config.json ] || $PY tests/ref/gen_ckpt.py $M/py_fp8 --dtype fp8 --seed 25 --hidden 160 --moe-inter 136 >/dev/null
[ -f $M/py_mixed/config.json ] || $PY tests/ref/gen_ckpt.py $M/py_mixed --dtype mixed --seed 26 >/dev/null
start=$(date +%s)
for m in tiny small_f32 k3_tiny py_f16 py_fp8 py_mixed; do
    IDS=$($PY -c "import random; random.seed('$m'); print(' '.join(str(random.randrange(256)) for _ in range(40)))")
    if ! $HOST_K3 eval $M/$m --ids "$IDS" --logits $OUT/$m.host.f32 2>$OUT/$m.err; then
        echo "FAIL $A: logits $m: host k3 eval failed: $(cat $OUT/$m.err)"
        continue
    fi
    if ! $RUN $K3 eval $M/$m --ids "$IDS" --logits $OUT/$m.$A.f32 2>$OUT/$m.err; then
        echo "FAIL $A: logits $m: $A k3 eval failed: $(cat $OUT/$m.err)"
        continue
    fi
    if cmp -s $OUT/$m.host.f32 $OUT/$m.$A.f32; then
        echo "PASS $A: logits $m byte-identical to the host build ($(stat -c %s $OUT/$m.host.f32) bytes, 40 tokens)"
    else
        echo "FAIL $A: logits $m differ from the host build: $(cmp $OUT/$m.host.f32 $OUT/$m.$A.f32 2>&1 | head -1)"
    fi
done
echo "$A: logits comparison took $(($(date +%s) - start)) s${RUN:+ under $RUN}" >&2

# `k3 bench --json` names the kernels this build runs.
if $RUN $K3 bench $M/tiny --tokens 2 --prompt-tokens 4 --no-probe --no-resident --json > $OUT/bench.json 2>$OUT/bench.err &&
   $PY -c "import json,sys; k=json.load(open('$OUT/bench.json'))['kernels']; sys.exit(0 if k.startswith('$EXPECT') else 1)"; then
    echo "PASS $A: k3 bench --json reports its kernels ($(sed 's/.*"kernels":"\([^"]*\)".*/\1/' $OUT/bench.json))"
else
    echo "FAIL $A: k3 bench --json does not report $EXPECT kernels: $(head -c 200 $OUT/bench.json) $(cat $OUT/bench.err)"
fi
