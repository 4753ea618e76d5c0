"""safetensors_np.py - a small, dependency-free (numpy only) safetensors reader/writer.

Format (https://github.com/huggingface/safetensors): 8-byte little-endian unsigned header length N,
then N bytes of JSON (an object: tensor name -> {"dtype", "shape", "data_offsets": [begin, end]},
plus an optional "__metadata__" string->string map), then the data area. data_offsets are relative
to the start of the data area (= 8 + N). All tensor data is little-endian, row-major.

Used by the numpy reference (kimi_ref.py) and the checkpoint generator (gen_ckpt.py). Written from
the format description only; it shares no code with the C engine.
"""
import json
import struct

import numpy as np

# bytes per element
DTYPE_SIZE = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}

_PLAIN = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "u1",
}


def _e4m3_table():
    """OCP FP8 E4M3 'FN': 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no inf, S.1111.111 = NaN."""
    t = np.zeros(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 15
        m = b & 7
        if e == 15 and m == 7:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * (m / 8.0) * 2.0 ** -6
        else:
            t[b] = s * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return t


def _e5m2_table():
    """FP8 E5M2 (IEEE-like: bias 15, inf/NaN at exponent 31)."""
    t = np.zeros(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 2) & 31
        m = b & 3
        if e == 31:
            t[b] = s * np.inf if m == 0 else np.nan
        elif e == 0:
            t[b] = s * (m / 4.0) * 2.0 ** -14
        else:
            t[b] = s * (1.0 + m / 4.0) * 2.0 ** (e - 15)
    return t


E4M3_TABLE = _e4m3_table()
E5M2_TABLE = _e5m2_table()


def bf16_bits_to_f32(u16):
    """bf16 -> f32: the bf16 bits are the top 16 bits of the f32."""
    return (np.asarray(u16, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """f32 -> bf16 bits, round to nearest even (NaN kept as a quiet NaN)."""
    b = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    r = ((b + np.uint32(0x7FFF) + ((b >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    r = np.where(nan, np.uint16(0x7FC0), r)
    return r


def f_to_e4m3_bits(x):
    """float -> E4M3 bits, round to nearest (ties to even code), saturating at +-448."""
    x = np.asarray(x, dtype=np.float64)
    pos = E4M3_TABLE[:127]                  # codes 0..126 are the finite non-negative values, increasing
    a = np.minimum(np.abs(x), 448.0)
    i = np.searchsorted(pos, a)             # pos[i-1] < a <= pos[i]
    i = np.clip(i, 1, 126)
    lo, hi = pos[i - 1], pos[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(pick_hi, i, i - 1).astype(np.uint8)
    code = np.where(a == 0, 0, code).astype(np.uint8)
    return (code | np.where(x < 0, 0x80, 0).astype(np.uint8)).astype(np.uint8)


def decode(raw, dtype, shape):
    """raw bytes (bytes/memoryview/np.uint8 array) -> numpy array (float64 for float types)."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    if dtype == "BF16":
        a = bf16_bits_to_f32(buf.view("<u2")).astype(np.float64)
    elif dtype == "F8_E4M3":
        a = E4M3_TABLE[buf]
    elif dtype == "F8_E5M2":
        a = E5M2_TABLE[buf]
    elif dtype in _PLAIN:
        a = buf.view(_PLAIN[dtype])
        if dtype.startswith("F"):
            a = a.astype(np.float64)
        else:
            a = a.astype(np.int64)
    else:
        raise ValueError("unsupported safetensors dtype %r" % dtype)
    return a.reshape(shape)


class SafetensorsFile:
    """Lazy reader: parses the header, reads each tensor on demand."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ValueError("%s: file shorter than 8 bytes" % path)
            (n,) = struct.unpack("<Q", head)
            f.seek(0, 2)
            size = f.tell()
            if 8 + n > size:
                raise ValueError("%s: header length %d exceeds file size %d" % (path, n, size))
            f.seek(8)
            hdr = json.loads(f.read(n).decode("utf-8"))
        if not isinstance(hdr, dict):
            raise ValueError("%s: header is not a JSON object" % path)
        self.data_start = 8 + n
        self.metadata = hdr.pop("__metadata__", None)
        self.entries = hdr
        for name, e in hdr.items():
            dt, shape, (b, en) = e["dtype"], e["shape"], e["data_offsets"]
            if dt not in DTYPE_SIZE:
                raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
            nel = int(np.prod(shape)) if len(shape) else 1
            if en - b != nel * DTYPE_SIZE[dt] or b < 0 or self.data_start + en > size:
                raise ValueError("%s: tensor %s has bad data_offsets %r for %s%r"
                                 % (path, name, [b, en], dt, shape))
        self._mm = np.memmap(path, dtype=np.uint8, mode="r")

    def keys(self):
        return list(self.entries.keys())

    def info(self, name):
        return self.entries[name]

    def get(self, name):
        e = self.entries[name]
        b, en = e["data_offsets"]
        raw = self._mm[self.data_start + b: self.data_start + en]
        return decode(np.array(raw), e["dtype"], tuple(e["shape"]))


def encode(arr, dtype):
    """numpy array -> raw little-endian bytes in the given safetensors dtype."""
    a = np.asarray(arr)
    if dtype == "BF16":
        return f32_to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes()
    if dtype == "F8_E4M3":
        return f_to_e4m3_bits(a).tobytes()
    if dtype in _PLAIN:
        return np.ascontiguousarray(a.astype(_PLAIN[dtype])).tobytes()
    raise ValueError("cannot encode dtype %r" % dtype)


def write(path, tensors, data_order=None, header_order=None, metadata=None, align=8):
    """Write a safetensors file.

    tensors: dict name -> (numpy array, dtype string).
    data_order: order of tensors in the data area (default: dict order).
    header_order: order of keys in the JSON header (default: data_order). JSON objects are unordered,
        so a reader must not rely on header order matching data order.
    Returns the number of tensor data bytes written.
    """
    names = list(data_order) if data_order is not None else list(tensors.keys())
    blobs, entries, off = [], {}, 0
    for n in names:
        a, dt = tensors[n]
        raw = encode(a, dt)
        entries[n] = {"dtype": dt, "shape": [int(s) for s in np.shape(a)],
                      "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hdr = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for n in (list(header_order) if header_order is not None else names):
        hdr[n] = entries[n]
    hj = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    if align > 1 and (8 + len(hj)) % align:
        hj += b" " * (align - (8 + len(hj)) % align)   # pad with spaces, as the Rust library does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for raw in blobs:
            f.write(raw)
    return off
