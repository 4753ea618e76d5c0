#!/bin/sh
# t_door.sh - the architecture's door and layers are enforced by the build: a front-end
# file (app/ chat/ ui/ history/) that includes an engine-internal header does
# not compile, whether it names the header plainly ("kernels.h") or reaches
# for it by a relative path ("../engine/kernels/kernels.h"); the same file including
# only include/ headers compiles. Inside engine/, a file that includes a
# header from a folder above its own (tools/check_layers.sh) does not build
# either. Prints "PASS name" / "FAIL name: why".
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/door
mkdir -p $OUT
. tests/lib.sh
cleanup() {
    for d in app chat ui history; do rm -f $d/door_probe_$$_*.c build/$d/door_probe_$$_*; done
    rm -f engine/*/layer_probe_$$_*.c build/engine/*/layer_probe_$$_*
}
trap cleanup EXIT INT TERM

# try NAME FOLDER INCLUDE WANT(ok|fail)
try() {
    name=$1 dir=$2 inc=$3 want=$4
    src=$dir/door_probe_$$_$name.c
    printf '#include "%s"\nint door_probe_%s(void);\nint door_probe_%s(void) { return 0; }\n' "$inc" "$name" "$name" > $src
    make -s build/$dir/door_probe_$$_$name.o > $OUT/$name.log 2>&1
    rc=$?
    rm -f $src build/$dir/door_probe_$$_$name.*
    if [ "$want" = ok ]; then
        [ $rc -eq 0 ] && pass "door: $dir may include $inc" || fail "door: $dir may include $inc" "$(head -c 300 $OUT/$name.log)"
    else
        if [ $rc -ne 0 ] && grep -q "No such file\|reaches past include/" $OUT/$name.log; then
            pass "door: $dir cannot include $inc"
        else
            fail "door: $dir cannot include $inc" "the build accepted it (rc $rc)"
        fi
    fi
}
for d in app chat ui history; do
    try public_$d $d k3.h ok
    try plain_$d $d kernels.h fail
    try relative_$d $d ../engine/weights/planner.h fail
    try offline_$d $d ../offline/safetensors_write.h fail
done

# layer NAME FOLDER INCLUDE WANT(ok|fail): a probe file in engine/FOLDER.
layer() {
    name=$1 dir=engine/$2 inc=$3 want=$4
    src=$dir/layer_probe_$$_$name.c
    printf '#include "%s"\nint layer_probe_%s(void);\nint layer_probe_%s(void) { return 0; }\n' "$inc" "$name" "$name" > $src
    make -s build/$dir/layer_probe_$$_$name.o > $OUT/$name.log 2>&1
    rc=$?
    rm -f $src build/$dir/layer_probe_$$_$name.*
    if [ "$want" = ok ]; then
        [ $rc -eq 0 ] && pass "layers: $dir may include $inc" || fail "layers: $dir may include $inc" "$(head -c 300 $OUT/$name.log)"
    elif [ $rc -ne 0 ] && grep -q "includes from a folder above it" $OUT/$name.log; then
        pass "layers: $dir cannot include $inc"
    else
        fail "layers: $dir cannot include $inc" "the build accepted it (rc $rc)"
    fi
}
layer kernels_down kernels dtype.h ok
layer kernels_up kernels weights.h fail
layer base_up base forward.h fail
layer formats_up formats io.h fail
layer weights_down weights manifest.h ok
layer weights_up weights forward.h fail
layer plan_down plan forward.h ok
