#!/usr/bin/python3
"""k3_ref.py - the Kimi K3 part of the independent numpy (float64) reference.

Written from docs/MODEL.md, "Kimi K3" (read as differences from "Kimi Linear"), without
looking at the C engine. kimi_ref.py dispatches here when config.json has model_type "kimi_k3"; the CLI
is kimi_ref.py's. What is K3-specific (spec section in brackets):
  * config: wrapper "kimi_k3", decoder in text_config (model_type kimi_linear), every docs/MODEL.md, "Config" field required
  * tensors prefixed "language_model."; "vision_tower." / "mm_projector." ignored (docs/MODEL.md, "MXFP4 experts")
  * Attention Residuals: blocks of attn_res_block_size, three softmax mixes, raw snapshots (docs/MODEL.md, "Attention Residuals")
  * KDA: lower-bounded sigmoid decay, A_log sliced per head, full-rank output gate g_proj (docs/MODEL.md, "KDA in K3")
  * MLA: q-LoRA with q_a_layernorm (eps 1e-6, like kv_a_layernorm), sigmoid gate before o_proj (docs/MODEL.md, "Gated MLA with q-LoRA")
  * Latent MoE: full-width router, down-projection, routed experts in the latent, RMSNorm of the
    weighted sum, up-projection; fused shared experts at full width added unweighted (docs/MODEL.md, "Latent MoE and SiTU")
  * SiTU-GLU in every FFN (docs/MODEL.md, "Latent MoE and SiTU")
  * MXFP4 routed experts (compressed-tensors mxfp4-pack-quantized), decoded exactly (docs/MODEL.md, "MXFP4 experts")
"""
import json
import math
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimi_ref as kr  # noqa: E402
from kimi_ref import sigmoid, silu, rmsnorm, l2norm  # noqa: E402

PREFIX = "language_model."
IGNORED_PREFIXES = ("vision_tower.", "mm_projector.")
MLA_Q_NORM_EPS = 1e-6      # docs/MODEL.md, "Gated MLA with q-LoRA": q_a_layernorm / kv_a_layernorm take KimiRMSNorm's default 1e-6
MLA_KV_NORM_EPS = 1e-6

# FP4 E2M1, index = nibble, bit 3 = sign (docs/MODEL.md, "MXFP4 experts")
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# elementwise pieces

