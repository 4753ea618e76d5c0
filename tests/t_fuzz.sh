#!/bin/sh
# t_fuzz.sh - short libFuzzer smoke of the parsers (make fuzz runs longer).
cd "$(dirname "$0")/.." || exit 1
sh tests/fuzz.sh ${K3_FUZZ_SECONDS:-8}
