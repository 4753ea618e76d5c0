#!/bin/sh
# t_readonly.sh - a history database nobody may write to:
#  - `k3 history list/search/show/export` open it read-only and work;
#  - a chat (a write) says whether the file or its directory is the problem.
# As root, permissions do not bind, so the k3 commands run as "nobody"
# (setpriv); as another user, chmod is enough.
cd "$(dirname "$0")/.." || exit 1
K3=$PWD/${K3:-k3}
OUT=tests/out/readonly
rm -rf $OUT
mkdir -p $OUT
M=$PWD/$OUT/small
$K3 gen $M --preset small --seed 41 >/dev/null 2>&1
D=$(mktemp -d /tmp/k3-readonly.XXXXXX)
trap 'chmod -R u+w $D; rm -rf $D' EXIT INT TERM
printf 'hello readonly\n' | $K3 chat $M --db $D/h.db --plain -n 3 > /dev/null 2>&1
chmod 755 $D
chmod 644 $D/h.db
chmod -R a+rX $OUT
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || { echo "FAIL readonly: running as root without setpriv"; exit 0; }
    AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
    AS=""
    chmod 444 $D/h.db
    chmod 555 $D
fi
ok=1
for sub in "list" "search readonly" "show last" "export last --format md"; do
    $AS $K3 history $sub --db $D/h.db > $OUT/out.txt 2> $OUT/err.txt || { ok=0; why="history $sub: $(cat $OUT/err.txt)"; break; }
    grep -q 'readonly' $OUT/out.txt || { ok=0; why="history $sub printed no conversation: $(head -c 200 $OUT/out.txt)"; break; }
done
[ $ok = 1 ] && echo "PASS history list/search/show/export read a read-only database" || echo "FAIL read-only database: $why"
printf 'more\n' | $AS $K3 chat $M --db $D/h.db --plain -n 2 > /dev/null 2> $OUT/w1.err; RC=$?
if [ $RC != 0 ] && grep -q 'the database file is read-only' $OUT/w1.err; then echo "PASS a write to a read-only file says the file is read-only"
else echo "FAIL write to a read-only file: exit $RC: $(cat $OUT/w1.err)"; fi
if [ "$(id -u)" = 0 ]; then chmod 666 $D/h.db; else chmod 644 $D/h.db; fi
printf 'more\n' | $AS $K3 chat $M --db $D/h.db --plain -n 2 > /dev/null 2> $OUT/w2.err; RC=$?
if [ $RC != 0 ] && grep -q "the directory $D is not writable" $OUT/w2.err; then echo "PASS a write in a read-only directory says the directory is the problem"
else echo "FAIL write in a read-only directory: exit $RC: $(cat $OUT/w2.err)"; fi