def situ(g, u, beta, lbeta):
    """SiTU-GLU (docs/MODEL.md, "Latent MoE and SiTU"): [beta*tanh(g/beta) * sigmoid(g)] * [lbeta*tanh(u/lbeta)].
    The sigmoid takes the UNCAPPED gate. lbeta None disables the up-cap (HF linear_beta=None)."""
    g = np.asarray(g, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    up = u if lbeta is None else lbeta * np.tanh(u / lbeta)
    return beta * np.tanh(g / beta) * sigmoid(g) * up


def situ_mlp(c, x, wg, wu, wd):
    return situ(x @ wg.T, x @ wu.T, c.situ_beta, c.situ_lbeta) @ wd.T


def safe_gate(f, dt_bias, A_log_heads, lower_bound):
    """K3 KDA decay (docs/MODEL.md, "KDA in K3" step 4): g[h,i] = lb * sigmoid(exp(A_log[h]) * (f[h,i] + dt_bias[h,i])).
    f: [T,H,K], dt_bias: [H,K], A_log_heads: [H] (already sliced). Returns log-decays in (lb, 0)."""
    A = np.exp(np.asarray(A_log_heads, dtype=np.float64))
    return lower_bound * sigmoid(A[None, :, None] * (f + dt_bias[None]))


def attnres_mix(V, w, eps):
    """AttnRes mix (docs/MODEL.md, "Attention Residuals"): V [n, T, E] sources, w [E] folded score vector (norm.weight * proj.weight).
    keys = RMS-normalised sources, values = RAW sources, softmax over the n sources per token."""
    V = np.asarray(V, dtype=np.float64)
    keys = V / np.sqrt(np.mean(V * V, axis=-1, keepdims=True) + eps)
    s = keys @ w                                   # [n, T]
    s = s - s.max(axis=0, keepdims=True)
    a = np.exp(s)
    a /= a.sum(axis=0, keepdims=True)
    return np.einsum("nt,nte->te", a, V)


def mxfp4_decode(packed, scale, group=32):
    """compressed-tensors mxfp4-pack-quantized (docs/MODEL.md, "MXFP4 experts"). packed [rows, cols/2] bytes (LOW nibble =
    EVEN column), scale [rows, cols/group] E8M0 bytes (2^(byte-127)); groups run along the columns.
    A scale byte of 255 (NaN in OCP MX; the spec gives two different decodings and says it should not
    occur) is refused."""
    packed = np.asarray(packed).astype(np.int64)
    scale = np.asarray(scale).astype(np.int64)
    if packed.ndim != 2 or scale.ndim != 2:
        raise ValueError("mxfp4: weight_packed %r / weight_scale %r must be 2-D" % (packed.shape, scale.shape))
    rows, half = packed.shape
    cols = 2 * half
    if cols % group or scale.shape != (rows, cols // group):
        raise ValueError("mxfp4: weight_scale shape %r does not fit weight_packed %r with group %d"
                         % (scale.shape, packed.shape, group))
    if packed.min(initial=0) < 0 or packed.max(initial=0) > 255 or scale.min(initial=0) < 0 \
            or scale.max(initial=0) > 255:
        raise ValueError("mxfp4: bytes out of range")
    if (scale == 255).any():
        raise ValueError("mxfp4: E8M0 scale byte 255 (NaN) present; its decoding is not settled (docs/MODEL.md, 'MXFP4 experts')")
    nib = np.empty((rows, cols), dtype=np.int64)
    nib[:, 0::2] = packed & 0x0F
    nib[:, 1::2] = packed >> 4
    return E2M1[nib] * np.repeat(np.ldexp(1.0, scale - 127), group, axis=1)


# ---------------------------------------------------------------------------------------------
# configuration

TEXT_FIELDS = [
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "hidden_act", "activation_situ_beta", "activation_situ_linear_beta",
    "rms_norm_eps", "max_position_embeddings", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "mla_use_nope", "mla_use_output_gate", "num_experts",
    "num_experts_per_token", "num_shared_experts", "moe_intermediate_size", "routed_expert_hidden_size",
    "latent_moe_use_norm", "moe_router_activation_func", "moe_renormalize", "routed_scaling_factor",
    "topk_method", "use_grouped_topk", "num_expert_group", "topk_group", "first_k_dense_replace",
    "moe_layer_freq", "attn_res_block_size", "num_nextn_predict_layers", "tie_word_embeddings",
    "linear_attn_config",
]
LA_FIELDS = ["num_heads", "head_dim", "short_conv_kernel_size", "gate_lower_bound", "use_full_rank_gate",
             "full_attn_layers", "kda_layers"]


class K3Config:
    def __init__(self, top):
        self.raw = top
        if top.get("model_type") != "kimi_k3":
            raise ValueError("config.json: model_type is %r, expected 'kimi_k3'" % top.get("model_type"))
        d = top.get("text_config")
        if not isinstance(d, dict):
            raise ValueError("config.json: kimi_k3 without a text_config object")
        if d.get("model_type") != "kimi_linear":
            raise ValueError("config.json: text_config.model_type is %r, expected 'kimi_linear'"
                             % d.get("model_type"))
        self.text = d
        for k in TEXT_FIELDS:
            if k not in d:
                raise ValueError("config.json: text_config.%s is missing (docs/MODEL.md, 'Config')" % k)
        la = d["linear_attn_config"]
        if not isinstance(la, dict):
            raise ValueError("config.json: text_config.linear_attn_config is not an object")
        for k in LA_FIELDS:
            if k not in la:
                raise ValueError("config.json: text_config.linear_attn_config.%s is missing (docs/MODEL.md, 'Config')" % k)
        # special ids: the root or text_config ([COLI] reads either); not used by the forward pass
        for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
            v = top.get(k, d.get(k))
            if v is None:
                raise ValueError("config.json: %s is missing (neither at the top level nor in text_config)" % k)
            setattr(self, k[:-len("_token_id")] + "_id", int(v))
        if "quantization_config" in d:
            self.qc = d["quantization_config"]
            if "quantization_config" in top and top["quantization_config"] != self.qc:
                raise ValueError("config.json: top-level and text_config quantization_config differ")
        elif "quantization_config" in top:
            self.qc = top["quantization_config"]
        else:
            raise ValueError("config.json: quantization_config is missing (docs/MODEL.md, 'Config'; null = no quantisation)")
        self._parse_qc()

        self.D = int(d["hidden_size"])
        self.n_layers = int(d["num_hidden_layers"])
        self.vocab = int(d["vocab_size"])
        self.eps = float(d["rms_norm_eps"])
        self.tie = bool(d["tie_word_embeddings"])
        self.max_pos = int(d["max_position_embeddings"])
        self.kv_heads = int(d["num_key_value_heads"])          # unused by the MLA math (docs/MODEL.md, "Config")
        self.mtp = int(d["num_nextn_predict_layers"])          # MTP layers are not part of the forward
        if d["hidden_act"] != "situ":
            raise ValueError("config.json: hidden_act=%r, Kimi K3 uses 'situ'" % d["hidden_act"])
        self.situ_beta = float(d["activation_situ_beta"])
        lb = d["activation_situ_linear_beta"]
        self.situ_lbeta = None if lb is None else float(lb)
        # MLA
        self.mla_heads = int(d["num_attention_heads"])
        self.q_lora = None if d["q_lora_rank"] is None else int(d["q_lora_rank"])
        self.kv_lora = int(d["kv_lora_rank"])
        self.nope = int(d["qk_nope_head_dim"])
        self.rope = int(d["qk_rope_head_dim"])
        self.v_dim = int(d["v_head_dim"])
        if d["mla_use_nope"] is not True:
            raise ValueError("config.json: mla_use_nope=%r; K3 MLA is NoPE (docs/MODEL.md, 'Gated MLA with q-LoRA')" % d["mla_use_nope"])
        self.mla_gate = bool(d["mla_use_output_gate"])
        # KDA
        self.kda_layers = [int(i) for i in la["kda_layers"]]           # 1-based
        self.full_layers = [int(i) for i in la["full_attn_layers"]]    # 1-based
        self.kda_heads = int(la["num_heads"])
        self.kda_dim = int(la["head_dim"])
        self.conv_w = int(la["short_conv_kernel_size"])
        self.lower_bound = float(la["gate_lower_bound"])
        self.full_rank_gate = bool(la["use_full_rank_gate"])
        if not self.lower_bound < 0:
            raise ValueError("config.json: gate_lower_bound=%r must be negative" % self.lower_bound)
        # FFN / MoE
        self.inter = int(d["intermediate_size"])
        self.moe_inter = int(d["moe_intermediate_size"])
        self.latent = int(d["routed_expert_hidden_size"])
        self.latent_norm = bool(d["latent_moe_use_norm"])
        self.n_experts = int(d["num_experts"])
        self.topk = int(d["num_experts_per_token"])
        self.n_shared = int(d["num_shared_experts"])
        self.first_dense = int(d["first_k_dense_replace"])
        self.moe_freq = int(d["moe_layer_freq"])
        self.scale = float(d["routed_scaling_factor"])
        self.renorm = bool(d["moe_renormalize"])
        if d["moe_router_activation_func"] != "sigmoid":
            raise ValueError("config.json: moe_router_activation_func=%r, K3 uses sigmoid"
                             % d["moe_router_activation_func"])
        if d["topk_method"] != "noaux_tc":
            raise ValueError("config.json: topk_method=%r, K3 uses noaux_tc" % d["topk_method"])
        ng, tg = int(d["num_expert_group"] or 1), int(d["topk_group"] or 1)
        if d["use_grouped_topk"] and ng > 1 and ng > tg:      # docs/MODEL.md, "Latent MoE and SiTU": only then does grouping act
            raise ValueError("config.json: effective grouped top-k (%d groups, topk_group %d) not supported"
                             % (ng, tg))
        if self.n_experts < 1 or not (1 <= self.topk <= self.n_experts):
            raise ValueError("config.json: num_experts=%d num_experts_per_token=%d out of range"
                             % (self.n_experts, self.topk))
        self.block = int(d["attn_res_block_size"])
        if self.block < 1:
            raise ValueError("config.json: attn_res_block_size=%d" % self.block)
        if self.moe_freq < 1:
            raise ValueError("config.json: moe_layer_freq=%d" % self.moe_freq)
        self.layer_types = [self._layer_type(L) for L in range(self.n_layers)]

    def _layer_type(self, L):
        in_kda = (L + 1) in self.kda_layers        # 1-based lists (docs/MODEL.md, "Config")
        in_full = (L + 1) in self.full_layers
        if in_kda == in_full:
            raise ValueError("config.json: layer %d (1-based %d) is in %s of kda_layers/full_attn_layers"
                             % (L, L + 1, "both" if in_kda else "neither"))
        return "kda" if in_kda else "mla"

    def is_moe(self, L):
        return L >= self.first_dense and L % self.moe_freq == 0

    def _parse_qc(self):
        qc = self.qc
        self.q_ignore = []
        self.q_group = None
        if qc is None:
            return
        if qc.get("quant_method") != "compressed-tensors":
            raise ValueError("quantization_config.quant_method=%r, K3 uses compressed-tensors"
                             % qc.get("quant_method"))
        fmt = qc.get("format")
        groups = qc.get("config_groups") or {}
        schemes = [(g.get("weights"), g.get("format", fmt)) for g in groups.values()]
        if "weights" in qc:                              # flat form, as docs/MODEL.md, "MXFP4 experts" listing reads
            schemes.append((qc["weights"], fmt))
        schemes = [s for s in schemes if s[0] is not None]
        if not schemes:
            raise ValueError("quantization_config: no weight quantisation scheme")
        for w, f in schemes:
            if f != "mxfp4-pack-quantized":
                raise ValueError("quantization_config: format %r, expected mxfp4-pack-quantized" % f)
            want = {"num_bits": 4, "type": "float", "strategy": "group", "symmetric": True}
            for k, v in want.items():
                if w.get(k) != v:
                    raise ValueError("quantization_config: weights.%s=%r, expected %r" % (k, w.get(k), v))
            gs = int(w.get("group_size") or 0)
            if gs <= 0 or (self.q_group is not None and gs != self.q_group):
                raise ValueError("quantization_config: bad/inconsistent group_size %r" % w.get("group_size"))
            self.q_group = gs
        if qc.get("quantization_status", "compressed") != "compressed":
            raise ValueError("quantization_config: quantization_status=%r, expected compressed"
                             % qc.get("quantization_status"))
        for pat in qc.get("ignore") or []:
            self.q_ignore.append(re.compile(pat[3:]) if pat.startswith("re:") else pat)

    def is_ignored(self, module):
        """compressed-tensors ignore list: 're:' entries are re.match-ed, others compared exactly,
        against the full module name (with the language_model. prefix)."""
        for p in self.q_ignore:
            if (p.match(module) is not None) if hasattr(p, "match") else (p == module):
                return True
        return False


# ---------------------------------------------------------------------------------------------
# checkpoint

def expected_shape(c, name):
    """[out, in] shape a tensor must have (docs/MODEL.md, "KDA in K3"), or None when not checked here
    (conv weights, A_log and dt_bias are checked where they are used)."""
    D, V = c.D, c.vocab
    m = re.match(r"model\.layers\.(\d+)\.(.*)$", name)
    if m is None:
        return {"model.embed_tokens.weight": (V, D), "lm_head.weight": (V, D), "model.norm.weight": (D,),
                "model.output_attn_res_norm.weight": (D,), "model.output_attn_res_proj.weight": (1, D)}.get(name)
    L, n = int(m.group(1)), m.group(2)
    if n in ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attention_res_norm.weight",
             "mlp_res_norm.weight"):
        return (D,)
    if n in ("self_attention_res_proj.weight", "mlp_res_proj.weight"):
        return (1, D)
    if n.startswith("self_attn.") and L < c.n_layers:
        n = n[len("self_attn."):]
        if c.layer_types[L] == "kda":
            P, H, K = c.kda_heads * c.kda_dim, c.kda_heads, c.kda_dim
            return {"q_proj.weight": (P, D), "k_proj.weight": (P, D), "v_proj.weight": (P, D),
                    "b_proj.weight": (H, D), "g_proj.weight": (P, D), "o_norm.weight": (K,),
                    "o_proj.weight": (D, P)}.get(n)
        Hm, dn, dr, dv, r, qr = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora, c.q_lora
        return {"q_a_proj.weight": (qr, D), "q_a_layernorm.weight": (qr,), "q_b_proj.weight": (Hm * (dn + dr), qr),
                "q_proj.weight": (Hm * (dn + dr), D), "kv_a_proj_with_mqa.weight": (r + dr, D),
                "kv_a_layernorm.weight": (r,), "kv_b_proj.weight": (Hm * (dn + dv), r),
                "o_proj.weight": (D, Hm * dv), "g_proj.weight": (Hm * dv, D)}.get(n)
    if n.startswith("mlp."):
        DI = c.inter
        return {"mlp.gate_proj.weight": (DI, D), "mlp.up_proj.weight": (DI, D), "mlp.down_proj.weight": (D, DI)}.get(n)
    if n.startswith("block_sparse_moe."):
        n = n[len("block_sparse_moe."):]
        E, Lt, I, SI = c.n_experts, c.latent, c.moe_inter, c.moe_inter * c.n_shared
        me = re.match(r"experts\.(\d+)\.(w[123])\.weight$", n)
        if me:
            if int(me.group(1)) >= E:
                raise ValueError("expert id %s >= num_experts %d" % (me.group(1), E))
            return (Lt, I) if me.group(2) == "w2" else (I, Lt)
        return {"gate.weight": (E, D), "gate.e_score_correction_bias": (E,),
                "routed_expert_down_proj.weight": (Lt, D), "routed_expert_up_proj.weight": (D, Lt),
                "routed_expert_norm.weight": (Lt,), "shared_experts.gate_proj.weight": (SI, D),
                "shared_experts.up_proj.weight": (SI, D), "shared_experts.down_proj.weight": (D, SI)}.get(n)
    return None


def check_shape(c, name, a):
    want = expected_shape(c, name)
    if want is not None and a.shape != want:
        raise ValueError("%s%s has shape %r, expected %r" % (PREFIX, name, a.shape, want))
    return a

class K3Checkpoint:
    """K3 checkpoint directory: names are exposed WITHOUT the language_model. prefix; an MXFP4 module
    X (X.weight_packed + X.weight_scale) is exposed as X.weight, decoded to float64."""

    def __init__(self, model_dir, top=None):
        self.dir = model_dir
        if top is None:
            with open(os.path.join(model_dir, "config.json")) as f:
                top = json.load(f)
        self.config = K3Config(top)
        self.where = {}
        self.n_ignored = 0
        for name, sf in kr.scan_shards(model_dir).items():
            if name.startswith(PREFIX):
                self.where[name[len(PREFIX):]] = sf
            elif name.startswith(IGNORED_PREFIXES):
                self.n_ignored += 1
            else:
                raise ValueError("tensor %s: a K3 checkpoint holds only language_model.*, vision_tower.* and "
                                 "mm_projector.* tensors" % name)
        self.cache = {}

    def _raw(self, name):
        return self.where[name].get(PREFIX + name)

    def dtype(self, name):
        return self.where[name].info(PREFIX + name)["dtype"]

    def has(self, name):
        return name in self.where or (name.endswith(".weight") and name[:-6] + "weight_packed" in self.where)

    def get(self, name):
        if name in self.cache:
            return self.cache[name]
        c = self.config
        packed_name = name[:-6] + "weight_packed" if name.endswith(".weight") else None
        quant = packed_name is not None and packed_name in self.where
        if quant:
            module = PREFIX + name[:-len(".weight")]
            if name in self.where:
                raise ValueError("%s is stored both plain and as weight_packed" % module)
            if c.qc is None:
                raise ValueError("%s is stored quantised but config.json has no quantization_config" % module)
            if c.is_ignored(module):
                raise ValueError("%s is in quantization_config.ignore but stored quantised" % module)
            sname = name[:-6] + "weight_scale"
            if sname not in self.where:
                raise ValueError("%s.weight_packed has no weight_scale" % module)
            for n in (packed_name, sname):
                if self.dtype(n) != "U8":
                    raise ValueError("%s%s: dtype %s, expected U8" % (PREFIX, n, self.dtype(n)))
            a = mxfp4_decode(self._raw(packed_name), self._raw(sname), c.q_group)
            shp = name[:-6] + "weight_shape"
            if shp in self.where and tuple(int(v) for v in self._raw(shp).ravel()) != a.shape:
                raise ValueError("%s.weight_shape %r does not match the decoded %r" % (module, self._raw(shp), a.shape))
        elif name in self.where:
            a = self._raw(name)
            if self.dtype(name) not in ("F32", "BF16", "F16", "F64"):
                raise ValueError("%s%s: unexpected dtype %s" % (PREFIX, name, self.dtype(name)))
        else:
            raise KeyError("checkpoint has no tensor %s%s" % (PREFIX, name))
        self.cache[name] = check_shape(c, name, a)
        return a


class K3DictCheckpoint:
    """Same interface over an in-memory dict of unprefixed float64 tensors (self-tests)."""

    def __init__(self, top, tensors):
        self.config = K3Config(top)
        self.t = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}

    def has(self, name):
        return name in self.t

    def get(self, name):
        if name not in self.t:
            raise KeyError("no tensor %s" % name)
        return check_shape(self.config, name, self.t[name])


