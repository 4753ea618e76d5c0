#!/bin/sh
# check_layers.sh DEPFILE - fail if an engine object includes a header from a
# folder above its own. The engine's folders are layers, read bottom-up
# (docs/ARCHITECTURE.md, "The engine's folders"): a folder may use the ones
# below it and include/, never one above, so each can be read, tested and
# replaced knowing only what is under it. The compiler's dependency list
# (-MMD) is the proof, as for the front ends' door (check_door.sh).
LAYERS="base kernels text formats io weights model plan"
dep=$1
[ -f "$dep" ] || { echo "check_layers: $dep: no dependency file" >&2; exit 1; }
rank() {
    r=0
    for l in $LAYERS; do
        [ "$l" = "$1" ] && { echo $r; return; }
        r=$((r + 1))
    done
    echo -1
}
# The object's own folder: build*/engine/FOLDER/name.d
own=$(echo "$dep" | sed -n 's#.*engine/\([^/]*\)/[^/]*\.d$#\1#p')
own_rank=$(rank "$own")
[ "$own_rank" -ge 0 ] || { echo "check_layers: $dep: engine/$own is not a known layer (tools/check_layers.sh LAYERS)" >&2; exit 1; }
bad=""
for h in $(tr ' \\' '\n\n' < "$dep" | grep -E '(^|/)engine/[^/ ]+/[^ ]*\.h$' | sort -u); do
    folder=$(echo "$h" | sed 's#.*engine/\([^/]*\)/.*#\1#')
    r=$(rank "$folder")
    if [ "$r" -lt 0 ] || [ "$r" -gt "$own_rank" ]; then bad="$bad $h"; fi
done
if [ -n "$bad" ]; then
    echo "check_layers: ${dep%.d}.o (engine/$own) includes from a folder above it:$bad" >&2
    exit 1
fi
exit 0
