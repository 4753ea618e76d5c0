#!/bin/sh
# t_arch.sh - the portable builds (docs/RUNNING.md, "Platforms"): ARCH=generic on this
# machine and ARCH=aarch64 (cross-built, run under qemu-aarch64 on x86-64),
# each through tests/arch_check.sh: engine unit tests with the expected
# kernels in use, and logits byte-identical to the host build.
cd "$(dirname "$0")/.." || exit 1
for A in generic aarch64; do
    [ "$A" = "$(make -s --no-print-directory print-arch 2>/dev/null)" ] && continue
    sh tests/arch_check.sh $A
done
