#!/bin/sh
# deps.sh - install the Debian packages k3 needs, only those missing.
# Used by `make deps` (and so by `make run` and .ci/run). Needs root or sudo.
set -e
PKGS="gcc make libc6-dev pkg-config libjansson-dev libpcre2-dev liburing-dev \
libncurses-dev libreadline-dev libsqlite3-dev python3 python3-numpy python3-regex \
clang libclang-rt-14-dev tmux time procps ncurses-bin sqlite3 \
libmicrohttpd-dev libcurl4-openssl-dev curl nodejs"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
