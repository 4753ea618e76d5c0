#!/bin/sh
# check_door.sh DEPFILE - fail if a front-end object (app/ chat/ ui/ history/)
# depends on a header inside engine/ or offline/. The front ends see the
# engine only through include/ (docs/ARCHITECTURE.md, "Layers and the door"); the
# compiler's own dependency list (-MMD) is the proof, so no spelling of the
# path (relative, absolute, through a symlink) slips past.
dep=$1
[ -f "$dep" ] || { echo "check_door: $dep: no dependency file" >&2; exit 1; }
bad=$(tr ' \\' '\n\n' < "$dep" | grep -E '(^|/)(engine|offline)/[^ ]*\.h$' | sort -u)
if [ -n "$bad" ]; then
    echo "check_door: ${dep%.d}.o reaches past include/ into: $(echo $bad)" >&2
    exit 1
fi
exit 0
