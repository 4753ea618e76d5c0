#!/usr/bin/env python3
"""Print the IQ2/IQ3 grids of ggml as k3's compact level-code tables.

usage: tools/iq_grids.py PATH/TO/ggml/src/ggml-common.h > /tmp/grids.txt
(then the printed arrays replace the generated section of
engine/kernels/quant_grids.c)

The grids are data of the formats: each grid point is 8 (IQ2) or 4 (IQ3)
byte magnitudes drawn from a few levels. k3 stores each point as the
indices of its levels, 2 bits per weight for IQ2 (levels 8, 25, 43) and 3
bits per weight for IQ3 (IQ3_XXS: 4, 12, ..., 52, 62; IQ3_S: 1, 3, ..., 15),
weight j in bits 2j or 3j of a 16-bit code; quant_grids.c expands them to
the byte grid once. The script refuses a grid whose values fall off those
levels, so a changed upstream table cannot be printed wrong silently."""
import re
import sys

GRIDS = [
    # (ggml table name, k3 array name, weights per point, levels)
    ("iq2xxs_grid", "iq2_xxs_codes", 8, [8, 25, 43]),
    ("iq2xs_grid", "iq2_xs_codes", 8, [8, 25, 43]),
    ("iq2s_grid", "iq2_s_codes", 8, [8, 25, 43]),
    ("iq3xxs_grid", "iq3_xxs_codes", 4, [4, 12, 20, 28, 36, 44, 52, 62]),
    ("iq3s_grid", "iq3_s_codes", 4, [1, 3, 5, 7, 9, 11, 13, 15]),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: iq_grids.py ggml-common.h")
    text = open(sys.argv[1]).read()
    for ggml_name, k3_name, weights, levels in GRIDS:
        m = re.search(r"GGML_TABLE_BEGIN\(\w+, %s, (\d+)\)(.*?)GGML_TABLE_END" % ggml_name, text, re.S)
        if not m:
            sys.exit("iq_grids.py: %s not found in %s" % (ggml_name, sys.argv[1]))
        points = [int(v, 16) for v in re.findall(r"0x[0-9a-fA-F]+", m.group(2))]
        if len(points) != int(m.group(1)):
            sys.exit("iq_grids.py: %s has %d values, not %s" % (ggml_name, len(points), m.group(1)))
        bits = 2 if weights == 8 else 3
        codes = []
        for p in points:
            code = 0
            for j in range(weights):
                magnitude = (p >> (8 * j)) & 0xFF
                if magnitude not in levels:
                    sys.exit("iq_grids.py: %s value 0x%x has byte %d off the levels" % (ggml_name, p, magnitude))
                code |= levels.index(magnitude) << (bits * j)
            codes.append(code)
        print("static const uint16_t %s[%d] = {" % (k3_name, len(codes)))
        for i in range(0, len(codes), 12):
            print("    " + ", ".join("0x%04x" % c for c in codes[i:i + 12]) + ",")
        print("};")


if __name__ == "__main__":
    main()
