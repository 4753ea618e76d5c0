#!/bin/sh
# speed_table.sh - the "What speed to expect" tables of docs/RUNNING.md: `k3 plan`
# on the shipped reference configs over machine classes (RAM x NVMe speed).
#   tools/speed_table.sh [RATES_JSON] [CORES]
# Kernel rates: RATES_JSON (default configs/kernel_rates_2026-11-29.json,
# this VM measured quiet) scaled to CORES (default 4). Prints markdown.
cd "$(dirname "$0")/.." || exit 1
K3BIN=${K3BIN:-./k3}
RATES=${1:-configs/kernel_rates_2026-11-29.json}
CORES=${2:-4}
PROMPT=${PROMPT:-512}
for model in kimi-k3 kimi-linear; do
    echo
    echo "$model, decode s/token (expert hit rate), $CORES cores; prompt of $PROMPT tokens in s:"
    echo
    echo "| RAM | 3.5 GB/s | 7 GB/s | 14 GB/s | prompt at 7 GB/s |"
    echo "|---|---|---|---|---|"
    for ram in 8 16 32 64 128; do
        line="| $ram GiB |"
        for disk in 3.5 7 14; do
            "$K3BIN" plan $model --mem ${ram}G --disk $disk --rates "$RATES" --cores $CORES --prompt $PROMPT \
                --json > /tmp/k3-speed-table.$$.json 2>/dev/null
            cell=$(python3 -c "
import json, sys
try: p = json.load(open('/tmp/k3-speed-table.$$.json'))['plan']
except Exception: print('below minimum'); sys.exit()
print('%.2f (%.0f%%)' % (p['decode_s_per_token'], 100 * p['hit_rate']) + ('|%.0f' % p['prompt_s'] if '$disk' == '7' else ''))")
            case $cell in *"|"*) prompt=${cell#*|}; cell=${cell%|*};; esac
            line="$line $cell |"
        done
        echo "$line $prompt |"
    done
done
rm -f /tmp/k3-speed-table.$$.json