# ---------------------------------------------------------------------------------------------
# layers (x is [T, E]; state is a per-layer dict)

def expect_shape(name, a, shape):
    if a.shape != tuple(shape):
        raise ValueError("%s has shape %r, expected %r" % (name, a.shape, tuple(shape)))


def a_log_heads(ck, p, H):
    """A_log stored as [128] (or any N >= H) floats; heads are entries 0..H-1 (docs/MODEL.md, "KDA in K3")."""
    a = ck.get(p + "A_log").reshape(-1)
    if a.size < H:
        raise ValueError("%sA_log has %d elements, fewer than the %d heads" % (p, a.size, H))
    return a[:H]


def kda_layer(ck, L, x, state):
    """K3 KDA (docs/MODEL.md, "KDA in K3"). state: {'conv': [3, W-1, P] raw projections (oldest first), 'S': [H, K, V]}."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    H, K = c.kda_heads, c.kda_dim
    P, W, T = H * K, c.conv_w, x.shape[0]
    if "S" not in state:
        state["conv"] = np.zeros((3, W - 1, P))
        state["S"] = np.zeros((H, K, K))
    acts = []
    for i, n in enumerate("qkv"):
        proj = x @ ck.get(p + n + "_proj.weight").T                 # raw projection [T, P]
        w = ck.get(p + n + "_conv1d.weight")
        if w.shape not in ((P, 1, W), (P, W)):
            raise ValueError("%s_conv1d.weight has shape %r, expected [%d,1,%d]" % (p + n, w.shape, P, W))
        w = w.reshape(P, W)                                         # tap W-1 multiplies the current token
        xp = np.concatenate([state["conv"][i], proj], axis=0)       # [W-1+T, P]
        y = np.zeros((T, P))
        for j in range(W):
            y += w[:, j] * xp[j:j + T]
        acts.append(silu(y))
        state["conv"][i] = xp[T:]
    q, k, v = (a.reshape(T, H, K) for a in acts)
    q = l2norm(q) * K ** -0.5
    k = l2norm(k)
    f = (x @ ck.get(p + "f_a_proj.weight").T) @ ck.get(p + "f_b_proj.weight").T
    dt = ck.get(p + "dt_bias")
    if dt.size != P:
        raise ValueError("%sdt_bias: %d elements, expected %d" % (p, dt.size, P))
    g = safe_gate(f.reshape(T, H, K), dt.reshape(H, K), a_log_heads(ck, p, H), c.lower_bound)
    beta = sigmoid(x @ ck.get(p + "b_proj.weight").T)               # [T, H]
    o, state["S"] = kr.kda_recurrent(q, k, v, g, beta, state["S"])
    if c.full_rank_gate:
        gt = x @ ck.get(p + "g_proj.weight").T                      # full-rank output gate [T, P]
    else:
        gt = (x @ ck.get(p + "g_a_proj.weight").T) @ ck.get(p + "g_b_proj.weight").T
    z = rmsnorm(o, ck.get(p + "o_norm.weight"), c.eps) * sigmoid(gt.reshape(T, H, K))   # norm, then gate
    return z.reshape(T, P) @ ck.get(p + "o_proj.weight").T


def mla_q(ck, p, x):
    c = ck.config
    if c.q_lora is None:
        return x @ ck.get(p + "q_proj.weight").T
    cq = rmsnorm(x @ ck.get(p + "q_a_proj.weight").T, ck.get(p + "q_a_layernorm.weight"), MLA_Q_NORM_EPS)
    return cq @ ck.get(p + "q_b_proj.weight").T


def mla_layer(ck, L, x, state):
    """K3 gated MLA (docs/MODEL.md, "Gated MLA with q-LoRA"), naive decompressed form, NoPE, causal.
    state: {'c': [N, kv_lora] normalised latents, 'kpe': [N, rope]} of past tokens."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    Hm, dn, dr, dv, r = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora
    T = x.shape[0]
    q = mla_q(ck, p, x).reshape(T, Hm, dn + dr)
    ckv = x @ ck.get(p + "kv_a_proj_with_mqa.weight").T
    lat = rmsnorm(ckv[:, :r], ck.get(p + "kv_a_layernorm.weight"), MLA_KV_NORM_EPS)
    kpe = ckv[:, r:]
    n0 = state["c"].shape[0] if "c" in state else 0
    state["c"] = lat if n0 == 0 else np.concatenate([state["c"], lat])
    state["kpe"] = kpe if n0 == 0 else np.concatenate([state["kpe"], kpe])
    N = n0 + T
    kvb = (state["c"] @ ck.get(p + "kv_b_proj.weight").T).reshape(N, Hm, dn + dv)
    k_nope, val = kvb[:, :, :dn], kvb[:, :, dn:]
    sc = (np.einsum("thd,shd->hts", q[:, :, :dn], k_nope) +
          np.einsum("thd,sd->hts", q[:, :, dn:], state["kpe"])) * (dn + dr) ** -0.5
    mask = np.arange(N)[None, :] <= (n0 + np.arange(T))[:, None]
    sc = np.where(mask[None], sc, -np.inf)
    sc -= sc.max(axis=-1, keepdims=True)
    pr = np.exp(sc)
    pr /= pr.sum(axis=-1, keepdims=True)
    o = np.einsum("hts,shd->thd", pr, val).reshape(T, Hm * dv)
    if c.mla_gate:
        o = o * sigmoid(x @ ck.get(p + "g_proj.weight").T)          # gate BEFORE o_proj, no norm
    return o @ ck.get(p + "o_proj.weight").T


