"""quant_np.py - the project's numpy reference of the GGUF quantizers (fp32 weights -> blocks) that
`k3 pack --trunk/--experts` writes: Q8_0 Q4_0 Q5_0 MXFP4 Q4_K Q5_K Q6_K, each the reference (no importance
matrix) algorithm of llama.cpp's llama-quantize as docs/MODEL.md "Quantizing" describes it.

Written from that description, vectorised over blocks; every value is a float32 numpy array and every
sum runs left to right (a Python loop over the elements: numpy's own sums are pairwise and would round
differently). The roundings are spelled out: round-half-even for the K-quants' nearest integer, half
away from zero for Q8_0, truncation for Q4_0 / Q5_0 / MXFP4's exponent; fp16 through numpy's float16
(round to nearest even). Decoding is gguf_np.dequant's.

  quant_np.py rows OUT.f32              the test rows (random, and the edge cases) as float32
  quant_np.py quantize TYPE IN.f32 OUT  IN's floats -> TYPE's blocks
  quant_np.py rms TYPE IN.f32 DEQ.f32   the relative rms error of a round trip, checked against the
                                        type's bound (prints PASS/FAIL)
  quant_np.py check-pack SRC PACK LABEL TRUNK EXPERTS
                                        a `k3 pack --trunk TRUNK --experts EXPERTS` of SRC ("-": as
                                        stored): which tensors are blocks, their bytes equal to this
                                        reference's, their sizes by the bytes-per-weight table, the
                                        rest byte-equal to SRC (prints PASS/FAIL)
  quant_np.py dequant-ckpt SRC PACK OUT the checkpoint SRC with every tensor PACK holds in blocks
                                        replaced by its decoded weights as F32 (gguf_np.dequant)
Run with Debian's /usr/bin/python3 (numpy 1.24).
"""
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
import gguf_np  # noqa: E402

F32 = np.float32
ROW = 512                       # weights per test row: two 256-blocks, sixteen 32-blocks
BLOCK = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q5_0": (32, 22), "MXFP4": (32, 17),
         "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}


# ---------------------------------------------------------------- roundings

def rint(v):
    """Nearest integer, ties to even (the K-quants' rounding), meant for |v| < 2^22. Outside that the
    rounding (add 1.5 * 2^23, keep the low 23 bits, subtract 2^22) gives 0 for a NaN and -2^22 for an
    infinity, which the blocks of rows beyond fp16's range meet; a finite v beyond 2^22 is refused."""
    v = np.asarray(v, F32)
    fin = np.isfinite(v)
    if np.any(fin & (np.abs(v) > 4194303)):
        raise ValueError("nearest integer asked of %r, beyond 2^22" % v[fin & (np.abs(v) > 4194303)][0])
    return np.where(fin, np.rint(np.where(fin, v, F32(0))), np.where(np.isnan(v), 0, -4194304)).astype(np.int64)


def roundf(v):
    """C's roundf: half away from zero (computed in float64, where |v| + 0.5 is exact)."""
    a = np.abs(np.asarray(v, F32)).astype(np.float64)
    return np.copysign(np.floor(a + 0.5), v)


def trunc_byte(v):
    """A C cast of a float to an 8-bit integer as an x86-64 build performs it: truncate toward zero
    to 32 bits, keep the low byte (0..255); a NaN, an infinity or a value beyond 32 bits gives 0."""
    v = np.asarray(v, F32).astype(np.float64)
    ok = np.isfinite(v) & (np.abs(v) < 2.0 ** 31)
    return np.where(ok, np.trunc(np.where(ok, v, 0)).astype(np.int64) & 0xFF, 0)


def signed8(byte):
    """A byte 0..255 read as a signed 8-bit number."""
    return ((np.asarray(byte, np.int64) ^ 0x80) - 0x80)


def f16_bits(v):
    """float32 -> fp16 bits (round to nearest even), as uint16."""
    with np.errstate(over="ignore"):
        return np.asarray(v, F32).astype(np.float16).view(np.uint16)


def f16_value(bits):
    return np.asarray(bits, np.uint16).view(np.float16).astype(F32)


