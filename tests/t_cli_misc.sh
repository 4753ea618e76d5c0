#!/bin/sh
# t_cli_misc.sh - the command line's small promises:
#  - `k3 help nosuch` says unknown command and exits 2;
#  - `k3 --version`: version, git describe, build flags, kernels;
#  - a path to a model's config.json is taken as the model directory.
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out/cli_misc
rm -rf $OUT
mkdir -p $OUT
K3=./k3
M=$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1

$K3 help nosuch > $OUT/h.out 2> $OUT/h.err; RC=$?
if [ $RC = 2 ] && grep -q "unknown command 'nosuch'" $OUT/h.err && [ ! -s $OUT/h.out ]; then echo "PASS k3 help nosuch: unknown command, exit 2"
else echo "FAIL k3 help nosuch: exit $RC: $(cat $OUT/h.err)"; fi
$K3 help chat > /dev/null 2>&1 && echo "PASS k3 help chat still exits 0" || echo "FAIL k3 help chat"
$K3 --version > $OUT/v.out 2>&1; RC=$?
if [ $RC = 0 ] && grep -q '^k3 [0-9]' $OUT/v.out && grep -q '^source: *[0-9a-zA-Z]' $OUT/v.out && ! grep -q '^source: *unknown' $OUT/v.out &&
   grep -q '^built: .*-O' $OUT/v.out && grep -q '^kernels: ' $OUT/v.out; then
    echo "PASS k3 --version: $(tr '\n' ';' < $OUT/v.out | cut -c1-150)"
else echo "FAIL k3 --version: exit $RC: $(cat $OUT/v.out)"; fi
$K3 run $M/config.json -p "hello" -n 3 > $OUT/r.out 2> $OUT/r.err; RC=$?
if [ $RC = 0 ] && grep -q 'generated 3 tokens' $OUT/r.err; then echo "PASS k3 run MODEL/config.json runs the model in that directory"
else echo "FAIL k3 run config.json: exit $RC: $(tail -2 $OUT/r.err)"; fi
printf 'hi\n' | $K3 chat $M/config.json --db $OUT/c.db --plain -n 3 > /dev/null 2> $OUT/c.err; RC=$?
if [ $RC = 0 ]; then echo "PASS k3 chat MODEL/config.json"
else echo "FAIL k3 chat config.json: exit $RC: $(tail -2 $OUT/c.err)"; fi

# make install with PREFIX and DESTDIR
rm -rf $OUT/stage
make --no-print-directory install PREFIX=/opt/k3test DESTDIR=$PWD/$OUT/stage > $OUT/inst.out 2>&1
if [ -x $OUT/stage/opt/k3test/bin/k3 ] && $OUT/stage/opt/k3test/bin/k3 --version | grep -q '^k3 '; then
    echo "PASS make install PREFIX=/opt/k3test DESTDIR=...: bin/k3 installed and runs"
else echo "FAIL make install: $(tail -3 $OUT/inst.out)"; fi

# the exit hint is a command that works as typed, with the --mem the chat ran with
printf 'hi\n' | $K3 chat $M --db $OUT/hint.db --plain --mem 300M -n 2 > /dev/null 2> $OUT/hint.err
HINT=$(sed -n 's/.*resume with: //p' $OUT/hint.err)
case "$HINT" in
    "./k3 chat $M --mem 300M --db $OUT/hint.db --resume "*|"k3 chat $M --mem 300M --db $OUT/hint.db --resume "*)
        if printf 'again\n' | $HINT --plain -n 2 > /dev/null 2> $OUT/hint2.err; then
            echo "PASS exit hint works as typed: $HINT"
        else echo "FAIL exit hint does not run: $HINT: $(tail -1 $OUT/hint2.err)"; fi ;;
    *) echo "FAIL exit hint: '$HINT'" ;;
esac
