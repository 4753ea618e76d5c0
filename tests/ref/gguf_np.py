"""gguf_np.py - the project's numpy reference of the GGUF file format and of its block types (F32 F16 BF16
Q8_0 Q4_0 Q5_0 Q4_1 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K MXFP4 IQ4_NL IQ4_XS IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S
IQ1_S IQ1_M).

Written from the format as docs/MODEL.md ("GGUF") restates it, not from the C engine or from
llama.cpp's code: a GGUF writer (every metadata value type, nested arrays, alignment, split sets),
random and hand-made blocks of each type, and a dequantizer per type. The dequantizers compute in
float32 with each product rounded separately, in the order the format's formulas give, so their
values are bit-comparable with the engine's (engine/kernels/quant_types.c).

    gguf_np.py write-types OUT.gguf [--seed N]       one tensor of random blocks per type, every value type
    gguf_np.py check OUT.gguf DUMP_DIR [--seed N]    compare DUMP_DIR/<tensor>.f32 (tool_gguf dequant)
                                                     bit for bit with this reference; PASS/FAIL per type
    gguf_np.py expect-info OUT.gguf [--seed N]       the lines `tool_gguf info` must print for write-types
    gguf_np.py write-split DIR PREFIX N              a split set of N parts (gguf-split's naming and keys)
    gguf_np.py write-corrupt DIR                     one bad file per defect the reader must refuse
    gguf_np.py fuzz-seed-kimi-linear OUT             tests/fuzz/fuzz_gguf.c's seed: a Kimi Linear 48B header
    gguf_np.py --selftest                            hand-computed blocks of each type
"""
import os
import struct
import sys

import numpy as np

# value types (the file's u32 codes)
U8, I8, U16, I16, U32, I32, F32V, BOOL, STRING, ARRAY, U64, I64, F64V = range(13)
VALUE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f", BOOL: "<B",
              U64: "<Q", I64: "<q", F64V: "<d"}

# type name -> (ggml id, weights per block, bytes per block)
TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "BF16": (30, 1, 2),
    "Q8_0": (8, 32, 34), "Q4_0": (2, 32, 18), "Q5_0": (6, 32, 22),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "MXFP4": (39, 32, 17),
    "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136),
    # llama-quantize writes Q5_1 into Q5_K_M files (rows that are not whole 256-blocks) and Q4_1
    # into Q4_K_S files
    "Q4_1": (3, 32, 20), "Q5_1": (7, 32, 24),
    # the 2- and 3-bit grid types of the IQ2_XXS .. IQ3_M mixes
    "IQ2_XXS": (16, 256, 66), "IQ2_XS": (17, 256, 74), "IQ2_S": (22, 256, 82),
    "IQ3_XXS": (18, 256, 98), "IQ3_S": (21, 256, 110),
    # the 1-bit types of the smallest Kimi GGUFs (unsloth's UD-IQ1_S, UD-IQ1_M, UD-TQ1_0)
    "IQ1_S": (19, 256, 50), "IQ1_M": (29, 256, 56),
}
DECODE_ONLY_TYPES = {}
# IQ4_NL and IQ4_XS: the 16 non-uniform levels a nibble selects
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int32)
F32 = np.float32


def _iq_grids():
    """The IQ2/IQ3 grids (data of the formats, not logic): read from the level-code arrays of
    engine/kernels/quant_grids.c, each code holding the level index of weight j in bits 2j (IQ2, levels
    8 25 43) or 3j (IQ3_XXS: 4 12 20 28 36 44 52 62; IQ3_S: 1 3 .. 15). name -> (points, weights) uint8."""
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "..", "..", "engine", "kernels", "quant_grids.c")).read()
    spec = {"iq2_xxs": (8, [8, 25, 43]), "iq2_xs": (8, [8, 25, 43]), "iq2_s": (8, [8, 25, 43]),
            "iq3_xxs": (4, [4, 12, 20, 28, 36, 44, 52, 62]), "iq3_s": (4, [1, 3, 5, 7, 9, 11, 13, 15])}
    grids = {}
    for name, (weights, levels) in spec.items():
        body = re.search(r"%s_codes\[\d+\] = \{(.*?)\};" % name, text, re.S).group(1)
        codes = np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]+", body)], np.int64)
        bits = 2 if weights == 8 else 3
        index = (codes[:, None] >> (bits * np.arange(weights))) & ((1 << bits) - 1)
        grids[name] = np.array(levels, np.uint8)[index]
    return grids


_IQ_GRIDS = None


def iq_grid(name):
    global _IQ_GRIDS
    if _IQ_GRIDS is None:
        _IQ_GRIDS = _iq_grids()
    return _IQ_GRIDS[name]
def _iq1_grid():
    """The IQ1 grid, (2048, 8) levels -1/0/+1: data of the format (llama.cpp's iq1s_grid), read from the
    compact table in engine/kernels/quant_iq1.c (each point a 16-bit word, level + 1 in bits 2j, 2j + 1),
    as tools/gen_iq1_grid.py printed it from ggml-common.h."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine", "kernels", "quant_iq1.c")
    import re
    words = [int(w, 16) for row in re.findall(r"IQ1_GRID_ROW\(([^)]*)\),", open(path).read())
             for w in row.split(",")]
    assert len(words) == 2048, "%s: %d grid points, not 2048" % (path, len(words))
    w = np.array(words, np.int32)[:, None]
    return ((w >> (2 * np.arange(8))) & 3) - 1


IQ1_GRID = None


# ---------------------------------------------------------------- writer

def _string(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    """The bytes of value v of type t; an array is (element type, [elements])."""
    if t == STRING:
        return _string(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_value(et, x) for x in items)
    return struct.pack(SCALAR_FMT[t], v)


def gguf_bytes(kvs, tensors, alignment=32, version=3):
    """A whole GGUF file. kvs: [(key, type, value)]; tensors: [(name, type name, dims innermost first,
    raw bytes)], placed in order, each at an offset that is a multiple of the alignment."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += _string(k) + struct.pack("<I", t) + _value(t, v)
    data, offsets = b"", []
    for _, _, _, raw in tensors:
        data += bytes(-len(data) % alignment)
        offsets.append(len(data))
        data += raw
    for (name, tname, dims, _), off in zip(tensors, offsets):
        head += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", TYPES[tname][0], off)
    head += bytes(-len(head) % alignment)
    return head + data