def route(c, logits, bias):
    """K3 router (docs/MODEL.md, "Latent MoE and SiTU"): select top-k of sigmoid + bias, weights = UNBIASED sigmoid,
    renormalised (+1e-20) when moe_renormalize and top_k > 1, times routed_scaling_factor."""
    s = sigmoid(logits)
    idx = np.argsort(-(s + bias), axis=1, kind="stable")[:, :c.topk]   # ties -> lowest id
    w = np.take_along_axis(s, idx, axis=1)
    if c.renorm and c.topk > 1:
        w = w / (w.sum(axis=1, keepdims=True) + 1e-20)
    return idx, w * c.scale


def ffn_layer(ck, L, x, stats=None):
    c = ck.config
    if not c.is_moe(L):
        p = "model.layers.%d.mlp." % L
        return situ_mlp(c, x, ck.get(p + "gate_proj.weight"), ck.get(p + "up_proj.weight"),
                        ck.get(p + "down_proj.weight"))
    p = "model.layers.%d.block_sparse_moe." % L
    idx, w = route(c, x @ ck.get(p + "gate.weight").T, ck.get(p + "gate.e_score_correction_bias"))
    if stats is not None:
        stats.setdefault(L, np.zeros(c.n_experts, dtype=np.int64))
        np.add.at(stats[L], idx.ravel(), 1)
    zl = x @ ck.get(p + "routed_expert_down_proj.weight").T          # [T, latent]
    acc = np.zeros_like(zl)
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        q = p + "experts.%d." % e
        ye = situ_mlp(c, zl[rows], ck.get(q + "w1.weight"), ck.get(q + "w3.weight"), ck.get(q + "w2.weight"))
        acc[rows] += w[rows, slot][:, None] * ye
    if c.latent_norm:
        acc = rmsnorm(acc, ck.get(p + "routed_expert_norm.weight"), c.eps)   # norm of the AGGREGATE
    y = acc @ ck.get(p + "routed_expert_up_proj.weight").T
    if c.n_shared > 0:
        q = p + "shared_experts."
        y = y + situ_mlp(c, x, ck.get(q + "gate_proj.weight"), ck.get(q + "up_proj.weight"),
                         ck.get(q + "down_proj.weight"))
    return y


