#!/bin/sh
# deps.sh - install the Debian packages k3 needs, only those missing.
# Used by `make deps` (and so by `make run` and .ci/run). Needs root or sudo.
# With --test or --train: see below. With --cross (`make deps-cross`): the aarch64 cross toolchain, qemu-user and
# the arm64 libraries through multiarch, for tests/t_arch.sh.
set -e
PKGS="gcc make libc6-dev pkg-config libjansson-dev libpcre2-dev liburing-dev \
libncurses-dev libreadline-dev libsqlite3-dev python3 python3-numpy python3-regex \
clang libclang-rt-14-dev tmux time procps ncurses-bin sqlite3 \
libmicrohttpd-dev libcurl4-openssl-dev curl nodejs openssl"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
# --test (`make deps-test`, part of `make deps`): what only the test suite needs: PyTorch for the
# engine-vs-PyTorch check of models/k3-mini, and the word list its chat test reads.
# --train: the corpus packages tools/train_demo.py learns from (re-training only; the model is
# committed, so neither `make run` nor `make test` needs them).
if [ "$1" = "--test" ]; then
    PKGS="python3-torch wamerican"
elif [ "$1" = "--train" ]; then
    PKGS="python3-torch wordnet-base dict-gcide fortunes"
fi
if [ "$1" = "--cross" ]; then
    PKGS="gcc-aarch64-linux-gnu qemu-user libc6:arm64 libgomp1:arm64 libjansson-dev:arm64 \
libpcre2-dev:arm64 liburing-dev:arm64 libncurses-dev:arm64 libreadline-dev:arm64 libsqlite3-dev:arm64 \
libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
    fi
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