# ---------------------------------------------------------------- blocks

def _finite_halves(rng, n):
    h = rng.integers(0, 1 << 16, n, dtype=np.uint32)
    exp_all_ones = ((h >> 10) & 31) == 31
    h[exp_all_ones] &= ~np.uint32(1 << 10)            # exponent 31 (inf/NaN) -> 30
    return h.astype(np.uint16)


def random_blocks(rng, tname, n_blocks):
    """n_blocks random blocks of type tname as raw bytes: every quant byte random, the f16 scales any
    finite half (subnormals included), E8M0 any byte."""
    _, _, nbytes = TYPES[tname]
    raw = rng.integers(0, 256, (n_blocks, nbytes), dtype=np.uint16).astype(np.uint8)
    half_at = {"F16": [0], "Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q4_1": [0, 2], "Q5_1": [0, 2], "Q2_K": [80, 82], "Q3_K": [108],
               "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_NL": [0], "IQ4_XS": [0], "IQ2_XXS": [0], "IQ2_XS": [0],
               "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0]}.get(tname, [])
    for off in half_at:
        raw[:, off:off + 2] = _finite_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if tname == "IQ1_S":
        raw[:, 0:2] = _finite_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if tname == "IQ1_M":
        # the f16 d is the top nibbles of the four u16 scale words (bytes 49, 51, 53, 55)
        h = _finite_halves(rng, n_blocks).astype(np.int32)
        for k in range(4):
            raw[:, 49 + 2 * k] = (raw[:, 49 + 2 * k] & 15) | (((h >> (4 * k)) & 15) << 4)
    if tname == "BF16":
        b = raw.view("<u2").reshape(n_blocks).astype(np.uint32)
        b[((b >> 7) & 255) == 255] &= ~np.uint32(1 << 7)
        raw = b.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    if tname == "F32":
        raw = rng.standard_normal(n_blocks).astype("<f4").view(np.uint8).reshape(n_blocks, 4)
    return raw.tobytes()


# ---------------------------------------------------------------- dequantizers (float32)

def _half(b, off):
    return b[:, off:off + 2].copy().view("<f2").astype(F32)        # (n, 1)


def _k_scale_min(sc12):
    """Q4_K/Q5_K: the 12 bytes -> 8 six-bit scales and 8 six-bit mins, per block."""
    s = sc12.astype(np.int32)
    scale = np.empty((len(s), 8), np.int32)
    mn = np.empty((len(s), 8), np.int32)
    scale[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    scale[:, 4:] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return scale, mn


def _dequant_iq(tname, b):
    """The grid types, per block of 256 weights: weight w = 32g + 8l + j is byte j of an 8-weight group
    (l) of a 32-weight group (g). Its magnitude comes from a grid point, its sign from bit j of the
    group's sign byte (IQ2_XXS, IQ2_XS, IQ3_XXS: a 7-bit index whose eighth bit is its parity), its scale
    from the 32-weight group (or its half): w = +-(scale * magnitude), the product in float32."""
    w = np.arange(256)
    g, l, j = w // 32, (w // 8) % 4, w % 8
    u = b.astype(np.int64)
    d = _half(b, 0)

    def u32(off):                              # the little-endian u32 at byte off (an array) of each block
        return u[:, off] | u[:, off + 1] << 8 | u[:, off + 2] << 16 | u[:, off + 3] << 24

    def seven_bit_signs(index7):               # bit j of the sign byte for a 7-bit sign index
        ones = sum((index7 >> k) & 1 for k in range(7))
        return np.where(j == 7, ones & 1, (index7 >> np.minimum(j, 6)) & 1)

    def two_nibble_scale(byte):                # IQ2_XS / IQ2_S: nibble l // 2 of the group's scale byte
        s = (byte >> (4 * (l // 2))) & 15
        return (d * (F32(0.5) + s.astype(F32))) * F32(0.25)

    if tname == "IQ2_XXS":
        words = u32(6 + 8 * g)                 # 4 sign indices and the scale, after the 4 index bytes
        magnitude = iq_grid("iq2_xxs")[u[:, 2 + 8 * g + l], j]
        negative = seven_bit_signs((words >> (7 * l)) & 127)
        scale = (d * (F32(0.5) + (words >> 28).astype(F32))) * F32(0.25)
    elif tname == "IQ2_XS":
        word = u[:, 2 + 2 * (4 * g + l)] | u[:, 3 + 2 * (4 * g + l)] << 8
        magnitude = iq_grid("iq2_xs")[word & 511, j]
        negative = seven_bit_signs(word >> 9)
        scale = two_nibble_scale(u[:, 66 + g])
    elif tname == "IQ2_S":
        index = u[:, 2 + 4 * g + l] | ((u[:, 66 + g] >> (2 * l)) & 3) << 8
        magnitude = iq_grid("iq2_s")[index, j]
        negative = (u[:, 34 + 4 * g + l] >> j) & 1
        scale = two_nibble_scale(u[:, 74 + g])
    elif tname == "IQ3_XXS":
        words = u32(66 + 4 * g)
        magnitude = iq_grid("iq3_xxs")[u[:, 2 + 8 * g + 2 * l + j // 4], j % 4]
        negative = seven_bit_signs((words >> (7 * l)) & 127)
        scale = (d * (F32(0.5) + (words >> 28).astype(F32))) * F32(0.5)
    else:  # IQ3_S: 9-bit point indices, explicit sign bytes, one 4-bit scale per 32 weights
        point = 2 * l + j // 4
        index = u[:, 2 + 8 * g + point] | ((u[:, 66 + g] >> point) & 1) << 8
        magnitude = iq_grid("iq3_s")[index, j % 4]
        negative = (u[:, 74 + 4 * g + l] >> j) & 1
        s = (u[:, 106 + g // 2] >> (4 * (g % 2))) & 15
        scale = d * (1 + 2 * s).astype(F32)
    value = scale * magnitude.astype(F32)
    return np.where(negative == 1, -value, value).astype(F32).reshape(-1)


def dequant(tname, raw):
    """Raw bytes of whole blocks of type tname -> float32 weights."""
    _, qk, nbytes = TYPES[tname] if tname in TYPES else DECODE_ONLY_TYPES[tname]
    b = np.frombuffer(raw, np.uint8).reshape(-1, nbytes)
    n = len(b)
    if tname == "F32":
        return b.copy().view("<f4").reshape(-1)
    if tname == "F16":
        return b.copy().view("<f2").astype(F32).reshape(-1)
    if tname == "BF16":
        return (b.copy().view("<u2").astype(np.uint32) << 16).view(F32).reshape(-1)
    if tname in ("IQ1_S", "IQ1_M"):
        # weight w of a block is level j = w % 8 of the grid point of its group g = w / 8, shifted by
        # +-1/8 and times the scale d * (2 s + 1) of its 32 (IQ1_S) or 16 (IQ1_M) weights
        global IQ1_GRID
        if IQ1_GRID is None:
            IQ1_GRID = _iq1_grid()
        w = np.arange(256)
        g, j = w // 8, w % 8
        if tname == "IQ1_S":
            # f16 d; 32 bytes of low index bits (byte g); a u16 per 32 weights at 34: the high index bits
            # of its groups at 3 (g % 4), the scale s in bits 12-14, bit 15 the sign of the shift
            qh = b[:, 34:50].copy().view("<u2").astype(np.int32)[:, g // 4]
            index = b[:, 2 + g].astype(np.int32) | (((qh >> (3 * (g % 4))) & 7) << 8)
            s, negative = (qh >> 12) & 7, qh >> 15
            d = _half(b, 0)
        else:
            # 32 bytes of low index bits, then a nibble per group (bytes 32 + g / 2, low nibble for even
            # g): high index bits 0-2, the shift's sign bit 3; then four u16 scale words: 3-bit scales
            # of each 16 weights (four per word), the f16 d in the top nibbles
            nib = (b[:, 32 + g // 2].astype(np.int32) >> (4 * (g % 2))) & 15
            index = b[:, g].astype(np.int32) | ((nib & 7) << 8)
            negative = nib >> 3
            sc = b[:, 48:56].copy().view("<u2").astype(np.int32)
            s = (sc[:, w // 64] >> (3 * ((w // 16) % 4))) & 7
            dbits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 12) << 4) | ((sc[:, 2] >> 12) << 8) | ((sc[:, 3] >> 12) << 12)
            d = dbits.astype("<u2").view("<f2").astype(F32)[:, None]
        level = IQ1_GRID[index, j].astype(F32)
        delta = np.where(negative == 1, F32(-0.125), F32(0.125)).astype(F32)
        with np.errstate(over="ignore", invalid="ignore"):
            return ((d * (2 * s + 1).astype(F32)) * (level + delta)).reshape(-1)
    if tname == "IQ4_XS":
        # weight w = 32g + 16k + j: nibble k (0 low, 1 high) of byte 16g + j; group g's 6-bit scale from
        # nibble g % 2 of byte 4 + g / 2 and bits 2g of the u16 at byte 2
        w = np.arange(256)
        g, k, j = w // 32, (w // 16) % 2, w % 16
        byte = b[:, 8 + 16 * g + j].astype(np.int32)
        nib = np.where(k == 0, byte & 15, byte >> 4)
        high = b[:, 2:4].copy().view("<u2").astype(np.int32)              # (n, 1)
        low = (b[:, 4 + g // 2].astype(np.int32) >> (4 * (g % 2))) & 15
        scale = low | (((high >> (2 * g)) & 3) << 4)
        return ((_half(b, 0) * (scale - 32).astype(F32)) * IQ4_LEVELS[nib].astype(F32)).reshape(-1)
    if tname in ("Q4_1", "Q5_1"):
        # f16 scale d and f16 offset m, then (Q5_1) a u32 of fifth bits, then 16 bytes of nibbles as in
        # Q4_0: w = d * q + m, q unsigned (0..15 or 0..31)
        j = np.arange(32)
        qs = b[:, -16:].astype(np.int32)
        q = np.concatenate([qs & 15, qs >> 4], axis=1)
        if tname == "Q5_1":
            high = b[:, 4:8].copy().view("<u4").astype(np.int64)
            q = q | (((high >> j) & 1) << 4).astype(np.int32)
        return (q.astype(F32) * _half(b, 0) + _half(b, 2)).reshape(-1)
    if tname in ("Q4_0", "Q5_0", "Q8_0", "MXFP4", "IQ4_NL"):
        j = np.arange(32)
        if tname == "Q8_0":
            q = b[:, 2:34].view(np.int8).astype(np.int32)
            return (q.astype(F32) * _half(b, 0)).reshape(-1)
        qs = b[:, -16:].astype(np.int32)
        nib = np.concatenate([qs & 15, qs >> 4], axis=1)              # weight j<16: low nibble of byte j
        if tname == "Q4_0":
            return ((nib - 8).astype(F32) * _half(b, 0)).reshape(-1)
        if tname == "IQ4_NL":
            return (_half(b, 0) * IQ4_LEVELS[nib].astype(F32)).reshape(-1)
        if tname == "Q5_0":
            high = b[:, 2:6].copy().view("<u4").astype(np.int64)      # bit j = fifth bit of weight j
            fifth = (high >> j) & 1
            return (((nib | (fifth << 4)) - 16).astype(F32) * _half(b, 0)).reshape(-1)
        e = b[:, 0].astype(np.int32)
        d = np.ldexp(F32(1), e - 128).astype(F32)[:, None]           # 2^(e-128), half the E8M0 value
        doubled = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int32)
        with np.errstate(over="ignore"):
            return (doubled[nib].astype(F32) * d).reshape(-1)
    if tname in ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S"):
        return _dequant_iq(tname, b)
    out = np.zeros((n, 256), F32)
    with np.errstate(over="ignore", invalid="ignore"):
        if tname in ("Q2_K", "Q3_K"):
            # weight w = 128h + 32s + 16r + l: quant byte 32h + 16r + l, bits 2s; scale 8h + 2s + r
            w = np.arange(256)
            h, s, r, l = w // 128, (w // 32) % 4, (w // 16) % 2, w % 16
            qbyte, k = 32 * h + 16 * r + l, 8 * h + 2 * s + r
            if tname == "Q2_K":
                qs, sc = b[:, 16:80].astype(np.int32), b[:, 0:16].astype(np.int32)
                q = (qs[:, qbyte] >> (2 * s)) & 3
                dl = _half(b, 80) * (sc[:, k] & 15).astype(F32)
                ml = _half(b, 82) * (sc[:, k] >> 4).astype(F32)
                return (dl * q.astype(F32) - ml).reshape(-1)
            hm, qs, p = b[:, 0:32].astype(np.int32), b[:, 32:96].astype(np.int32), b[:, 96:108].astype(np.int32)
            kk = np.arange(16)
            low4 = np.where(kk < 8, p[:, kk % 8] & 15, p[:, kk % 8] >> 4)
            high2 = (p[:, 8 + kk % 4] >> (2 * (kk // 4))) & 3
            scale = (low4 | (high2 << 4)) - 32
            q = (qs[:, qbyte] >> (2 * s)) & 3
            hbit = (hm[:, 16 * r + l] >> (4 * h + s)) & 1
            v = q - np.where(hbit == 1, 0, 4)
            return ((_half(b, 108) * scale[:, k].astype(F32)) * v.astype(F32)).reshape(-1)
        if tname in ("Q4_K", "Q5_K"):
            # weight w = 32j + l: nibble of byte 32(j//2) + l (low for even j), scale/min pair j
            w = np.arange(256)
            j, l = w // 32, w % 32
            scale, mn = _k_scale_min(b[:, 4:16])
            qs = b[:, 16:144] if tname == "Q4_K" else b[:, 48:176]
            byte = qs[:, 32 * (j // 2) + l].astype(np.int32)
            q = np.where(j % 2 == 0, byte & 15, byte >> 4)
            if tname == "Q5_K":
                q = q + 16 * ((b[:, 16:48].astype(np.int32)[:, l] >> j) & 1)
            dl = _half(b, 0) * scale[:, j].astype(F32)
            ml = _half(b, 2) * mn[:, j].astype(F32)
            return (dl * q.astype(F32) - ml).reshape(-1)
        if tname == "Q6_K":
            # weight w = 128h + 32k + l: ql byte 64h + 32(k%2) + l (low nibble for k<2), qh byte 32h + l
            # bits 2k, scale 8h + l//16 + 2k
            w = np.arange(256)
            h, k, l = w // 128, (w // 32) % 4, w % 32
            ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
            sc = b[:, 192:208].view(np.int8).astype(np.int32)
            lbyte = ql[:, 64 * h + 32 * (k % 2) + l]
            low = np.where(k < 2, lbyte & 15, lbyte >> 4)
            q = (low | (((qh[:, 32 * h + l] >> (2 * k)) & 3) << 4)) - 32
            return ((_half(b, 208) * sc[:, 8 * h + l // 16 + 2 * k].astype(F32)) * q.astype(F32)).reshape(-1)
    raise ValueError("unknown type " + tname)


# ---------------------------------------------------------------- the test files

def types_file_parts(seed):
    """The kvs and tensors of write-types: every value type, nested arrays, one tensor per block type
    (16 rows x 1024 weights for the 256-blocks: 64 blocks; 64 x 64 for the others: 128 blocks)."""
    rng = np.random.default_rng(seed)
    kvs = [("general.architecture", STRING, "kimi-linear"), ("general.name", STRING, "types \u00e9\u4e2d"),
           ("general.alignment", U32, 64),
           ("t.u8", U8, 200), ("t.i8", I8, -100), ("t.u16", U16, 60000), ("t.i16", I16, -30000),
           ("t.u32", U32, 4000000000), ("t.i32", I32, -2000000000), ("t.f32", F32V, 0.1),
           ("t.bool", BOOL, 1), ("t.u64", U64, 1 << 60), ("t.i64", I64, -(1 << 60)), ("t.f64", F64V, -2.5e-300),
           ("t.empty_string", STRING, ""),
           ("t.tokens", ARRAY, (STRING, ["a", "", "\u0120the", "<|im_end|>"])),
           ("t.scores", ARRAY, (F32V, [0.5, -1.0, 3.25])), ("t.types", ARRAY, (I32, [1, 2, 3, 6])),
           ("t.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"]), (ARRAY, [(I64, [7])])])),
           ("t.empty_array", ARRAY, (U16, []))]
    tensors = []
    for tname, (_, qk, nbytes) in TYPES.items():
        cols, rows = (1024, 16) if qk == 256 else (64, 64)
        raw = random_blocks(rng, tname, rows * cols // qk)
        tensors.append(("blk.0.%s.weight" % tname.lower(), tname, [cols, rows], raw))
    return kvs, tensors


def _fmt_value(t, v):
    if t == STRING:
        b = v.encode() if isinstance(v, str) else v
        return "".join(chr(c) if 32 <= c < 127 and c != 92 else "\\x%02x" % c for c in b)
    if t == F32V:
        return "%.9g" % struct.unpack("<f", struct.pack("<f", v))[0]
    if t == F64V:
        return "%.17g" % v
    return "%d" % v


def expect_info(kvs, tensors, alignment):
    """The lines `tool_gguf info` prints for a single file written by gguf_bytes."""
    lines = []
    for k, t, v in kvs:
        if t == ARRAY:
            et, items = v
            if et == ARRAY:
                lines.append("kv %s array[%d] of array" % (k, len(items)))
            else:
                lines.append("kv %s array[%d] of %s:%s" % (k, len(items), VALUE_NAMES[et],
                                                           "".join(" " + _fmt_value(et, x) for x in items)))
        else:
            lines.append("kv %s %s %s" % (k, VALUE_NAMES[t], _fmt_value(t, v)))
    for name, tname, dims, raw in tensors:
        lines.append("tensor %s %s %s %d" % (name, tname, ",".join(str(d) for d in dims), len(raw)))
    return lines


def check_dump(path, dump_dir, seed):
    kvs, tensors = types_file_parts(seed)
    ok_all = True
    for name, tname, dims, raw in tensors:
        want = dequant(tname, raw)
        f = os.path.join(dump_dir, name + ".f32")
        if not os.path.exists(f):
            print("FAIL gguf_dequant_%s: %s missing" % (tname, f))
            ok_all = False
            continue
        got = np.fromfile(f, "<f4")
        if got.shape != want.shape:
            print("FAIL gguf_dequant_%s: %d values, reference %d" % (tname, got.size, want.size))
            ok_all = False
            continue
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        if same.all():
            print("PASS gguf_dequant_%s (%d weights bit-equal to the numpy reference)" % (tname, got.size))
        else:
            i = int(np.argmin(same))
            print("FAIL gguf_dequant_%s: weight %d is %r, reference %r (%d of %d differ)"
                  % (tname, i, got[i], want[i], int((~same).sum()), got.size))
            ok_all = False
    return ok_all


def write_split(out_dir, prefix, n):
    """A split set: tensors spread over n parts, each part with split.no/count/tensors.count, part 1
    with the model metadata (as gguf-split writes)."""
    rng = np.random.default_rng(7)
    tensors = [("t%d" % i, "Q8_0", [64, 2], random_blocks(rng, "Q8_0", 4)) for i in range(2 * n)]
    for p in range(n):
        kvs = [("split.no", U16, p), ("split.count", U16, n), ("split.tensors.count", I32, len(tensors))]
        if p == 0:
            kvs = [("general.architecture", STRING, "kimi-linear")] + kvs
        mine = tensors[2 * p:2 * p + 2]
        path = os.path.join(out_dir, "%s-%05d-of-%05d.gguf" % (prefix, p + 1, n))
        open(path, "wb").write(gguf_bytes(kvs, mine))


def _header(kv_bytes, n_kv=1, n_tensors=0):
    """A header of hand-made key/value bytes, padded to 32."""
    raw = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + kv_bytes
    return raw + bytes(-len(raw) % 32)


def write_corrupt(out_dir):
    """One file per defect, and the words the reader's one-line refusal must hold; prints
    'name<TAB>words' lines."""
    rng = np.random.default_rng(3)
    q8 = random_blocks(rng, "Q8_0", 2)
    good_kvs = [("general.architecture", STRING, "kimi-linear")]
    good = gguf_bytes(good_kvs, [("a", "Q8_0", [64, 1], q8)])
    info_end = good.index(struct.pack("<IQ", 8, 0)) + 12          # the tensor info's last byte + 1
    one_tensor = gguf_bytes(good_kvs, [("a", "Q8_0", [64, 1], q8)])
    dims_64_1 = struct.pack("<QQ", 64, 1)
    key = _string("k")
    cases = {
        "truncated_header": (good[:info_end - 4], "a tensor offset at byte"),
        "truncated_data": (good[:-5], "runs past the end of the file (data section 63 bytes"),
        "bad_magic": (b"GGUX" + good[4:], "not a GGUF file"),
        "version_1": (good[:4] + struct.pack("<I", 1) + good[8:], "GGUF version 1 is not supported"),
        "big_endian": (good[:4] + struct.pack(">I", 3) + good[8:], "a big-endian file?"),
        "huge_kv_count": (good[:16] + struct.pack("<Q", 1 << 62) + good[24:], "metadata entries cannot fit"),
        "huge_tensor_count": (good[:8] + struct.pack("<Q", 1 << 40) + good[16:], "tensors cannot fit"),
        "unknown_value_type": (_header(key + struct.pack("<I", 77) + b"\x01"), "value type 77, not a GGUF value type"),
        "huge_string": (_header(key + struct.pack("<IQ", STRING, 1 << 50) + b"abc"), "a string value at byte"),
        "huge_array": (_header(key + struct.pack("<IIQ", ARRAY, U32, 1 << 61) + struct.pack("<I", 1)),
                       "array of 2305843009213693952 u32 elements"),
        "bad_bool": (_header(key + struct.pack("<I", BOOL) + b"\x02"), "bool value 2"),
        "nul_in_key": (_header(_string(b"a\x00b") + struct.pack("<I", U8) + b"\x01"), "holds a NUL byte"),
        "empty_key": (_header(_string(b"") + struct.pack("<I", U8) + b"\x01"), "is 0 bytes long"),
        "duplicate_key": (gguf_bytes([("k", U8, 1), ("k", U8, 2)], []), "metadata key 'k' appears twice"),
        "duplicate_tensor": (gguf_bytes(good_kvs, [("a", "Q8_0", [64, 1], q8), ("a", "Q8_0", [64, 1], q8)]),
                             "tensor 'a' is given twice"),
        "bad_alignment": (gguf_bytes([("general.alignment", U32, 48)], []), "general.alignment 48 is not a power of two"),
        "alignment_not_u32": (gguf_bytes([("general.alignment", U64, 32)], []), "general.alignment is a u64"),
        "unknown_type": (good.replace(struct.pack("<IQ", 8, 0), struct.pack("<IQ", 35, 0)),
                         "type TQ2_0 (ggml type 35), which k3 does not read"),
        "unknown_ggml_id": (good.replace(struct.pack("<IQ", 8, 0), struct.pack("<IQ", 200, 0)),
                            "ggml type 200, not a ggml type"),
        "row_not_whole_blocks": (one_tensor.replace(dims_64_1, struct.pack("<QQ", 48, 1)), "not whole Q8_0 blocks of 32"),
        "offset_not_aligned": (good.replace(struct.pack("<IQ", 8, 0), struct.pack("<IQ", 8, 8)),
                               "offset 8 is not a multiple of the alignment 32"),
        "tensor_overruns": (one_tensor.replace(dims_64_1, struct.pack("<QQ", 64, 1000)),
                            "(68000 bytes at data offset 0) runs past the end of the file"),
        "overlap": (gguf_bytes(good_kvs, [("a", "Q8_0", [64, 1], q8), ("b", "Q8_0", [64, 1], q8)]).replace(
            struct.pack("<IQ", 8, 96), struct.pack("<IQ", 8, 32)), "tensors 'a' and 'b' overlap"),
        "five_dims": (gguf_bytes(good_kvs, [("a", "F32", [1, 1, 1, 1, 1], bytes(4))]), "has 5 dimensions"),
        "deep_nesting": (gguf_bytes([("k", ARRAY, (ARRAY, [(ARRAY, [(ARRAY, [(ARRAY, [(U8, [1])])])])]))], []),
                         "nested deeper than 4"),
    }
    for name, (raw, _) in cases.items():
        open(os.path.join(out_dir, name + ".gguf"), "wb").write(raw)
    return ["%s\t%s" % (name, cases[name][1]) for name in sorted(cases)]


def kimi_linear_header(seed=5):
    """The header of a Kimi Linear 48B GGUF at its real sizes, as llama.cpp's converter names things
    (docs/MODEL.md, "GGUF"): 163840 tokens, their types and 163328 merges, 27 layers of tensor infos
    in the types of a Q4_K_M file (Q8_0 where a row is not whole 256-blocks). Returns the header and
    the size of the data section it describes (not written)."""
    rng = np.random.default_rng(seed)
    vocab, hidden, layers, experts = 163840, 2304, 27, 256
    full_attn = {3, 7, 11, 15, 19, 23, 26}
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz\xc4\xa0", np.uint8)
    lengths = rng.integers(1, 12, vocab)
    tokens = [bytes(letters[rng.integers(0, len(letters), n)]) for n in lengths]
    merges = [tokens[i] + b" " + tokens[i + 1] for i in range(vocab - 512)]
    kvs = [("general.architecture", STRING, "kimi-linear"), ("general.name", STRING, "Kimi Linear 48B A3B Instruct"),
           ("general.file_type", U32, 15), ("general.quantization_version", U32, 2),
           ("kimi-linear.block_count", U32, layers), ("kimi-linear.context_length", U32, 1048576),
           ("kimi-linear.embedding_length", U32, hidden), ("kimi-linear.feed_forward_length", U32, 9216),
           ("kimi-linear.attention.head_count", U32, 32),
           ("kimi-linear.attention.head_count_kv", ARRAY, (U32, [1 if i in full_attn else 0 for i in range(layers)])),
           ("kimi-linear.attention.layer_norm_rms_epsilon", F32V, 1e-5),
           ("kimi-linear.attention.kv_lora_rank", U32, 512), ("kimi-linear.attention.key_length", U32, 576),
           ("kimi-linear.attention.key_length_mla", U32, 192), ("kimi-linear.attention.value_length_mla", U32, 128),
           ("kimi-linear.rope.dimension_count", U32, 64), ("kimi-linear.ssm.conv_kernel", U32, 4),
           ("kimi-linear.kda.head_dim", U32, 128), ("kimi-linear.vocab_size", U32, vocab),
           ("kimi-linear.expert_count", U32, experts), ("kimi-linear.expert_used_count", U32, 8),
           ("kimi-linear.expert_feed_forward_length", U32, 1024), ("kimi-linear.expert_shared_count", U32, 1),
           ("kimi-linear.leading_dense_block_count", U32, 1), ("kimi-linear.expert_weights_scale", F32V, 2.446),
           ("kimi-linear.expert_gating_func", U32, 2),
           ("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "kimi-k2"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
           ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * (vocab - 256) + [3] * 256)),
           ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
           ("tokenizer.ggml.bos_token_id", U32, 163584), ("tokenizer.ggml.eos_token_id", U32, 163586),
           ("tokenizer.chat_template", STRING, "{% for message in messages %}<|im_" + "x" * 2000 + "{% endfor %}")]
    t = []

    def add(name, tname, dims):
        t.append((name, tname, dims))
    add("token_embd.weight", "Q4_K", [hidden, vocab])
    add("output_norm.weight", "F32", [hidden])
    add("output.weight", "Q6_K", [hidden, vocab])
    for b in range(layers):
        p = "blk.%d." % b
        add(p + "attn_norm.weight", "F32", [hidden])
        add(p + "ffn_norm.weight", "F32", [hidden])
        if b in full_attn:
            add(p + "attn_q.weight", "Q4_K", [hidden, 32 * 192])
            add(p + "attn_kv_a_mqa.weight", "Q4_K", [hidden, 576])
            add(p + "attn_kv_a_norm.weight", "F32", [512])
            add(p + "attn_k_b.weight", "Q8_0", [128, 512, 32])
            add(p + "attn_v_b.weight", "Q4_K", [512, 128, 32])
            add(p + "attn_output.weight", "Q4_K", [32 * 128, hidden])
        else:
            for x in "qkv":
                add(p + "attn_%s.weight" % x, "Q4_K", [hidden, 4096])
                add(p + "ssm_conv1d_%s.weight" % x, "F32", [4, 1, 4096, 1])
            add(p + "ssm_f_a.weight", "Q4_K", [hidden, 128])
            add(p + "ssm_f_b.weight", "Q8_0", [128, 4096])
            add(p + "ssm_beta.weight", "Q4_K", [hidden, 32])
            add(p + "ssm_a", "F32", [1, 32, 1, 1])
            add(p + "ssm_dt.bias", "F32", [4096])
            add(p + "ssm_g_a.weight", "Q4_K", [hidden, 128])
            add(p + "ssm_g_b.weight", "Q8_0", [128, 4096])
            add(p + "ssm_norm.weight", "F32", [128])
            add(p + "attn_output.weight", "Q4_K", [4096, hidden])
        if b == 0:
            add(p + "ffn_gate.weight", "Q4_K", [hidden, 9216])
            add(p + "ffn_up.weight", "Q4_K", [hidden, 9216])
            add(p + "ffn_down.weight", "Q6_K", [9216, hidden])
        else:
            add(p + "ffn_gate_inp.weight", "F32", [hidden, experts])
            add(p + "exp_probs_b.bias", "F32", [experts])
            add(p + "ffn_gate_exps.weight", "Q4_K", [hidden, 1024, experts])
            add(p + "ffn_up_exps.weight", "Q4_K", [hidden, 1024, experts])
            add(p + "ffn_down_exps.weight", "Q6_K", [1024, hidden, experts])
            add(p + "ffn_gate_shexp.weight", "Q4_K", [hidden, 1024])
            add(p + "ffn_up_shexp.weight", "Q4_K", [hidden, 1024])
            add(p + "ffn_down_shexp.weight", "Q6_K", [1024, hidden])
    head = b"GGUF" + struct.pack("<IQQ", 3, len(t), len(kvs))
    for k, vt, v in kvs:
        head += _string(k) + struct.pack("<I", vt) + _value(vt, v)
    off = 0
    for name, tname, dims in t:
        _, qk, nbytes = TYPES[tname]
        n = int(np.prod(dims))
        off += -off % 32
        head += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", TYPES[tname][0], off)
        off += n // qk * nbytes
    head += bytes(-len(head) % 32)
    return head, off


# ---------------------------------------------------------------- self-test

def selftest():
    fails = total = 0

    def check(name, ok, why=""):
        nonlocal fails, total
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
        fails += 0 if ok else 1
        total += 1

    def half(x):
        return np.array([x], "<f2").tobytes()
    # Q8_0: d = 0.5, q = -128..-97 -> -64..-48.5
    blk = half(0.5) + bytes((np.arange(32) - 128).astype(np.int8).view(np.uint8))
    check("q8_0_hand", np.array_equal(dequant("Q8_0", blk), (np.arange(32) - 128) * 0.5))
    # Q4_0: d = 2, byte j = (j & 15) | 3 << 4 -> low (j - 8) * 2, high (3 - 8) * 2
    blk = half(2.0) + bytes([(j & 15) | 0x30 for j in range(16)])
    want = [(j - 8) * 2.0 for j in range(16)] + [-10.0] * 16
    check("q4_0_hand", np.array_equal(dequant("Q4_0", blk), want))
    # Q5_0: fifth bits only for weights 0 and 31 -> 16 + (0 - 16) ... weight 0: 0|16 - 16 = 0; weight 31: 15|16-16 = 15
    blk = half(1.0) + struct.pack("<I", 1 | 1 << 31) + bytes([0xF0] * 16)
    want = [0.0] + [-16.0] * 15 + [-1.0] * 15 + [15.0]
    check("q5_0_hand", np.array_equal(dequant("Q5_0", blk), want))
    # MXFP4: e = 128 -> d = 1; nibbles 7 (12) low, 15 (-12) high; e = 1 -> 2^-127 * 12
    blk = bytes([128]) + bytes([0xF7] * 16)
    check("mxfp4_hand", np.array_equal(dequant("MXFP4", blk), [12.0] * 16 + [-12.0] * 16))
    tiny = dequant("MXFP4", bytes([1]) + bytes([0x07] * 16))
    check("mxfp4_subnormal_scale", tiny[0] == F32(12 * 2.0 ** -127) and tiny[16] == 0.0)
    # Q4_K: d = 1, dmin = 0.5, all scale/min pairs of the first four = (sc 2, min 3), nibbles 5 / 9
    sc = bytes([2] * 4 + [3] * 4 + [0] * 4)
    blk = half(1.0) + half(0.5) + sc + bytes([0x95] * 128)
    y = dequant("Q4_K", blk)
    check("q4_k_hand", y[0] == 2 * 5 - 1.5 and y[32] == 2 * 9 - 1.5 and y[64] == 2 * 5 - 1.5 and y[128] == 0.0,
          "got %r %r %r %r" % (y[0], y[32], y[64], y[128]))
    # pairs 4..7: scale = low nibble of byte j+4 | top bits of byte j-4 << 4
    sc = bytes([0xC0 | 1] + [0] * 3 + [0x40] + [0] * 3 + [0x21] + [0] * 3)
    blk = half(1.0) + half(1.0) + sc + bytes([0x11] * 128)
    y = dequant("Q4_K", blk)
    # pair 4: scale = (0x21 & 15) | (0xC1 >> 6) << 4 = 1 | 48 = 49, min = (0x21 >> 4) | (0x40 >> 6) << 4 = 2 | 16 = 18
    check("q4_k_high_pairs_hand", y[128] == 49 * 1 - 18, "got %r" % y[128])
    # Q6_K: d = 1, scales 1..16, ql 0, qh 0 -> q = -32 times the scale of each 16
    blk = bytes(128) + bytes(64) + bytes(range(1, 17)) + half(1.0)
    y = dequant("Q6_K", blk)
    check("q6_k_hand", y[0] == -32 and y[16] == -64 and y[32] == -32 * 3 and y[128] == -32 * 9 and y[255] == -32 * 16,
          "got %r" % y[[0, 16, 32, 128, 255]])
    # Q2_K: d = 1, dmin = 1, scale byte 0x21 (scale 1, min 2), quants byte 0b11100100 -> shifts 0,2,4,6 give 0,1,2,3
    blk = bytes([0x21] * 16) + bytes([0xE4] * 64) + half(1.0) + half(1.0)
    y = dequant("Q2_K", blk)
    check("q2_k_hand", y[0] == -2 and y[32] == -1 and y[64] == 0 and y[96] == 1, "got %r" % y[[0, 32, 64, 96]])
    # Q3_K: d = 1, every 6-bit scale 33 (scale 1), quants 3, hmask bit set only in pass 0
    blk = bytes([0x01] * 32) + bytes([0xFF] * 64) + bytes([0x11] * 8 + [0xAA] * 4) + half(1.0)
    y = dequant("Q3_K", blk)
    check("q3_k_hand", y[0] == 3 and y[32] == -1 and y[128] == -1, "got %r" % y[[0, 32, 128]])
    # Q5_K: the fifth bit of group j is bit j of qh[l]
    blk = half(1.0) + half(0.0) + bytes([1] * 4 + [0] * 4 + [0] * 4) + bytes([0x02] * 32) + bytes(128)
    y = dequant("Q5_K", blk)
    check("q5_k_hand", y[0] == 0 and y[32] == 16 and y[64] == 0, "got %r" % y[[0, 32, 64]])
    # IQ4_NL: d = 0.5, nibbles 0 low and 15 high -> 0.5 * -127, 0.5 * 113
    y = dequant("IQ4_NL", half(0.5) + bytes([0xF0] * 16))
    check("iq4_nl_hand", y[0] == -63.5 and y[16] == 56.5, "got %r %r" % (y[0], y[16]))
    # IQ4_XS: d = 1; group 0 scale 33 (low nibble 1, high bits 2: 1 | 32), group 1 scale 32 + 0 -> 0,
    # group 3 scale (2 | 0b11 << 4) = 50 -> 18; nibbles 8 (level 1) low and 9 (13) high
    blk = half(1.0) + struct.pack("<H", 0b11000010) + bytes([0x01, 0x20, 0, 0]) + bytes([0x98] * 128)
    y = dequant("IQ4_XS", blk)
    check("iq4_xs_hand", y[0] == 1 and y[16] == 13 and y[32] == -32 and y[96] == 18 and y[112] == 18 * 13,
          "got %r" % y[[0, 16, 32, 96, 112]])
    # IQ2_XXS: d = 1; group 0: point indices 0 (all magnitudes 8), sign index 1 for the first 8 weights
    # (weight 0 negative, and weight 7 for the parity), scale 3 -> (1 * 3.5) * 0.25 = 0.875
    blk = half(1.0) + bytes(4) + struct.pack("<I", 1 | 3 << 28) + bytes(56)
    y = dequant("IQ2_XXS", blk)
    check("iq2_xxs_hand", y[0] == -7 and y[1] == 7 and y[7] == -7 and y[8] == 7 and y[32] == 8 * 0.125,
          "got %r" % y[[0, 1, 7, 8, 32]])
    # IQ3_S: d = 0.5; group 1 scale nibble 2 -> 0.5 * 5; sign byte 0x80 on its first 8 weights; point 0
    # of group 0 with high bit set: index 256
    blk = half(0.5) + bytes(64) + bytes([1] + [0] * 7) + bytes([0] * 4 + [0x80] + [0] * 27) + bytes([0x20, 0, 0, 0])
    y = dequant("IQ3_S", blk)
    g256 = iq_grid("iq3_s")[256]
    check("iq3_s_hand", y[0] == 0.5 * g256[0] and y[32 + 7] == -2.5 and y[32] == 2.5 and y[64] == 0.5,
          "got %r" % y[[0, 39, 32, 64]])
    # IQ1_S: d = 0.5, every grid index 0 (levels all -1), u16 words 0 except word 1 = 0xF000 (scale 7,
    # shift -1/8): weights 32..63 are 7.5 * -1.125, the others 0.5 * -0.875
    blk = half(0.5) + bytes(32) + struct.pack("<8H", 0, 0xF000, 0, 0, 0, 0, 0, 0)
    y = dequant("IQ1_S", blk)
    check("iq1_s_hand", y[0] == -0.4375 and y[32] == -8.4375 and y[64] == -0.4375 and y.sum() == -368,
          "got %r %r %r sum %r" % (y[0], y[32], y[64], y.sum()))
    # IQ1_M: d = 1 (f16 0x3C00: nibbles 0, 0, 0xC, 0x3 in the words' tops), qh[0] = 0x80 (group 1 shift
    # -1/8), scale 1 for weights 0..15 (x 3), group 2 at grid index 1 (weight 16 level +1, 17..23 -1)
    qs = bytearray(32)
    qs[2] = 1
    qh = bytearray(16)
    qh[0] = 0x80
    blk = bytes(qs) + bytes(qh) + struct.pack("<4H", 0x0001, 0x0000, 0xC000, 0x3000)
    y = dequant("IQ1_M", blk)
    check("iq1_m_hand", y[0] == 3 * -0.875 and y[8] == 3 * -1.125 and y[16] == 1.125 and y[17] == -0.875
          and y.sum() == -256, "got %r sum %r" % (y[[0, 8, 16, 17]], y.sum()))
    # the writer: a file's tensors start at multiples of the alignment
    raw = gguf_bytes([("general.alignment", U32, 64)], [("a", "F32", [3], bytes(12)), ("b", "F32", [1], bytes(4))], 64)
    check("writer_alignment", len(raw) % 64 == 4 + 0 and raw[:4] == b"GGUF", "length %d" % len(raw))
    print("%d passed, %d failed" % (total - fails, fails))
    return fails == 0


def main(argv):
    if argv[:1] == ["--selftest"]:
        return 0 if selftest() else 1
    seed = 1
    if "--seed" in argv:
        i = argv.index("--seed")
        seed = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    cmd = argv[0]
    if cmd == "write-types":
        kvs, tensors = types_file_parts(seed)
        open(argv[1], "wb").write(gguf_bytes(kvs, tensors, alignment=64))
    elif cmd == "expect-info":
        kvs, tensors = types_file_parts(seed)
        print("\n".join(expect_info(kvs, tensors, 64)))
    elif cmd == "check":
        return 0 if check_dump(argv[1], argv[2], seed) else 1
    elif cmd == "write-split":
        write_split(argv[1], argv[2], int(argv[3]))
    elif cmd == "fuzz-seed-kimi-linear":
        # the fuzzer's input: a u64 count of the data bytes after the header, then the header
        head, data_bytes = kimi_linear_header()
        open(argv[1], "wb").write(struct.pack("<Q", data_bytes) + head)
    elif cmd == "write-corrupt":
        print("\n".join(write_corrupt(argv[1])))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