# ---------------------------------------------------------------------------------------------
# model

class K3Model:
    def __init__(self, ck):
        self.ck = ck
        self.c = ck.config
        self.stats = {}
        self._w = {}

    def new_state(self):
        return {"n": 0, "layers": [dict() for _ in range(self.c.n_layers)]}

    def score_vec(self, pre):
        """Folded AttnRes score vector: X_res_norm.weight * X_res_proj.weight (docs/MODEL.md, "Attention Residuals")."""
        if pre not in self._w:
            nw = self.ck.get(pre + "_norm.weight").reshape(-1)
            pw = self.ck.get(pre + "_proj.weight")
            expect_shape(pre + "_proj.weight", pw, (1, self.c.D))
            expect_shape(pre + "_norm.weight", nw, (self.c.D,))
            self._w[pre] = nw * pw.reshape(-1)
        return self._w[pre]

    # overridable pieces (the bookkeeping self-test replaces them by stubs)
    def mix(self, sources, w):
        return attnres_mix(np.stack(sources), w, self.c.eps)

    def attn(self, L, x, st_):
        return (kda_layer if self.c.layer_types[L] == "kda" else mla_layer)(self.ck, L, x, st_)

    def ffn(self, L, x):
        return ffn_layer(self.ck, L, x, self.stats)

    def forward(self, ids, state=None, return_hidden=False):
        """Teacher-forced forward of ids after `state` (updated in place). Returns logits [T, vocab]
        (or the pre-norm output-mixed hidden state when return_hidden)."""
        c, ck = self.c, self.ck
        if state is None:
            state = self.new_state()
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= c.vocab):
            raise ValueError("token id out of range [0, %d)" % c.vocab)
        if state["n"] + ids.size > c.max_pos:
            raise ValueError("%d positions exceed max_position_embeddings %d" % (state["n"] + ids.size, c.max_pos))
        h = ck.get("model.embed_tokens.weight")[ids]             # no scaling
        B = []                                                   # this forward's block snapshots
        for L in range(c.n_layers):
            pre = "model.layers.%d." % L
            p = h                                                # the stream entering the layer
            a = self.mix(B + [p], self.score_vec(pre + "self_attention_res")) if B else p   # mix #1
            if L % c.block == 0:                                 # boundary: bank the RAW stream, restart
                B.append(p)
                p = None
            y = self.attn(L, rmsnorm(a, ck.get(pre + "input_layernorm.weight"), c.eps), state["layers"][L])
            p = y if p is None else p + y
            m = self.mix(B + [p], self.score_vec(pre + "mlp_res"))                          # mix #2
            z = self.ffn(L, rmsnorm(m, ck.get(pre + "post_attention_layernorm.weight"), c.eps))
            h = p + z
        h_out = self.mix(B + [h], self.score_vec("model.output_attn_res"))                  # output mix
        state["n"] += len(ids)
        if return_hidden:
            return h_out
        hn = rmsnorm(h_out, ck.get("model.norm.weight"), c.eps)
        head = ck.get("model.embed_tokens.weight") if c.tie else ck.get("lm_head.weight")
        return hn @ head.T


def load(model_dir, top):
    return K3Model(K3Checkpoint(model_dir, top))


# ---------------------------------------------------------------------------------------------
# self-test helpers: literal transcriptions and the absorbed MLA