def put_u16(out, col, bits):
    out[:, col] = bits & 0xFF
    out[:, col + 1] = bits >> 8


def safe_recip(d):
    """1 / d where d != 0, else 0 (float32; an overflow gives inf, as in C)."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)


def signed_extreme(x):
    """Per row: the value of largest magnitude (the first on a tie), +0.0 for a row of zeros."""
    a = np.abs(x)
    idx = np.argmax(a, axis=1)
    v = x[np.arange(len(x)), idx]
    return np.where(a.max(axis=1) > 0, v, F32(0)).astype(F32)


# ---------------------------------------------------------------- 32-weight types

def q8_0(x):
    """d = amax / 127; q = roundf(x * (1 / d)) with d at fp32; d stored fp16."""
    d = (np.abs(x).max(axis=1) / F32(127)).astype(F32)
    inv = safe_recip(d)
    out = np.zeros((len(x), 34), np.uint8)
    put_u16(out, 0, f16_bits(d))
    with np.errstate(over="ignore", invalid="ignore"):
        out[:, 2:] = trunc_byte(roundf(x * inv[:, None]))
    return out


def _q4_q5_levels(x, levels):
    """Q4_0 (levels 16) and Q5_0 (32): d = signed extreme / -(levels/2);
    q = min(levels - 1, int8(trunc(x * (1/d) + levels/2 + 0.5))); q as a byte."""
    half = levels // 2
    d = (signed_extreme(x) / F32(-half)).astype(F32)
    inv = safe_recip(d)
    with np.errstate(over="ignore", invalid="ignore"):
        q = signed8(trunc_byte(x * inv[:, None] + F32(half + 0.5)))
    q = np.minimum(levels - 1, q) & 0xFF
    return d, q


def q4_0(x):
    d, q = _q4_q5_levels(x, 16)
    out = np.zeros((len(x), 18), np.uint8)
    put_u16(out, 0, f16_bits(d))
    out[:, 2:] = (q[:, :16] | (q[:, 16:] << 4)) & 0xFF
    return out


def q5_0(x):
    d, q = _q4_q5_levels(x, 32)
    out = np.zeros((len(x), 22), np.uint8)
    put_u16(out, 0, f16_bits(d))
    high = np.zeros(len(x), np.int64)
    for j in range(32):
        high |= ((q[:, j] >> 4) & 1) << j
    for k in range(4):
        out[:, 2 + k] = (high >> (8 * k)) & 0xFF
    out[:, 6:] = ((q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)) & 0xFF
    return out


MXFP4_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], F32)


def mxfp4(x):
    """e = floor(log2(amax)) - 2 + 127 with log2 rounded to float32 (0 for a zero block), as a
    truncated byte; scale 2^(e - 128); each weight the first level nearest in value."""
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        lg = np.log2(amax.astype(np.float64)).astype(F32)
    e = np.where(amax > 0, trunc_byte(np.floor(np.where(amax > 0, lg, F32(0))) - F32(2) + F32(127)), 0)
    scale = np.ldexp(F32(1), (e - 128).astype(np.int32)).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(MXFP4_DOUBLED[None, None, :] * scale[:, None, None] - x[:, :, None])
    q = np.argmin(err, axis=2).astype(np.int64)
    out = np.zeros((len(x), 17), np.uint8)
    out[:, 0] = e
    out[:, 1:] = q[:, :16] | (q[:, 16:] << 4)
    return out


# ---------------------------------------------------------------- K-quants

def fit_scale_min(x, w, nmax, rmin, rdelta, nstep):
    """Groups x (G, n) with error weights w: levels L in 0..nmax, x ~ scale * L - the_min (the_min
    >= 0). First: [min(x, 0), max x] mapped onto 0..nmax; then for nstep + 1 stretched level counts
    (nmax + rmin + rdelta * k) the least-squares scale and offset of that rounding (offset above 0:
    clamped to 0, scale refit), kept when its weighted squared error is lower. A kept offset becomes
    the low end of the range the later steps map (max - offset), not min(x, 0). A group with
    max == min(x, 0) is all level 0."""
    G, n = x.shape
    mn = np.minimum(x.min(axis=1), F32(0))
    mx = x.max(axis=1)
    flat = mx == mn
    span = np.where(flat, F32(1), mx - mn).astype(F32)
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    iscale = (F32(nmax) / span).astype(F32)
    scale = (F32(1) / iscale).astype(F32)
    L = np.clip(rint(iscale[:, None] * (x - mn[:, None])), 0, nmax)
    best = np.zeros(G, F32)
    for i in range(n):
        diff = scale * L[:, i].astype(F32) + mn - x[:, i]
        best = best + w[:, i] * (diff * diff)
    low = mn.copy()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for k in range(nstep + 1):
            span = np.where(flat, F32(1), mx - low).astype(F32)
            isc = ((F32(rmin) + F32(rdelta) * F32(k) + F32(nmax)) / span).astype(F32)
            T = np.clip(rint(isc[:, None] * (x - low[:, None])), 0, nmax)
            Tf = T.astype(F32)
            sl = np.zeros(G, F32)
            sl2 = np.zeros(G, F32)
            sxl = np.zeros(G, F32)
            for i in range(n):
                sl = sl + w[:, i] * Tf[:, i]
                sl2 = sl2 + w[:, i] * Tf[:, i] * Tf[:, i]
                sxl = sxl + w[:, i] * Tf[:, i] * x[:, i]
            D = sum_w * sl2 - sl * sl
            s = (sum_w * sxl - sum_x * sl) / D
            m = (sl2 * sum_x - sl * sxl) / D
            clamp = m > 0
            m = np.where(clamp, F32(0), m).astype(F32)
            s = np.where(clamp, sxl / sl2, s).astype(F32)
            cur = np.zeros(G, F32)
            for i in range(n):
                diff = s * Tf[:, i] + m - x[:, i]
                cur = cur + w[:, i] * (diff * diff)
            take = (D > 0) & (cur < best) & ~flat
            L = np.where(take[:, None], T, L)
            best = np.where(take, cur, best)
            scale = np.where(take, s, scale)
            low = np.where(take, m, low).astype(F32)
    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, F32(0), scale).astype(F32)
    return scale, (-low).astype(F32), L


def _scale_bytes(ls, lm):
    """Eight 6-bit scales and mins per block -> the 12 bytes: pairs 0..3 low 6 bits of bytes j and
    j + 4; pairs 4..7 nibbles of byte j + 4, top two bits in the top of bytes j - 4 (scale), j (min)."""
    out = np.zeros((len(ls), 12), np.int64)
    out[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    out[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    return out


def _k_quant(x, nmax, rmin, rdelta, nstep):
    """Q4_K / Q5_K common part for blocks x (B, 256): returns d bits, dmin bits, 12 scale bytes,
    levels (B, 256)."""
    B = len(x)
    g = x.reshape(B * 8, 32)
    sx2 = np.zeros(B * 8, F32)
    for i in range(32):
        sx2 = sx2 + g[:, i] * g[:, i]
    av = np.sqrt(sx2 / F32(32)).astype(F32)
    w = (av[:, None] + np.abs(g)).astype(F32)
    scale, mins, L = fit_scale_min(g, w, nmax, rmin, rdelta, nstep)
    scale, mins, L = scale.reshape(B, 8), mins.reshape(B, 8), L.reshape(B, 256)
    max_scale = np.fmax(np.fmax.reduce(scale, axis=1), F32(0))     # a NaN never is the largest
    max_min = np.fmax(np.fmax.reduce(mins, axis=1), F32(0))
    with np.errstate(divide="ignore"):
        inv_s = np.where(max_scale > 0, F32(63) / np.where(max_scale > 0, max_scale, F32(1)), F32(0)).astype(F32)
        inv_m = np.where(max_min > 0, F32(63) / np.where(max_min > 0, max_min, F32(1)), F32(0)).astype(F32)
    ls = np.minimum(rint(inv_s[:, None] * scale) & 0xFF, 63)
    lm = np.minimum(rint(inv_m[:, None] * mins) & 0xFF, 63)
    d_bits, dmin_bits = f16_bits(max_scale / F32(63)), f16_bits(max_min / F32(63))
    d = f16_value(d_bits)[:, None] * ls.astype(F32)            # (B, 8)
    dm = f16_value(dmin_bits)[:, None] * lm.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = (x.reshape(B, 8, 32) + dm[:, :, None]) / np.where(d != 0, d, F32(1))[:, :, None]
        again = np.clip(rint(np.where(d[:, :, None] != 0, v, F32(0))), 0, nmax).reshape(B, 256)
    keep = np.repeat(d == 0, 32, axis=1)
    L = np.where(keep, L, again)
    return d_bits, dmin_bits, _scale_bytes(ls, lm), L


def q4_k(x):
    d, dmin, sc, L = _k_quant(x, 15, -1.0, 0.1, 20)
    out = np.zeros((len(x), 144), np.uint8)
    put_u16(out, 0, d)
    put_u16(out, 2, dmin)
    out[:, 4:16] = sc
    for r in range(4):                       # each 64 weights: 32 bytes, low nibbles then high
        out[:, 16 + 32 * r:48 + 32 * r] = L[:, 64 * r:64 * r + 32] | (L[:, 64 * r + 32:64 * r + 64] << 4)
    return out


def q5_k(x):
    d, dmin, sc, L = _k_quant(x, 31, -0.5, 0.1, 15)
    out = np.zeros((len(x), 176), np.uint8)
    put_u16(out, 0, d)
    put_u16(out, 2, dmin)
    out[:, 4:16] = sc
    qh = np.zeros((len(x), 32), np.int64)
    for r in range(4):
        lo, hi = L[:, 64 * r:64 * r + 32], L[:, 64 * r + 32:64 * r + 64]
        qh |= ((lo >> 4) & 1) << (2 * r)
        qh |= ((hi >> 4) & 1) << (2 * r + 1)
        out[:, 48 + 32 * r:80 + 32 * r] = (lo & 15) | ((hi & 15) << 4)
    out[:, 16:48] = qh
    return out


def fit_scale_signed(x, nmax):
    """Groups x (G, n): signed levels -nmax..nmax-1 under one scale, errors weighted by x^2. Start
    with the signed extreme at -nmax and take the least-squares scale; then try level counts
    nmax + 0.1k (k = -9..9, not 0) and keep one whose sumlx^2 / suml2 is larger. Groups whose
    largest magnitude is below 1e-15 are scale 0, levels 0 (stored 0, not nmax)."""
    G, n = x.shape
    mx = signed_extreme(x)
    zero = np.abs(x).max(axis=1) < F32(1e-15)
    den = np.where(zero, F32(1), mx).astype(F32)
    w = x * x

    def sums(iscale):
        lv = np.clip(rint(iscale[:, None] * x), -nmax, nmax - 1)
        lf = lv.astype(F32)
        slx = np.zeros(G, F32)
        sl2 = np.zeros(G, F32)
        for i in range(n):
            slx = slx + w[:, i] * x[:, i] * lf[:, i]
            sl2 = sl2 + w[:, i] * lf[:, i] * lf[:, i]
        return lv, slx, sl2

    L, slx, sl2 = sums((F32(-nmax) / den).astype(F32))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(sl2 != 0, slx / np.where(sl2 != 0, sl2, F32(1)), F32(0)).astype(F32)
    best = scale * slx
    for k in list(range(-9, 0)) + list(range(1, 10)):
        lv, slx, sl2 = sums((-(F32(nmax) + F32(0.1) * F32(k)) / den).astype(F32))
        better = (sl2 > 0) & (slx * slx > best * sl2) & ~zero
        with np.errstate(divide="ignore", invalid="ignore"):
            s = slx / sl2
        L = np.where(better[:, None], lv, L)
        scale = np.where(better, s, scale).astype(F32)
        best = np.where(better, scale * slx, best).astype(F32)
    L = np.where(zero[:, None], -nmax, L) + nmax
    scale = np.where(zero, F32(0), scale).astype(F32)
    return scale, L


def q6_k(x):
    B = len(x)
    scale, L = fit_scale_signed(x.reshape(B * 16, 16), 32)
    scale, L = scale.reshape(B, 16), L.reshape(B, 256)
    mag = np.where(np.isnan(scale), F32(-1), np.abs(scale))    # a NaN scale (rows beyond fp32's
    idx = np.argmax(mag, axis=1)                                 # square) never is the largest
    max_abs = np.maximum(mag.max(axis=1), F32(0))
    max_scale = scale[np.arange(B), idx]
    zero = max_abs < F32(1e-15)
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = (F32(-128) / np.where(zero, F32(1), max_scale)).astype(F32)
        d_bits = np.where(zero, 0, f16_bits(F32(1) / iscale)).astype(np.uint16)
    sc = np.minimum(rint(iscale[:, None] * scale), 127)
    if np.any(sc < -128):
        raise ValueError("a Q6_K group scale below -128")
    d = f16_value(d_bits)[:, None] * sc.astype(F32)              # (B, 16)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = x.reshape(B, 16, 16) / np.where(d != 0, d, F32(1))[:, :, None]
        again = np.clip(rint(np.where(d[:, :, None] != 0, v, F32(0))), -32, 31).reshape(B, 256) + 32
    L = np.where(np.repeat(d == 0, 16, axis=1), L, again)
    out = np.zeros((B, 210), np.uint8)
    for h in range(2):                       # weight 128h + 32k + l
        q = [L[:, 128 * h + 32 * k:128 * h + 32 * k + 32] for k in range(4)]
        out[:, 64 * h:64 * h + 32] = (q[0] & 15) | ((q[2] & 15) << 4)
        out[:, 64 * h + 32:64 * h + 64] = (q[1] & 15) | ((q[3] & 15) << 4)
        out[:, 128 + 32 * h:160 + 32 * h] = (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6)
    out[:, 192:208] = sc & 0xFF
    out[:, 208] = d_bits & 0xFF
    out[:, 209] = d_bits >> 8
    out[zero] = 0
    return out


QUANTIZERS = {"Q8_0": q8_0, "Q4_0": q4_0, "Q5_0": q5_0, "MXFP4": mxfp4, "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k}


def quantize(tname, x):
    qk, _ = BLOCK[tname]
    x = np.asarray(x, F32).reshape(-1, qk)
    return QUANTIZERS[tname](x).astype(np.uint8).tobytes()


# ---------------------------------------------------------------- the test rows

def test_rows():
    """float32 rows of ROW weights: random ones of several shapes, then the edge cases by name."""
    rng = np.random.default_rng(27)
    rows = [rng.standard_normal(ROW) * s for s in (1.0, 0.02, 3e-3, 40.0)]
    rows += [rng.laplace(size=ROW) * 0.05, rng.uniform(-1, 1, ROW), rng.uniform(0, 1, ROW),
             -rng.uniform(0, 1, ROW)]
    bf = (rng.standard_normal((8, ROW)) * 0.03).astype(F32)          # bf16-rounded, as checkpoints are
    rows += list((bf.view(np.uint32) & 0xFFFF0000).view(F32))
    rows += list(rng.standard_normal((8, ROW)) * rng.uniform(0.001, 5, (8, 1)))
    edge = {}
    edge["zero"] = np.zeros(ROW)
    r = rng.standard_normal(ROW); r[77] = 1e4; edge["one_huge"] = r
    r = rng.standard_normal(ROW); r[300] = -50.0; edge["negative_max"] = r
    r = rng.standard_normal(ROW) * 1e-3; r[5] = 1e30; edge["one_enormous"] = r
    edge["subnormal"] = rng.standard_normal(ROW) * 1e-41
    edge["tiny"] = rng.standard_normal(ROW) * 1e-38
    edge["fp16_edge"] = rng.standard_normal(ROW) * 65504.0 * 40
    edge["fp16_over"] = np.where(np.arange(ROW) % 32 == 3, 65504.0 * 130, rng.standard_normal(ROW))
    edge["constant_pos"] = np.full(ROW, 0.25)
    edge["constant_neg"] = np.full(ROW, -0.75)
    r = rng.integers(-127, 128, ROW) + 0.5; r[::32] = 127; edge["ties_half"] = r
    r = rng.integers(-8, 8, ROW).astype(np.float64); r[::32] = -8; edge["small_ints"] = r
    k = rng.integers(-20, 20, ROW // 32)
    r = rng.uniform(-1, 1, ROW) * np.repeat(2.0 ** k, 32)
    r[::32] = np.repeat(np.nextafter(F32(2.0) ** k.astype(F32), F32(0)), 1)
    edge["pow2_below"] = r
    r = rng.uniform(-1, 1, ROW); r[::32] = 2.0 ** rng.integers(-20, 20, ROW // 32); edge["pow2_exact"] = r
    r = rng.standard_normal(ROW); r[256:] = 0; edge["half_zero"] = r
    r = rng.standard_normal(ROW); r[:16] = 0; r[40:72] = 0; edge["zero_groups"] = r
    r = np.abs(rng.standard_normal(ROW)) + 3.0; edge["all_positive_offset"] = r
    r = np.zeros(ROW); r[::7] = -1.0; edge["sparse_neg"] = r
    r = np.where(rng.uniform(size=ROW) < 0.5, 1.0, -1.0); edge["plus_minus_one"] = r
    r = rng.standard_normal(ROW); r[::32] *= -1; r[1::32] = -np.abs(r[::32]); edge["tie_sign"] = r
    names = ["random_%d" % i for i in range(len(rows))] + list(edge)
    rows += list(edge.values())
    return names, np.array(rows, np.float64).astype(F32)


# Relative rms error bounds of a round trip on the random rows (worst measured: Q8_0 0.0066, Q6_K
# 0.021, Q5_K 0.043, Q5_0 0.052, Q4_K 0.082, Q4_0 0.103, MXFP4 0.155; the bounds keep a margin).
RMS_BOUND = {"Q8_0": 0.008, "Q6_K": 0.025, "Q5_K": 0.05, "Q5_0": 0.06, "Q4_K": 0.1, "Q4_0": 0.12, "MXFP4": 0.2}


# ---------------------------------------------------------------- packed directories

def read_pack(pack):
    """A packed directory's tensors from manifest.json and tables.bin (layout: engine/formats/manifest.h):
    {name: (file name, offset, bytes, dtype name, shape)}."""
    import json
    import struct
    man = json.load(open(pack + "/manifest.json"))
    dtypes = man["tables"]["dtypes"]
    raw = open(pack + "/tables.bin", "rb").read()
    n_t, n_l, n_p = struct.unpack_from("<III", raw, 16)
    names_at = 64 + 88 * n_t + 16 * n_l + 16 * n_p
    names = raw[names_at:].split(b"\0")
    files = ["trunk.bin", "experts.bin", "embed.bin", "head.bin"]
    out = {}
    for i in range(n_t):
        r = 64 + 88 * i
        off, nbytes = struct.unpack_from("<QQ", raw, r)
        shape = list(struct.unpack_from("<8q", raw, r + 16))[:raw[r + 81]]
        out[names[i].decode()] = (files[raw[r + 82]], off, nbytes, dtypes[raw[r + 80]], shape)
    return man, out


def read_source(src):
    """Every tensor of a safetensors checkpoint: {name: (path, data offset, bytes, dtype, shape)}."""
    import glob
    import json
    import struct
    out = {}
    for path in sorted(glob.glob(src + "/*.safetensors")):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
        for k, v in hdr.items():
            if k != "__metadata__":
                out[k] = (path, 8 + n + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0], v["dtype"], v["shape"])
    return out


def read_bytes(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


def source_f32(entry):
    import safetensors_np
    path, off, n, dtype, shape = entry
    return safetensors_np.decode(read_bytes(path, off, n), dtype, shape).astype(F32)


def mxfp4_pair_f32(source, name):
    """K3's MXFP4 expert matrix name ("X.weight") from the source's X.weight_packed + X.weight_scale, as
    float32 (exact), or None when the source has no such pair."""
    import k3_ref
    base = name[:-len(".weight")]
    p, s = source.get(base + ".weight_packed"), source.get(base + ".weight_scale")
    if not name.endswith(".weight") or p is None or s is None:
        return None
    packed = np.frombuffer(read_bytes(p[0], p[1], p[2]), np.uint8).reshape(p[4])
    scale = np.frombuffer(read_bytes(s[0], s[1], s[2]), np.uint8).reshape(s[4])
    return k3_ref.mxfp4_decode(packed, scale).astype(F32)


def fit_rows(asked, cols):
    """The type rows of cols weights are written in when asked: asked, or llama-quantize's fallback
    for rows that are not whole blocks (Q4_K, Q5_K -> Q5_0, Q6_K -> Q8_0), or None."""
    if cols % BLOCK[asked][0] == 0:
        return asked
    fb = {"Q4_K": "Q5_0", "Q5_K": "Q5_0", "Q6_K": "Q8_0"}.get(asked)
    return fb if fb and cols % 32 == 0 else None


def wants_blocks(name, dtype, shape, asked):
    """The tensors `k3 pack` writes in blocks (docs/ARCHITECTURE.md, "The packed layout"): 2-D float
    "*.weight" matrices of more than one row, not a norm, not the router "*.gate.weight", not a
    "*_res_proj.weight"; the type asked, or for rows not whole blocks Q5_0 (Q4_K, Q5_K) / Q8_0 (Q6_K);
    None when not, or when the rows are not a multiple of 32 either."""
    last = name.split(".")[-2] if name.endswith(".weight") else None
    if (asked is None or last is None or len(shape) != 2 or shape[0] < 2 or dtype not in ("F32", "F16", "BF16")
            or "norm" in last or "_res_proj" in last or last == "gate"):
        return None
    return fit_rows(asked, shape[1])


def check_pack(src, pack, label, trunk, experts):
    trunk, experts = (None if t == "-" else t for t in (trunk, experts))
    man, packed = read_pack(pack)
    source = read_source(src)
    wrong_choice, wrong_bytes, wrong_size, wrong_copy, n_blocks, bytes_blocks = [], [], [], [], 0, 0
    for name, (fname, off, nbytes, dtype, shape) in packed.items():
        core = name[len("language_model."):] if name.startswith("language_model.") else name
        kind = "experts" if fname == "experts.bin" else "trunk" if fname == "trunk.bin" else None
        got = dtype if dtype in BLOCK else None
        pair = None
        if name not in source:                      # K3's MXFP4 expert pair, quantized as one matrix
            pair = mxfp4_pair_f32(source, name) if kind == "experts" and experts else None
            want = fit_rows(experts, pair.shape[1]) if pair is not None else "no such tensor in the source"
            s = None
        else:
            s = source[name]
            want = wants_blocks(core, s[3], s[4], {"trunk": trunk, "experts": experts}.get(kind))
            if name.endswith(".weight_packed") and kind == "experts" and experts and \
                    fit_rows(experts, 2 * s[4][1]) and name[:-7] + "_scale" in source:
                want = "quantized as %s" % name[:-7]   # an MXFP4 pair the pack should have converted
        if name.endswith(".weight_scale") and name[:-6] in packed:
            want = "merged into %s" % name[:-6]        # the scale of a converted MXFP4 pair must be gone
        if want != got:
            wrong_choice.append("%s: %s, expected %s" % (name, got, want))
            continue
        data = read_bytes(pack + "/" + fname, off, nbytes)
        if got:
            n_blocks += 1
            bytes_blocks += nbytes
            qk, bb = BLOCK[got]
            if nbytes != shape[0] * shape[1] // qk * bb:
                wrong_size.append(name)
            elif data != quantize(got, pair if pair is not None else source_f32(s)):
                wrong_bytes.append(name)
        elif data != read_bytes(s[0], s[1], s[2]):
            wrong_copy.append(name)
    ok_version = man["version"] == (3 if n_blocks else 2)
    checks = [("pack_quant_choice_%s" % label, not wrong_choice, wrong_choice[:1],
               "%d of %d tensors in blocks, as the rule says" % (n_blocks, len(packed))),
              ("pack_quant_bytes_%s" % label, not wrong_bytes and not wrong_size and n_blocks > 0,
               (wrong_bytes + wrong_size)[:1] or ["no tensor in blocks"],
               "%d tensors, %d bytes equal to the numpy reference, sizes by the bytes-per-weight table" % (n_blocks, bytes_blocks)),
              ("pack_quant_copied_%s" % label, not wrong_copy and ok_version,
               wrong_copy[:1] or ["manifest version %s" % man["version"]],
               "the other tensors byte-equal to the source, manifest version %d" % man["version"])]
    for name, ok, why, what in checks:
        print("PASS %s (%s)" % (name, what) if ok else "FAIL %s: %s" % (name, why[0] if why else "?"))


def dequant_ckpt(src, pack, out):
    """SRC's config and tokenizer files, and its tensors as one safetensors file, those PACK holds in
    blocks decoded to F32 (the rest as stored, skipped vision tensors included)."""
    import os
    import shutil
    _, packed = read_pack(pack)
    source = read_source(src)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors") and not f.endswith(".index.json") and os.path.isfile(src + "/" + f):
            shutil.copy(src + "/" + f, out + "/" + f)
    tensors = {}
    for name, s in source.items():
        p = packed.get(name)
        if p and p[3] in BLOCK:
            raw = read_bytes(pack + "/" + p[0], p[1], p[2])
            tensors[name] = ("F32", s[4], gguf_np.dequant(p[3], raw).astype("<f4").tobytes())
        elif name.endswith((".weight_packed", ".weight_scale")) and name[:name.rindex(".")] + ".weight" in packed:
            continue                                   # K3's MXFP4 pair, quantized into X.weight (below)
        else:
            tensors[name] = (s[3], s[4], read_bytes(s[0], s[1], s[2]))
    for name, p in packed.items():
        if name not in source and p[3] in BLOCK:
            raw = read_bytes(pack + "/" + p[0], p[1], p[2])
            tensors[name] = ("F32", p[4], gguf_np.dequant(p[3], raw).astype("<f4").tobytes())
    import json
    import struct
    hdr, off = {}, 0
    for name, (dtype, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hj = json.dumps(hdr, separators=(",", ":")).encode()
    hj += b" " * (-(8 + len(hj)) % 8)
    with open(out + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for _, _, raw in tensors.values():
            f.write(raw)


def main(argv):
    if len(argv) == 3 and argv[1] == "rows":
        names, rows = test_rows()
        rows.astype("<f4").tofile(argv[2])
        with open(argv[2] + ".names", "w") as f:
            f.write("\n".join(names) + "\n")
        return 0
    if len(argv) == 5 and argv[1] == "quantize":
        x = np.fromfile(argv[3], "<f4")
        with open(argv[4], "wb") as f:
            f.write(quantize(argv[2], x))
        return 0
    if len(argv) == 5 and argv[1] == "rms":
        tname = argv[2]
        x = np.fromfile(argv[3], "<f4").reshape(-1, ROW)
        got = np.fromfile(argv[4], "<f4").reshape(-1, ROW)
        names, _ = test_rows()
        want = gguf_np.dequant(tname, quantize(tname, x)).reshape(-1, ROW)
        rnd = [i for i, n in enumerate(names) if n.startswith("random_")]
        worst = max(float(np.sqrt(np.mean((got[i] - x[i]) ** 2)) / np.sqrt(np.mean(x[i] ** 2))) for i in rnd)
        same = np.array_equal(want.view(np.uint32), got.view(np.uint32))
        name = "quant_round_trip_%s" % tname
        if not same:
            print("FAIL %s: k3's decode of its blocks differs from gguf_np.dequant of the reference's" % name)
        elif worst > RMS_BOUND[tname]:
            print("FAIL %s: relative rms error %.4f above %.4f" % (name, worst, RMS_BOUND[tname]))
        else:
            print("PASS %s (worst relative rms error %.4f <= %.4f over %d random rows)" % (name, worst, RMS_BOUND[tname], len(rnd)))
        return 0
    if len(argv) == 7 and argv[1] == "check-pack":
        check_pack(*argv[2:7])
        return 0
    if len(argv) == 5 and argv[1] == "dequant-ckpt":
        dequant_ckpt(*argv[2:5])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
