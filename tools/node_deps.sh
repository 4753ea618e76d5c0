#!/bin/sh
# node_deps.sh - the official `openai` npm package, for the tests that drive
# `k3 serve` with a real client (tests/t_serve.sh). Installed into
# build/node (git-ignored) from the npm registry; pinned to a version that
# runs on node 20 (v5+ of the package asks for newer node as of 2026).
# Used by `make deps` (so by .ci/run). Needs node and npm on PATH: node comes
# from Debian's nodejs package (tools/deps.sh), npm with it or from Debian's npm.
set -e
cd "$(dirname "$0")/.."
VERSION=4.104.0
[ -f build/node/node_modules/openai/package.json ] &&
    grep -q "\"version\": \"$VERSION\"" build/node/node_modules/openai/package.json && exit 0
if ! command -v npm >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
fi
mkdir -p build/node
echo "deps: npm install openai@$VERSION into build/node"
npm install --prefix build/node --no-audit --no-fund --loglevel=error "openai@$VERSION" >/dev/null
