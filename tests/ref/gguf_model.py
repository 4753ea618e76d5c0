#!/usr/bin/python3
"""gguf_model.py - the numpy reference's reader of a Kimi Linear GGUF (architecture kimi-linear).

Reads the file's header, metadata and tensor table, dequantizes every tensor to float64 with
gguf_np.dequant (the project's decoders, written from the format), maps the GGUF names back to the
Hugging Face names kimi_ref.py reads and undoes llama.cpp's converter's transforms, as docs/MODEL.md
("Kimi Linear in a GGUF") states them:
  * blk.L.ssm_a holds -exp(A_log): A_log = log(-ssm_a), so kimi_ref's exp(A_log) gives the stored
    decay factor back (to ~1e-16);
  * the KDA convolutions [W, 1, C, 1] (ggml order) are HF's [C, 1, W];
  * attn_k_b [nope, kv_lora, H] and attn_v_b [kv_lora, v, H] are kv_b_proj split per head, k_b's
    block transposed: kv_b_proj row h*(nope+v) + i is k_b[h][:, i] for i < nope, else v_b[h][i-nope];
  * ffn_{gate,up,down}_exps [cols, rows, E] are the experts' w1, w3, w2 stacked; expert e is slab e;
  * ssm_dt.bias is dt_bias, exp_probs_b.bias is gate.e_score_correction_bias.
The config comes from the metadata (head_count_kv per layer: 0 = KDA, else MLA). The forward pass is
kimi_ref.py's, unchanged (its numerics choices stay: the GGUF carries only weights).

    gguf_model.py FILE.gguf --ids "1 2 3" --out logits.f32 [--greedy N]     (as kimi_ref.py)
    gguf_model.py types FILE.gguf              one line per ggml type: how many tensors, which
    gguf_model.py same-weights FILE.gguf HF_DIR  PASS/FAIL: every tensor mapped back equals the
                                               checkpoint's (ssm_a: -exp(A_log) rounded to f32)
    gguf_model.py same-logits FILE.gguf HF_DIR "IDS"   PASS/FAIL: the reference's logits over both agree
                                               to 1e-12 of max-logit once A is taken as stored
    gguf_model.py close-weights FILE.gguf HF_DIR MAXREL  PASS/FAIL: each tensor within MAXREL (RMS) of
                                               the source's: a quantized file holds that model
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_np  # noqa: E402
import kimi_ref  # noqa: E402

ARCH = "kimi-linear"
ALL_TYPES = {**gguf_np.TYPES, **gguf_np.DECODE_ONLY_TYPES}
TYPE_NAME = {v[0]: k for k, v in ALL_TYPES.items()}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    """Header, metadata and tensor table of one GGUF file; tensors read on demand."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self.buf[:4] != b"GGUF":
            raise ValueError("%s: not a GGUF file (magic %r)" % (path, self.buf[:4]))
        self.pos = 4
        version, n_tensors, n_kv = self._get("<I"), self._get("<Q"), self._get("<Q")
        if version not in (2, 3):
            raise ValueError("%s: GGUF version %d" % (path, version))
        self.kv = {}
        for _ in range(n_kv):
            key = self._str()
            self.kv[key] = self._value(self._get("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._str()
            dims = [self._get("<Q") for _ in range(self._get("<I"))]
            tid, off = self._get("<I"), self._get("<Q")
            if tid not in TYPE_NAME:
                raise ValueError("%s: tensor %s has ggml type %d, which gguf_np does not decode" % (path, name, tid))
            self.tensors[name] = (TYPE_NAME[tid], dims, off)
        align = self.kv.get("general.alignment", 32)
        self.data = self.pos + (-self.pos % align)

    def _get(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def _str(self):
        n = self._get("<Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def _value(self, t):
        if t == 8:
            return self._str()
        if t == 9:
            et, n = self._get("<I"), self._get("<Q")
            return [self._value(et) for _ in range(n)]
        return self._get(SCALAR[t])

    def get(self, name):
        """float64 array in numpy order (ggml dims reversed)."""
        tname, dims, off = self.tensors[name]
        _, qk, nbytes = ALL_TYPES[tname]
        n = int(np.prod(dims))
        raw = self.buf[self.data + off: self.data + off + n // qk * nbytes]
        return gguf_np.dequant(tname, raw).astype(np.float64).reshape(list(reversed(dims)))


def config_of(r):
    """The kimi_linear config.json fields kimi_ref.Config reads, from the GGUF metadata."""
    kv = r.kv
    if kv.get("general.architecture") != ARCH:
        raise ValueError("%s: architecture %r, expected %r" % (r.path, kv.get("general.architecture"), ARCH))
    a = lambda k: kv[ARCH + "." + k]  # noqa: E731
    n_layers = a("block_count")
    heads_kv = a("attention.head_count_kv")
    if not isinstance(heads_kv, list) or len(heads_kv) != n_layers:
        raise ValueError("%s: attention.head_count_kv is not one entry per layer" % r.path)
    if kv.get(ARCH + ".expert_gating_func", 2) != 2:
        raise ValueError("%s: expert_gating_func %r, Kimi Linear's router is sigmoid (2)" % (r.path, a("expert_gating_func")))
    rope = a("rope.dimension_count")
    vocab = kv.get(ARCH + ".vocab_size", len(kv.get("tokenizer.ggml.tokens", [])))
    return {
        "model_type": "kimi_linear", "hidden_size": a("embedding_length"), "num_hidden_layers": n_layers,
        "vocab_size": vocab, "rms_norm_eps": a("attention.layer_norm_rms_epsilon"),
        "tie_word_embeddings": "output.weight" not in r.tensors,
        "num_attention_heads": a("attention.head_count"), "kv_lora_rank": a("attention.kv_lora_rank"),
        "qk_nope_head_dim": a("attention.key_length_mla") - rope, "qk_rope_head_dim": rope,
        "v_head_dim": a("attention.value_length_mla"),
        "linear_attn_config": {
            "kda_layers": [L + 1 for L in range(n_layers) if heads_kv[L] == 0],
            "full_attn_layers": [L + 1 for L in range(n_layers) if heads_kv[L] != 0],
            "num_heads": a("attention.head_count"), "head_dim": a("kda.head_dim"),
            "short_conv_kernel_size": a("ssm.conv_kernel")},
        "intermediate_size": a("feed_forward_length"), "moe_intermediate_size": a("expert_feed_forward_length"),
        "num_experts": a("expert_count"), "num_experts_per_token": a("expert_used_count"),
        "num_shared_experts": kv.get(ARCH + ".expert_shared_count", 0),
        "first_k_dense_replace": kv.get(ARCH + ".leading_dense_block_count", 0),
        "routed_scaling_factor": kv.get(ARCH + ".expert_weights_scale", 1.0),
        "moe_renormalize": True,          # the family's rule; llama.cpp's graph always renormalises
    }


# GGUF suffix after "blk.L." -> HF suffix after "model.layers.L." (KDA and MLA share attn_q/attn_output)
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "ssm_f_a.weight": "self_attn.f_a_proj.weight", "ssm_f_b.weight": "self_attn.f_b_proj.weight",
    "ssm_beta.weight": "self_attn.b_proj.weight", "ssm_g_a.weight": "self_attn.g_a_proj.weight",
    "ssm_g_b.weight": "self_attn.g_b_proj.weight", "ssm_norm.weight": "self_attn.o_norm.weight",
    "ssm_dt.bias": "self_attn.dt_bias",
    "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "block_sparse_moe.gate.weight",
    "exp_probs_b.bias": "block_sparse_moe.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "block_sparse_moe.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "block_sparse_moe.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "block_sparse_moe.shared_experts.down_proj.weight",
}
TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
EXPERTS = {"ffn_gate_exps.weight": "w1", "ffn_down_exps.weight": "w2", "ffn_up_exps.weight": "w3"}


def hf_tensors(r, cfg):
    """{HF name: float64 array}: every GGUF tensor mapped back, the transforms undone."""
    out = {}
    nope, vdim = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    for name in r.tensors:
        if name in TOP_NAMES:
            out[TOP_NAMES[name]] = r.get(name)
            continue
        parts = name.split(".", 2)
        if parts[0] != "blk" or len(parts) != 3:
            raise ValueError("%s: unexpected tensor %s" % (r.path, name))
        L, rest = int(parts[1]), parts[2]
        p = "model.layers.%d." % L
        if rest in LAYER_NAMES:
            out[p + LAYER_NAMES[rest]] = r.get(name)
        elif rest in ("ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"):
            w = r.get(name)
            out[p + "self_attn.%s_conv1d.weight" % rest[11]] = w.reshape(w.shape[-3], 1, w.shape[-1])
        elif rest == "ssm_a":
            a = r.get(name)
            out[p + "self_attn.A_log"] = np.log(-a).reshape(1, 1, -1, 1)
        elif rest == "attn_k_b.weight":
            kb = r.get(name)                                    # [H, kv_lora, nope]
            vb = r.get("blk.%d.attn_v_b.weight" % L)            # [H, v, kv_lora]
            if kb.shape[2] != nope or vb.shape[1] != vdim:
                raise ValueError("%s: attn_k_b/attn_v_b shapes %r/%r do not match nope %d / v %d"
                                 % (r.path, kb.shape, vb.shape, nope, vdim))
            kv = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1)   # [H, nope+v, kv_lora]
            out[p + "self_attn.kv_b_proj.weight"] = kv.reshape(-1, kv.shape[-1])
        elif rest == "attn_v_b.weight":
            continue
        elif rest in EXPERTS:
            st = r.get(name)                                    # [E, rows, cols]
            for e in range(st.shape[0]):
                out[p + "block_sparse_moe.experts.%d.%s.weight" % (e, EXPERTS[rest])] = st[e]
        else:
            raise ValueError("%s: tensor %s has no Hugging Face name" % (r.path, name))
    return out


def load(path):
    """kimi_ref.Model over a GGUF file."""
    r = Reader(path)
    cfg = config_of(r)
    return kimi_ref.Model(kimi_ref.DictCheckpoint(cfg, hf_tensors(r, cfg)))


def types_of(path):
    r = Reader(path)
    counts = {}
    for tname, _, _ in r.tensors.values():
        counts[tname] = counts.get(tname, 0) + 1
    return counts


def same_weights(path, hf_dir):
    """PASS/FAIL lines: the GGUF mapped back against the checkpoint it was converted from."""
    r = Reader(path)
    mine = hf_tensors(r, config_of(r))
    ck = kimi_ref.Checkpoint(hf_dir)
    ok = True
    names = sorted(ck.where)
    if sorted(mine) != names:
        print("FAIL %s: tensor names differ: only in GGUF %s, only in checkpoint %s"
              % (os.path.basename(path), sorted(set(mine) - set(names))[:3], sorted(set(names) - set(mine))[:3]))
        return False
    worst = 0.0
    for n in names:
        want = ck.get(n)
        if n.endswith("A_log"):
            stored = -np.exp(want.astype(np.float32))       # what the converter writes (f32)
            got = -np.exp(mine[n])
            if not np.array_equal(got.reshape(-1), stored.astype(np.float64).reshape(-1)):
                rel = np.max(np.abs(got.reshape(-1) / stored.reshape(-1) - 1))
                if rel > 1e-15:
                    print("FAIL %s: %s: exp(A_log) off by %.3g relative" % (os.path.basename(path), n, rel))
                    ok = False
            worst = max(worst, float(np.max(np.abs(mine[n].reshape(-1) - want.reshape(-1)))))
        elif not np.array_equal(mine[n].reshape(want.shape), want):
            print("FAIL %s: %s differs from the checkpoint (max %.3g)"
                  % (os.path.basename(path), n, np.max(np.abs(mine[n].reshape(want.shape) - want))))
            ok = False
    if ok:
        print("PASS %s: all %d tensors mapped back equal the checkpoint's (A_log: within %.2g, f32 rounding of -exp)"
              % (os.path.basename(path), len(names), worst))
    return ok


def same_logits(path, hf_dir, ids, tol=1e-12):
    """PASS/FAIL: the reference over the GGUF against the reference over the checkpoint, both in float64.
    What the file cannot hold exactly is A (stored as -exp(A_log) in f32) and the float metadata
    (rms_norm_eps and routed_scaling_factor are f32 keys), so the checkpoint's A_log is first replaced by
    the log of the stored value and its two floats rounded to f32; the logits must then agree to tol.
    The difference from the checkpoint taken as it is is printed too."""
    r = Reader(path)
    gm = load(path)
    ck = kimi_ref.Checkpoint(hf_dir)
    raw = kimi_ref.Model(ck).forward(ids)
    t = {n: ck.get(n) for n in ck.where}
    for n in t:
        if n.endswith("A_log"):
            t[n] = np.log(np.exp(t[n].astype(np.float32)).astype(np.float64))
    cfg = dict(ck.config.raw)
    for k in ("rms_norm_eps", "routed_scaling_factor"):
        cfg[k] = float(np.float32(cfg[k]))
    matched = kimi_ref.Model(kimi_ref.DictCheckpoint(cfg, t)).forward(ids)
    mine = gm.forward(ids)
    rel = lambda a, b: float(np.max(np.abs(a - b)) / np.max(np.abs(b)))  # noqa: E731
    d, d_raw = rel(mine, matched), rel(mine, raw)
    ok = d <= tol
    print("%s %s: reference over the GGUF vs over the checkpoint: %.2e of max-logit with A and the float "
          "keys as stored (limit %g); %.2e with the checkpoint's own%s" % ("PASS" if ok else "FAIL", os.path.basename(path),
                                                                d, tol, d_raw, "" if ok else " (too far)"))
    del r
    return ok


def close_weights(path, hf_dir, max_rel):
    """PASS/FAIL: every tensor mapped back is the checkpoint's within max_rel (RMS of the difference over
    RMS of the weights, per tensor): a quantized file holds the model it was made from, name by name."""
    r = Reader(path)
    mine = hf_tensors(r, config_of(r))
    ck = kimi_ref.Checkpoint(hf_dir)
    worst, wname = 0.0, ""
    for n in sorted(ck.where):
        if n not in mine:
            print("FAIL %s: no tensor for %s" % (os.path.basename(path), n))
            return False
        want = ck.get(n)
        got = mine[n].reshape(want.shape)
        if n.endswith("A_log"):
            got, want = np.exp(got), np.exp(want)
        e = float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))
        if e > worst:
            worst, wname = e, n
    ok = worst <= max_rel
    print("%s %s: every tensor within %.3g RMS of the source checkpoint's (worst %.3g, %s)"
          % ("PASS" if ok else "FAIL", os.path.basename(path), max_rel, worst, wname))
    return ok


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "types":
        print(" ".join("%s:%d" % kv for kv in sorted(types_of(argv[1]).items())))
        return 0
    if argv and argv[0] == "same-weights":
        return 0 if same_weights(argv[1], argv[2]) else 1
    if argv and argv[0] == "same-logits":
        return 0 if same_logits(argv[1], argv[2], [int(x) for x in argv[3].split()]) else 1
    if argv and argv[0] == "close-weights":
        return 0 if close_weights(argv[1], argv[2], float(argv[3])) else 1
    if argv and argv[0] == "config":
        print(json.dumps(config_of(Reader(argv[1])), indent=1))
        return 0
    ap = argparse.ArgumentParser(description="numpy reference forward pass over a Kimi Linear GGUF")
    ap.add_argument("gguf")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--out")
    ap.add_argument("--greedy", type=int, default=0)
    a = ap.parse_args(argv)
    ids = [int(t) for t in a.ids.replace(",", " ").split()]
    try:
        model = load(a.gguf)
        logits, gen = kimi_ref.greedy(model, ids, a.greedy)
    except (ValueError, KeyError, OSError) as e:
        print("gguf_model: %s" % e, file=sys.stderr)
        return 1
    if a.out:
        logits.astype("<f4").tofile(a.out)
    if a.greedy:
        print(" ".join(str(t) for t in gen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