def kda_step_literal(ck, L, x, st_):
    """docs/MODEL.md, "KDA in K3" steps 1-7 transcribed loop by loop for one token (self-test only)."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    H, K, W = c.kda_heads, c.kda_dim, c.conv_w
    P = H * K
    if not st_:
        st_["conv"] = [[[0.0] * P for _ in range(W - 1)] for _ in range(3)]
        st_["S"] = [[[0.0] * K for _ in range(K)] for _ in range(H)]
    act = []
    for n_i, n in enumerate("qkv"):
        xp = ck.get(p + n + "_proj.weight") @ x
        w = ck.get(p + n + "_conv1d.weight").reshape(P, W)
        hist = st_["conv"][n_i]
        y = [0.0] * P
        for ch in range(P):
            acc = sum(w[ch][j] * hist[j][ch] for j in range(W - 1)) + w[ch][W - 1] * xp[ch]
            y[ch] = acc / (1.0 + math.exp(-acc))
            for j in range(W - 2):
                hist[j][ch] = hist[j + 1][ch]
            hist[W - 2][ch] = xp[ch]
        act.append(y)
    f = ck.get(p + "f_b_proj.weight") @ (ck.get(p + "f_a_proj.weight") @ x)
    G = ck.get(p + "g_proj.weight") @ x
    bl = ck.get(p + "b_proj.weight") @ x
    A_log = ck.get(p + "A_log").reshape(-1)
    dt = ck.get(p + "dt_bias").reshape(-1)
    onw = ck.get(p + "o_norm.weight")
    z = [0.0] * P
    for h in range(H):
        qh, kh, vh = (act[i][h * K:(h + 1) * K] for i in range(3))
        nq = math.sqrt(sum(a * a for a in qh) + 1e-6)
        nk = math.sqrt(sum(a * a for a in kh) + 1e-6)
        qh = [a / nq * K ** -0.5 for a in qh]
        kh = [a / nk for a in kh]
        beta = 1.0 / (1.0 + math.exp(-bl[h]))
        S = st_["S"][h]
        for i in range(K):
            zz = f[h * K + i] + dt[h * K + i]
            g = c.lower_bound / (1.0 + math.exp(-math.exp(A_log[h]) * zz))
            for j in range(K):
                S[i][j] *= math.exp(g)
        u = [sum(S[i][j] * kh[i] for i in range(K)) for j in range(K)]
        for i in range(K):
            for j in range(K):
                S[i][j] += beta * kh[i] * (vh[j] - u[j])
        o = [sum(S[i][j] * qh[i] for i in range(K)) for j in range(K)]
        r = 1.0 / math.sqrt(sum(a * a for a in o) / K + c.eps)
        for j in range(K):
            z[h * K + j] = o[j] * r * onw[j] / (1.0 + math.exp(-G[h * K + j]))
    return ck.get(p + "o_proj.weight") @ np.array(z)


def mla_absorbed(ck, L, x):
    """Absorbed-latent MLA (docs/MODEL.md, "Gated MLA with q-LoRA") with q-LoRA and gate, whole sequence from an empty cache."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    Hm, dn, dr, dv, r = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora
    T = x.shape[0]
    q = mla_q(ck, p, x).reshape(T, Hm, dn + dr)
    ckv = x @ ck.get(p + "kv_a_proj_with_mqa.weight").T
    lat = rmsnorm(ckv[:, :r], ck.get(p + "kv_a_layernorm.weight"), MLA_KV_NORM_EPS)
    kpe = ckv[:, r:]
    kvb = ck.get(p + "kv_b_proj.weight").reshape(Hm, dn + dv, r)
    out = np.zeros((T, Hm, dv))
    for t in range(T):
        for h in range(Hm):
            qa = kvb[h, :dn, :].T @ q[t, h, :dn]
            sc = (lat[:t + 1] @ qa + kpe[:t + 1] @ q[t, h, dn:]) * (dn + dr) ** -0.5
            pr = np.exp(sc - sc.max())
            pr /= pr.sum()
            out[t, h] = kvb[h, dn:, :] @ (pr @ lat[:t + 1])
    o = out.reshape(T, Hm * dv) * sigmoid(x @ ck.get(p + "g_proj.weight").T)
    return o @ ck.get(p + "o_proj.weight").T


def moe_literal(ck, L, x):
    """docs/MODEL.md, "Latent MoE and SiTU" for one token, loop by loop (self-test only)."""
    c = ck.config
    p = "model.layers.%d.block_sparse_moe." % L
    Wg, b = ck.get(p + "gate.weight"), ck.get(p + "gate.e_score_correction_bias")
    s = [1.0 / (1.0 + math.exp(-float(Wg[e] @ x))) for e in range(c.n_experts)]
    sel = sorted(range(c.n_experts), key=lambda e: (-(s[e] + b[e]), e))[:c.topk]
    w = [s[e] for e in sel]
    tot = sum(w)
    w = [wk / (tot + 1e-20) * c.scale for wk in w]

    def situ1(g, u):
        return [c.situ_beta * math.tanh(gi / c.situ_beta) / (1.0 + math.exp(-gi)) *
                c.situ_lbeta * math.tanh(ui / c.situ_lbeta) for gi, ui in zip(g, u)]

    def mlp(pre, gn, un, dn, v):
        return ck.get(pre + dn) @ np.array(situ1(ck.get(pre + gn) @ v, ck.get(pre + un) @ v))
    zl = ck.get(p + "routed_expert_down_proj.weight") @ x
    acc = np.zeros(c.latent)
    for wk, e in zip(w, sel):
        acc += wk * mlp(p + "experts.%d." % e, "w1.weight", "w3.weight", "w2.weight", zl)
    nw = ck.get(p + "routed_expert_norm.weight")
    rr = math.sqrt(sum(a * a for a in acc) / c.latent + c.eps)
    r = ck.get(p + "routed_expert_up_proj.weight") @ np.array([acc[i] / rr * nw[i] for i in range(c.latent)])
    return r + mlp(p + "shared_experts.", "gate_proj.weight", "up_proj.weight", "down_proj.weight", x)


def real_k3_config():
    """The released text config as listed in docs/MODEL.md, "Config" (no weights needed; layer-map test)."""
    full = list(range(4, 93, 4)) + [93]
    return {
        "model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"],
        "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
        "text_config": {
            "model_type": "kimi_linear", "vocab_size": 163840, "hidden_size": 7168, "num_hidden_layers": 93,
            "num_attention_heads": 96, "num_key_value_heads": 96, "intermediate_size": 33792,
            "hidden_act": "situ", "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
            "rms_norm_eps": 1e-5, "max_position_embeddings": 1048576, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "mla_use_nope": True, "mla_use_output_gate": True, "num_experts": 896,
            "num_experts_per_token": 16, "num_shared_experts": 2, "moe_intermediate_size": 3072,
            "routed_expert_hidden_size": 3584, "latent_moe_use_norm": True,
            "moe_router_activation_func": "sigmoid", "moe_renormalize": True, "routed_scaling_factor": 1.0,
            "topk_method": "noaux_tc", "use_grouped_topk": True, "num_expert_group": 1, "topk_group": 1,
            "first_k_dense_replace": 1, "moe_layer_freq": 1, "attn_res_block_size": 12,
            "num_nextn_predict_layers": 0, "tie_word_embeddings": False,
            "linear_attn_config": {"num_heads": 96, "head_dim": 128, "short_conv_kernel_size": 4,
                                   "gate_lower_bound": -5.0, "use_full_rank_gate": True,
                                   "full_attn_layers": full,
                                   "kda_layers": [i for i in range(1, 94) if i not in full]},
            "quantization_config": None,
        },
    }


# ---------------------------------------------------------------------------------------------
# self-tests (called from kimi_ref.selftest with its check() reporter)

