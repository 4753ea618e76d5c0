#!/usr/bin/env python3
"""gen_iq1_grid.py - prints the IQ1 grid of engine/kernels/quant_iq1.c in k3's compact form.

The 2048 points of the grid IQ1_S and IQ1_M weights select are data that define the format; llama.cpp
defines them in ggml/src/ggml-common.h (the table iq1s_grid: one 64-bit word per point, byte j the
signed level -1, 0 or +1 of weight j). This script reads that header and prints each point as a
16-bit word whose bits 2j, 2j + 1 hold level + 1 (0, 1 or 2) of weight j, eight words to a line as
quant_iq1.c lists them (IQ1_GRID_ROW(...)); the C macro there expands them back at compile time.

    tools/gen_iq1_grid.py /tmp/llama.cpp/ggml/src/ggml-common.h > /tmp/grid.inc

It checks what it reads: 2048 points, each byte one of 0xff, 0x00, 0x01.
"""
import re
import sys


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: gen_iq1_grid.py PATH/ggml-common.h\n")
        return 2
    text = open(argv[1]).read()
    m = re.search(r"GGML_TABLE_BEGIN\(uint64_t, iq1s_grid, NGRID_IQ1S\)(.*?)GGML_TABLE_END\(\)", text, re.S)
    if not m:
        sys.stderr.write("gen_iq1_grid.py: %s: no iq1s_grid table\n" % argv[1])
        return 1
    points = [int(h, 16) for h in re.findall(r"0x([0-9a-fA-F]{16})", m.group(1))]
    if len(points) != 2048:
        sys.stderr.write("gen_iq1_grid.py: %s: iq1s_grid has %d points, not 2048\n" % (argv[1], len(points)))
        return 1
    words = []
    for p in points:
        word = 0
        for j in range(8):
            byte = (p >> (8 * j)) & 0xFF
            level = {0xFF: -1, 0x00: 0, 0x01: 1}.get(byte)
            if level is None:
                sys.stderr.write("gen_iq1_grid.py: point %#018x has byte %#04x, not a level\n" % (p, byte))
                return 1
            word |= (level + 1) << (2 * j)
        words.append(word)
    for i in range(0, 2048, 8):
        print("    IQ1_GRID_ROW(" + ", ".join("0x%04x" % w for w in words[i:i + 8]) + "),")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