def selftest(check):
    import copy
    import tempfile
    import gen_ckpt
    import k3_gen
    rng = np.random.default_rng(4321)

    # --- SiTU: both caps saturate at |x| = 1000, the sigmoid takes the uncapped gate
    vals = [-1000.0, -30.0, -4.0, -0.3, 0.0, 0.7, 4.0, 8.0, 30.0, 1000.0]
    ok, why = True, ""
    for g in vals:
        for u in vals:
            want = 4.0 * math.tanh(g / 4.0) * (1.0 / (1.0 + math.exp(-g)) if g > -700 else 0.0) \
                * 25.0 * math.tanh(u / 25.0)
            got = float(situ(g, u, 4.0, 25.0))
            if abs(got - want) > 1e-12 * max(1.0, abs(want)) or abs(got) > 100.0:
                ok, why = False, "situ(%g,%g)=%r want %r" % (g, u, got, want)
    big = situ(np.array([1000.0, 1000.0, -1000.0]), np.array([1000.0, -1000.0, 1000.0]), 4.0, 25.0)
    ok = ok and big[0] == 100.0 and big[1] == -100.0 and abs(big[2]) < 1e-300
    # uncapped sigmoid: g=8 -> 4 tanh(2) sigma(8), not 4 tanh(2) sigma(4 tanh 2)
    want8 = 4 * math.tanh(2.0) / (1 + math.exp(-8.0)) * 25 * math.tanh(1 / 25.0)
    wrong8 = 4 * math.tanh(2.0) / (1 + math.exp(-4 * math.tanh(2.0))) * 25 * math.tanh(1 / 25.0)
    ok = ok and abs(float(situ(8.0, 1.0, 4.0, 25.0)) - want8) < 1e-14 and abs(want8 - wrong8) > 1e-3
    check("k3_situ_caps_and_uncapped_sigmoid", ok, why or "big %r" % big)

    # --- AttnRes mix, hand-checkable: keys normalised, values raw, folded score vector
    v1 = np.array([2.0, 2.0, 2.0, 2.0])                 # normalised key: [1,1,1,1]
    v2 = np.array([3.0, -3.0, 3.0, -3.0])               # normalised key: [1,-1,1,-1]
    w = np.array([1.0, 2.0, 1.0, 1.0]) * np.array([0.0, math.log(3.0) / 2, 0.0, 0.0])   # norm.w * proj.w
    got = attnres_mix(np.stack([v1, v2])[:, None, :], w, 0.0)[0]     # scores ln3, -ln3 -> 0.9 / 0.1
    want = np.array([2.1, 1.5, 2.1, 1.5])
    got_eps = attnres_mix(np.stack([v1, v2])[:, None, :], w, 1e-5)[0]
    check("k3_attnres_mix_hand_case", np.allclose(got, want, rtol=0, atol=1e-14)
          and np.allclose(got_eps, want, atol=1e-5), "got %r" % got)

    # --- AttnRes bookkeeping, hand-checkable: block 2, 5 layers, stub sublayers return constants
    a = k3_gen.parse_k3(["unused", "--hidden", "64", "--layers", "5", "--attn-res-block", "2",
                         "--full-attn", "4,5", "--vocab", "7"])
    cfg = k3_gen.make_config(a)
    t = {"model.embed_tokens.weight": np.ones((7, 64))}
    for L in range(5):
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            t["model.layers.%d.%s.weight" % (L, n)] = np.ones(64)
        for n in ("self_attention_res_proj", "mlp_res_proj"):
            t["model.layers.%d.%s.weight" % (L, n)] = np.zeros((1, 64))     # uniform mixes
    t["model.output_attn_res_norm.weight"] = np.ones(64)
    t["model.output_attn_res_proj.weight"] = np.zeros((1, 64))

    class Stub(K3Model):
        log = []

        def mix(self, sources, w):
            out = K3Model.mix(self, sources, w)
            self.log.append((len(sources), float(out[0, 0])))
            return out

        def attn(self, L, x, st_):
            return np.full_like(x, L + 1.0)

        def ffn(self, L, x):
            return np.full_like(x, 10.0 * (L + 1))
    sm = Stub(K3DictCheckpoint(cfg, t))
    hout = sm.forward([3], return_hidden=True)
    want = [(2, 1.0), (2, 6.0), (2, 7.0), (2, 17.0), (3, 37 / 3), (3, 67 / 3), (3, 71 / 3), (3, 37.0),
            (4, 29.0), (4, 41.5)]
    ok = len(sm.log) == len(want) and all(n == wn and abs(v - wv) < 1e-12 for (n, v), (wn, wv)
                                          in zip(sm.log, want)) and np.allclose(hout, 41.5, atol=1e-12)
    check("k3_attnres_block_bookkeeping", ok, "mix log %r" % sm.log)

    # --- MXFP4: the spec's test vector (scale 127, group 4), swapped-nibble negative, scales, 255
    packed = np.array([[0x01, 0x29], [0x93, 0xF4]], dtype=np.uint8)
    scale = np.array([[127], [127]], dtype=np.uint8)
    got = mxfp4_decode(packed, scale, group=4)
    want = np.array([[0.5, 0.0, -0.5, 1.0], [1.5, -0.5, 2.0, -6.0]])
    swapped = mxfp4_decode(((packed & 0x0F) << 4) | (packed >> 4), scale, group=4)   # high nibble first
    ok = np.array_equal(got, want) and not np.array_equal(swapped, want)
    ok = ok and swapped[1, 0] == -0.5 and swapped[1, 1] == 1.5            # the negative moved column
    row = np.zeros((1, 32), dtype=np.uint8)
    row[0, :] = 0xF7                                                      # even col +6, odd col -6
    two = mxfp4_decode(row, np.array([[128, 125]], dtype=np.uint8))      # groups of 32 along columns
    ok = ok and np.array_equal(two[0, :32], np.tile([12.0, -12.0], 16)) \
        and np.array_equal(two[0, 32:], np.tile([1.5, -1.5], 16))
    ok = ok and mxfp4_decode(np.array([[0x08] * 16]), np.array([[127]]))[0, 0] == 0.0   # -0
    try:
        mxfp4_decode(row, np.array([[255, 127]], dtype=np.uint8))
        ok = False
    except ValueError:
        pass
    check("k3_mxfp4_test_vector_and_layout", bool(ok), "got %r swapped %r" % (got, swapped))

    # --- safe-gate decay: g = lb * sigmoid(exp(A_log[h]) * (f + dt)), A_log sliced per head
    H, K = 3, 4
    A_log = np.concatenate([np.log([1.0, 2.0, 0.5]), np.full(5, 7.0)])   # tail must be ignored
    f = np.zeros((1, H, K))
    dt = np.array([[0.0, 1.0, -1.0, 30.0], [0.5, 0.0, -0.25, -40.0], [2.0, -2.0, 0.0, 1e-3]])
    g = safe_gate(f, dt, A_log[:H], -5.0)[0]
    want = np.array([[-5 * 0.5, -5 / (1 + math.exp(-1.0)), -5 / (1 + math.exp(1.0)), -5 / (1 + math.exp(-30.0))],
                     [-5 / (1 + math.exp(-1.0)), -2.5, -5 / (1 + math.exp(0.5)), 0.0],
                     [-5 / (1 + math.exp(-1.0)), -5 / (1 + math.exp(1.0)), -2.5, -5 / (1 + math.exp(-5e-4))]])
    ok = np.allclose(g, want, rtol=0, atol=1e-14) and g.max() <= 0 and g.min() >= -5
    ok = ok and np.all(np.exp(g) >= math.exp(-5))
    check("k3_safe_gate_decay", bool(ok), "g %r" % g)

    # --- layer map of the real K3 config (docs/MODEL.md, "Config"): MLA at 1-based 4,8,..,92,93; AttnRes boundaries
    rc = K3Config(real_k3_config())
    got = "".join("K" if t_ == "kda" else "M" for t_ in rc.layer_types)
    want = "".join("M" if (L % 4 == 3 or L == 92) else "K" for L in range(93))
    bnd = [L for L in range(93) if L % rc.block == 0]
    ok = got == want and got.count("M") == 24 and got.endswith("KKKMM") and bnd == list(range(0, 85, 12))
    ok = ok and [L for L in range(93) if not rc.is_moe(L)] == [0]
    check("k3_layer_map_real_config", ok, got + " " + repr(bnd))
    bad = copy.deepcopy(real_k3_config())
    del bad["text_config"]["routed_scaling_factor"]
    try:
        K3Config(bad)
        ok = False
    except ValueError:
        ok = True
    bad = copy.deepcopy(real_k3_config())
    del bad["text_config"]["linear_attn_config"]["gate_lower_bound"]
    try:
        K3Config(bad)
    except ValueError:
        ok = ok and True
    else:
        ok = False
    check("k3_config_refuses_missing_fields", ok)

    # --- a random in-memory K3 model
    a = k3_gen.parse_k3(["unused", "--hidden", "64", "--layers", "7", "--attn-res-block", "3",
                         "--kda-heads", "2", "--kda-head-dim", "16", "--mla-heads", "3", "--q-lora", "24",
                         "--kv-lora", "24", "--nope", "8", "--rope", "4", "--v-dim", "12", "--experts", "12",
                         "--topk", "3", "--moe-inter", "64", "--latent", "32", "--dense-inter", "48",
                         "--vocab", "97", "--seed", "11"])
    cfg, want_t = k3_gen.decoded_model(a)
    ck = K3DictCheckpoint(cfg, want_t)
    model = K3Model(ck)
    x = rng.normal(size=(7, 64))
    for L in [L for L in range(7) if ck.config.layer_types[L] == "kda"][:2]:
        a1 = kda_layer(ck, L, x, {})
        lit = {}
        a2 = np.stack([kda_step_literal(ck, L, x[t_], lit) for t_ in range(7)])
        err = np.abs(a1 - a2).max() / np.abs(a1).max()
        check("k3_kda_layer_eq_spec_steps_layer%d" % L, err < 1e-12, "max rel diff %.3g" % err)
    for L in [L for L in range(7) if ck.config.layer_types[L] == "mla"]:
        a1 = mla_layer(ck, L, x, {})
        a2 = mla_absorbed(ck, L, x)
        err = np.abs(a1 - a2).max() / np.abs(a1).max()
        check("k3_mla_naive_eq_absorbed_layer%d" % L, err < 1e-12, "max rel diff %.3g" % err)
    a1 = ffn_layer(ck, 2, x)
    a2 = np.stack([moe_literal(ck, 2, x[t_]) for t_ in range(7)])
    err = np.abs(a1 - a2).max() / np.abs(a1).max()
    check("k3_latent_moe_eq_spec_pseudocode", err < 1e-12, "max rel diff %.3g" % err)

    ids = rng.integers(0, 97, size=20)
    full = model.forward(ids)
    s = model.new_state()
    inc = np.concatenate([model.forward([t_], s) for t_ in ids])
    err = np.abs(full - inc).max() / np.abs(full).max()
    check("k3_prefill_eq_token_by_token", err < 1e-10, "max rel diff %.3g" % err)
    s = model.new_state()
    part = np.concatenate([model.forward(ids[:11], s)] + [model.forward([t_], s) for t_ in ids[11:15]]
                          + [model.forward(ids[15:], s)])
    err = np.abs(full - part).max() / np.abs(full).max()
    check("k3_prefill_eq_split_prefill_plus_decode", err < 1e-10, "max rel diff %.3g" % err)
    ok = np.isfinite(full).all() and 0.3 < np.std(full) < 10 and len(set(np.argmax(full, 1))) > 5
    check("k3_logits_healthy", bool(ok), "std %.3g argmax %r" % (np.std(full), np.argmax(full, 1)))
    used = [int((cnt > 0).sum()) for cnt in model.stats.values()]
    check("k3_moe_uses_varied_experts", min(used) >= 6, "experts used per layer %r" % used)

    # router: select on biased, weight on unbiased, renormalise only for top_k > 1
    class C_:
        topk, renorm, scale = 2, True, 1.0
    lg = np.array([[2.0, 1.0, 0.0, -1.0]])
    idx, wt = route(C_, lg, np.array([0.0, 0.0, 5.0, 0.0]))
    sg = sigmoid(lg[0])
    ok = list(idx[0]) == [2, 0] and np.allclose(wt[0], np.array([sg[2], sg[0]]) / (sg[2] + sg[0] + 1e-20))
    C_.topk = 1
    idx, wt = route(C_, lg, np.zeros(4))
    ok = ok and list(idx[0]) == [0] and wt[0, 0] == sg[0]
    check("k3_router_biased_select_unbiased_weight", bool(ok))

    # --- checkpoint files: what the reader decodes equals what the writer meant, and so do logits
    with tempfile.TemporaryDirectory() as tmp:
        for tag, extra in [("bf16_idx", []), ("f32_noidx", ["--dtype", "f32", "--no-index", "--shards", "2",
                                                             "--alog-len", "8", "--experts", "8"])]:
            d = os.path.join(tmp, tag)
            a2 = gen_ckpt.parse_args([d, "--arch", "k3"] + k3_gen.shape_args(a) + extra)
            gen_ckpt.generate(a2, quiet=True)
            cfg2, want2 = gen_ckpt.decoded_model(a2)
            ck2 = K3Checkpoint(d)
            bad = [n for n in want2 if not np.array_equal(ck2.get(n), want2[n])]
            names = {n[:-len("_packed")] if n.endswith("weight_packed") else n for n in ck2.where
                     if not n.endswith("weight_scale")}
            extra_t = sorted(names - set(want2))
            lg = K3Model(ck2).forward(ids[:8])
            lw = K3Model(K3DictCheckpoint(cfg2, want2)).forward(ids[:8])
            err = np.abs(lg - lw).max() / np.abs(lw).max()
            check("k3_checkpoint_roundtrip_" + tag, not bad and not extra_t and err == 0.0
                  and ck2.n_ignored > 0, "mismatched %r extra %r logits diff %.3g ignored %d"
                  % (bad[:3], extra_t[:3], err, ck2.n_ignored))
        # an ignored (quant_config.ignore) module stored quantised must be refused
        d = os.path.join(tmp, "bf16_idx")
        with open(os.path.join(d, "config.json")) as f:
            top = json.load(f)
        top["text_config"]["quantization_config"]["ignore"].append("re:.*experts.*")
        try:
            K3Checkpoint(d, top).get("model.layers.1.block_sparse_moe.experts.0.w1.weight")
            ok = False
        except ValueError:
            ok = True
        check("k3_quant_ignore_enforced", ok)
