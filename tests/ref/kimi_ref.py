#!/usr/bin/python3
"""kimi_ref.py - independent numpy (float64) reference of the Kimi Linear forward pass.
(Kimi K3, config model_type "kimi_k3": see k3_ref.py; this CLI dispatches on model_type.)

Written from docs/MODEL.md ("Kimi Linear", "Choices"), without
looking at the C engine. Numerics choices (docs/ARCHITECTURE.md, "Numerics"):
  * everything in float64, no bf16 rounding of activations; RMSNorm y = w * x / sqrt(mean(x^2) + eps)
  * MoE: selection by top-k of sigmoid(s) + e_score_correction_bias, mixing weights from the UNBIASED
    sigmoid scores, renormalised with +1e-20 (if moe_renormalize), times routed_scaling_factor
  * kv_a_layernorm eps = 1e-6 (all other norms use rms_norm_eps)
  * KDA L2 norm x / sqrt(sum x^2 + 1e-6)
  * MLA in the NAIVE decompressed form (the C engine uses the absorbed form; this cross-checks it)

CLI:
  kimi_ref.py MODEL_DIR --ids "1 2 3" --out logits.f32 [--greedy N] [--stats]
  kimi_ref.py --selftest
"""
import argparse
import glob
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

MLA_KV_NORM_EPS = 1e-6   # docs/MODEL.md, "Choices"
L2_EPS = 1e-6            # docs/MODEL.md, "KDA" step 3
SOFTPLUS_THRESHOLD = 20.0


# ---------------------------------------------------------------------------------------------
# elementwise helpers (float64)

def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x))        # stable for any |x|


def silu(x):
    return x * sigmoid(x)


def softplus(z):
    """PyTorch softplus(beta=1, threshold=20): identity above the threshold."""
    z = np.asarray(z, dtype=np.float64)
    return np.where(z > SOFTPLUS_THRESHOLD, z, np.log1p(np.exp(np.minimum(z, SOFTPLUS_THRESHOLD))))


def rmsnorm(x, w, eps):
    x = np.asarray(x, dtype=np.float64)
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def l2norm(x, eps=L2_EPS):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


# ---------------------------------------------------------------------------------------------
# configuration

class Config:
    def __init__(self, d):
        self.raw = d
        if d.get("model_type") != "kimi_linear":
            raise ValueError("config.json: model_type is %r, expected 'kimi_linear'" % d.get("model_type"))
        g = d.get
        self.D = int(d["hidden_size"])
        self.n_layers = int(d["num_hidden_layers"])
        self.vocab = int(d["vocab_size"])
        self.eps = float(g("rms_norm_eps", 1e-5))
        self.tie = bool(g("tie_word_embeddings", False))
        # MLA
        self.mla_heads = int(d["num_attention_heads"])
        self.kv_lora = int(d["kv_lora_rank"])
        self.nope = int(d["qk_nope_head_dim"])
        self.rope = int(d["qk_rope_head_dim"])
        self.v_dim = int(d["v_head_dim"])
        if g("q_lora_rank") is not None:
            raise ValueError("config.json: q_lora_rank=%r; Kimi Linear has no q-LoRA (docs/MODEL.md, 'Tensors')" % g("q_lora_rank"))
        if g("mla_use_nope", True) is False:
            raise ValueError("config.json: mla_use_nope=false is not Kimi Linear (MLA is NoPE, docs/MODEL.md, 'MLA')")
        if g("mla_use_output_gate", False):
            raise ValueError("config.json: mla_use_output_gate is a Kimi K3 feature, not Kimi Linear")
        # KDA
        la = d["linear_attn_config"]
        self.kda_layers = [int(i) for i in la["kda_layers"]]           # 1-based
        self.full_layers = [int(i) for i in la.get("full_attn_layers", [])]  # 1-based
        self.kda_heads = int(la["num_heads"])
        self.kda_dim = int(la["head_dim"])
        self.conv_w = int(la["short_conv_kernel_size"])
        # FFN
        self.inter = int(d["intermediate_size"])
        self.moe_inter = int(d["moe_intermediate_size"])
        self.n_experts = int(g("num_experts") or 0)
        k = g("num_experts_per_token", g("num_experts_per_tok"))
        self.topk = int(k) if k is not None else 0
        self.n_shared = int(g("num_shared_experts") or 0)
        self.first_dense = int(g("first_k_dense_replace", 0))
        self.moe_freq = int(g("moe_layer_freq", 1))
        self.scale = float(g("routed_scaling_factor", 1.0))
        self.renorm = bool(g("moe_renormalize", True))
        act = g("moe_router_activation_func", "sigmoid")
        if act != "sigmoid":
            raise ValueError("config.json: moe_router_activation_func=%r, only sigmoid supported" % act)
        if g("use_grouped_topk", False) and (int(g("num_expert_group", 1) or 1) != 1 or
                                             int(g("topk_group", 1) or 1) != 1):
            raise ValueError("config.json: grouped top-k with more than one group is not Kimi Linear")
        if g("hidden_act", "silu") != "silu":
            raise ValueError("config.json: hidden_act=%r, expected silu" % g("hidden_act"))
        self.layer_types = [self._layer_type(L) for L in range(self.n_layers)]
        if self.n_experts and not (1 <= self.topk <= self.n_experts):
            raise ValueError("config.json: num_experts_per_token=%r out of range" % self.topk)

    def _layer_type(self, L):
        in_kda = (L + 1) in self.kda_layers        # docs/MODEL.md, "Tensors": 1-based lists
        in_full = (L + 1) in self.full_layers
        if self.full_layers and in_kda == in_full:
            raise ValueError("config.json: layer %d (1-based %d) is in %s of kda_layers/full_attn_layers"
                             % (L, L + 1, "both" if in_kda else "neither"))
        return "kda" if in_kda else "mla"

    def is_moe(self, L):
        return self.n_experts > 0 and L >= self.first_dense and L % self.moe_freq == 0


# ---------------------------------------------------------------------------------------------
# checkpoint loading

class Checkpoint:
    """All tensors of a HF checkpoint directory, decoded lazily to float64."""

    def __init__(self, model_dir):
        self.dir = model_dir
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = Config(json.load(f))
        self.where = scan_shards(model_dir)
        qc = self.config.raw.get("quantization_config") or {}
        self.block = tuple(qc.get("weight_block_size", [128, 128]))
        self.cache = {}

    def has(self, name):
        return name in self.where

    def dtype(self, name):
        return self.where[name].info(name)["dtype"]

    def get(self, name):
        if name in self.cache:
            return self.cache[name]
        if name not in self.where:
            raise KeyError("checkpoint has no tensor %s" % name)
        a = self.where[name].get(name)
        sname = name[:-len("weight")] + "weight_scale_inv" if name.endswith(".weight") else None
        if sname and sname in self.where:
            a = dequant_block(a, self.where[sname].get(sname), self.block)
        self.cache[name] = a
        return a


def scan_shards(model_dir):
    """{tensor name: SafetensorsFile} over the shards listed in model.safetensors.index.json (checked
    against the shard headers), or over every *.safetensors file when there is no index."""
    idx_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        with open(idx_path) as f:
            wm = json.load(f)["weight_map"]
        files = sorted(set(wm.values()))
    else:
        wm = None
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise ValueError("%s: no *.safetensors files" % model_dir)
    where = {}
    for fn in files:
        sf = st.SafetensorsFile(os.path.join(model_dir, fn))
        for name in sf.keys():
            if name in where:
                raise ValueError("tensor %s appears in %s and %s" % (name, where[name].path, fn))
            where[name] = sf
    if wm is not None:
        for name, fn in wm.items():
            if name not in where:
                raise ValueError("index lists %s in %s but no shard holds it" % (name, fn))
            if os.path.basename(where[name].path) != fn:
                raise ValueError("index puts %s in %s, found in %s" % (name, fn, where[name].path))
    return where


def dequant_block(w, s, block=(128, 128)):
    """W[i][j] = W8[i][j] * scale_inv[i // bm][j // bn] (docs/ARCHITECTURE.md, "Numerics", the 'inverse' scale is multiplied)."""
    bm, bn = block
    M, N = w.shape
    if s.shape != ((M + bm - 1) // bm, (N + bn - 1) // bn):
        raise ValueError("weight_scale_inv shape %r does not match weight %r" % (s.shape, w.shape))
    full = np.repeat(np.repeat(s, bm, axis=0), bn, axis=1)[:M, :N]
    return w * full


class DictCheckpoint:
    """Same interface as Checkpoint, over an in-memory dict (used by the self-tests)."""

    def __init__(self, config_dict, tensors):
        self.config = Config(config_dict)
        self.t = {k: np.asarray(v, dtype=np.float64) for k, v in tensors.items()}

    def has(self, name):
        return name in self.t

    def get(self, name):
        return self.t[name]


# ---------------------------------------------------------------------------------------------
# layers. Every function takes x as [T, D] (T tokens at once) and a per-layer state dict.

def kda_layer(ck, L, x, state):
    """KDA (docs/MODEL.md, "KDA"). state: {'conv': [3, W-1, P] raw projections (oldest first), 'S': [H, K, V]}."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    H, K = c.kda_heads, c.kda_dim
    P, W, T = H * K, c.conv_w, x.shape[0]
    if "S" not in state:
        state["conv"] = np.zeros((3, W - 1, P))
        state["S"] = np.zeros((H, K, K))
    proj = [x @ ck.get(p + n + "_proj.weight").T for n in "qkv"]   # raw projections [T, P]
    acts = []
    for i, n in enumerate("qkv"):
        w = ck.get(p + n + "_conv1d.weight")
        if w.shape not in ((P, 1, W), (P, W)):
            raise ValueError("%s_conv1d.weight has shape %r, expected [%d,1,%d] or [%d,%d]"
                             % (p + n, w.shape, P, W, P, W))
        w = w.reshape(P, W)                                         # tap W-1 multiplies the current token
        xp = np.concatenate([state["conv"][i], proj[i]], axis=0)    # [W-1+T, P]
        y = np.zeros((T, P))
        for j in range(W):
            y += w[:, j] * xp[j:j + T]                              # token t uses xp[t+j] = x_{t-(W-1)+j}
        acts.append(silu(y))
        state["conv"][i] = xp[T:]                                   # last W-1 raw projections
    q, k, v = (a.reshape(T, H, K) for a in acts)
    q = l2norm(q) * K ** -0.5
    k = l2norm(k)
    f = (x @ ck.get(p + "f_a_proj.weight").T) @ ck.get(p + "f_b_proj.weight").T
    if ck.get(p + "A_log").size != H or ck.get(p + "dt_bias").size != P:
        raise ValueError("%sA_log / dt_bias: expected %d / %d elements" % (p, H, P))
    A = np.exp(ck.get(p + "A_log").reshape(H))                      # [1,1,H,1] or any shape with H values
    g = -A[None, :, None] * softplus(f.reshape(T, H, K) + ck.get(p + "dt_bias").reshape(1, H, K))
    beta = sigmoid(x @ ck.get(p + "b_proj.weight").T)               # [T, H]
    o, state["S"] = kda_recurrent(q, k, v, g, beta, state["S"])
    gt = (x @ ck.get(p + "g_a_proj.weight").T) @ ck.get(p + "g_b_proj.weight").T
    z = rmsnorm(o, ck.get(p + "o_norm.weight"), c.eps) * sigmoid(gt.reshape(T, H, K))
    return z.reshape(T, P) @ ck.get(p + "o_proj.weight").T


def kda_recurrent(q, k, v, g, beta, S):
    """Token-by-token delta rule (docs/MODEL.md, "KDA" step 6 / docs/MODEL.md, "KDA"). q,k: [T,H,K], v: [T,H,V], g: [T,H,K]
    log decays, beta: [T,H], S: [H,K,V]. Returns (o [T,H,V], S)."""
    S = S.copy()
    T = q.shape[0]
    o = np.zeros(v.shape)
    for t in range(T):
        S *= np.exp(g[t])[:, :, None]                           # decay rows
        pred = np.einsum("hkv,hk->hv", S, k[t])                 # predict with the decayed state
        u = beta[t][:, None] * (v[t] - pred)                    # scaled error
        S += k[t][:, :, None] * u[:, None, :]                   # rank-1 write
        o[t] = np.einsum("hkv,hk->hv", S, q[t])                 # read with the updated state
    return o, S


def mla_layer(ck, L, x, state):
    """MLA, naive decompressed form (docs/MODEL.md, "MLA"), NoPE, causal.
    state: {'c': [N, kv_lora] normalised latents, 'kpe': [N, rope]} of past tokens."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    Hm, dn, dr, dv, r = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora
    T = x.shape[0]
    q = (x @ ck.get(p + "q_proj.weight").T).reshape(T, Hm, dn + dr)
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
    mask = np.arange(N)[None, :] <= (n0 + np.arange(T))[:, None]     # [T, N]
    sc = np.where(mask[None], sc, -np.inf)
    sc -= sc.max(axis=-1, keepdims=True)
    pr = np.exp(sc)
    pr /= pr.sum(axis=-1, keepdims=True)
    attn = np.einsum("hts,shd->thd", pr, val)                        # [T, Hm, dv]
    return attn.reshape(T, Hm * dv) @ ck.get(p + "o_proj.weight").T


def swiglu(x, wg, wu, wd):
    return (silu(x @ wg.T) * (x @ wu.T)) @ wd.T


def route(c, logits, bias):
    """Router (docs/MODEL.md, "FFN and router", docs/ARCHITECTURE.md, "Numerics"). logits [T,E] -> (idx [T,k], weights [T,k])."""
    s = sigmoid(logits)
    sc = s + bias
    idx = np.argsort(-sc, axis=1, kind="stable")[:, :c.topk]   # ties -> lowest expert id
    w = np.take_along_axis(s, idx, axis=1)                     # UNBIASED scores as weights
    if c.renorm:
        w = w / (w.sum(axis=1, keepdims=True) + 1e-20)
    return idx, w * c.scale


def ffn_layer(ck, L, x, stats=None):
    c = ck.config
    if not c.is_moe(L):
        p = "model.layers.%d.mlp." % L
        return swiglu(x, ck.get(p + "gate_proj.weight"), ck.get(p + "up_proj.weight"),
                      ck.get(p + "down_proj.weight"))
    p = "model.layers.%d.block_sparse_moe." % L
    idx, w = route(c, x @ ck.get(p + "gate.weight").T, ck.get(p + "gate.e_score_correction_bias"))
    if stats is not None:
        stats.setdefault(L, np.zeros(c.n_experts, dtype=np.int64))
        np.add.at(stats[L], idx.ravel(), 1)
    y = np.zeros_like(x)
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        q = p + "experts.%d." % e
        ye = swiglu(x[rows], ck.get(q + "w1.weight"), ck.get(q + "w3.weight"), ck.get(q + "w2.weight"))
        y[rows] += w[rows, slot][:, None] * ye
    if c.n_shared > 0:
        q = p + "shared_experts."
        y += swiglu(x, ck.get(q + "gate_proj.weight"), ck.get(q + "up_proj.weight"),
                    ck.get(q + "down_proj.weight"))
    return y


# ---------------------------------------------------------------------------------------------
# model

class Model:
    def __init__(self, ck):
        self.ck = ck
        self.c = ck.config
        self.stats = {}

    def new_state(self):
        return {"n": 0, "layers": [dict() for _ in range(self.c.n_layers)]}

    def forward(self, ids, state=None):
        """Teacher-forced forward of ids after `state` (updated in place). Returns logits [T, vocab]."""
        c, ck = self.c, self.ck
        if state is None:
            state = self.new_state()
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= c.vocab):
            raise ValueError("token id out of range [0, %d)" % c.vocab)
        h = ck.get("model.embed_tokens.weight")[ids]
        for L in range(c.n_layers):
            pre = "model.layers.%d." % L
            a = rmsnorm(h, ck.get(pre + "input_layernorm.weight"), c.eps)
            if c.layer_types[L] == "kda":
                a = kda_layer(ck, L, a, state["layers"][L])
            else:
                a = mla_layer(ck, L, a, state["layers"][L])
            h = h + a
            m = rmsnorm(h, ck.get(pre + "post_attention_layernorm.weight"), c.eps)
            h = h + ffn_layer(ck, L, m, self.stats)
        h = rmsnorm(h, ck.get("model.norm.weight"), c.eps)
        head = ck.get("model.embed_tokens.weight") if c.tie else ck.get("lm_head.weight")
        state["n"] += len(ids)
        return h @ head.T


def load_model(model_dir):
    """Dispatch on config.json model_type: kimi_linear -> Model, kimi_k3 -> k3_ref.K3Model."""
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    if top.get("model_type") == "kimi_k3":
        import k3_ref
        return k3_ref.load(model_dir, top)
    return Model(Checkpoint(model_dir))


def greedy(model, ids, n):
    """Logits for ids (teacher forced), then n greedy tokens (argmax, lowest id on ties)."""
    st_ = model.new_state()
    logits = model.forward(ids, st_)
    out = []
    last = logits[-1]
    for i in range(n):
        t = int(np.argmax(last))            # first maximum = lowest id
        out.append(t)
        if i + 1 < n:
            last = model.forward([t], st_)[-1]
    return logits, out


# ---------------------------------------------------------------------------------------------
# self-tests

def kda_chunked(q, k, v, g, beta, S, C=64):
    """Chunked KDA (docs/MODEL.md, "KDA"), one head at a time; used only to cross-check the recurrence."""
    T, H, K = q.shape
    o = np.zeros(v.shape)
    S = S.copy()
    for h in range(H):
        Sh = S[h].copy()
        for t0 in range(0, T, C):
            qc, kc, vc = q[t0:t0 + C, h], k[t0:t0 + C, h], v[t0:t0 + C, h]
            bc = beta[t0:t0 + C, h]
            G = np.cumsum(g[t0:t0 + C, h], axis=0)                  # Γ_r
            n = qc.shape[0]
            lower = np.arange(n)[:, None] > np.arange(n)[None, :]   # r > s
            diff = G[:, None, :] - G[None, :, :]                    # Γ_r - Γ_s
            E = np.exp(np.where((lower | np.eye(n, dtype=bool))[:, :, None], diff, -np.inf))
            M = -bc[:, None] * np.einsum("ri,rsi,si->rs", kc, E, kc) * lower
            for r in range(1, n):
                row = M[r].copy()
                M[r, :r] = row[:r] + row[:r] @ M[:r, :r]
            Tm = (M + np.eye(n)) * bc[None, :]
            Wm = Tm @ (np.exp(G) * kc)
            U = Tm @ vc
            Vnew = U - Wm @ Sh
            Qm = np.einsum("ri,rsi,si->rs", qc, E, kc)              # E is 0 above the diagonal
            o[t0:t0 + n, h] = (qc * np.exp(G)) @ Sh + Qm @ Vnew
            Sh = np.exp(G[-1])[:, None] * Sh + (np.exp(G[-1][None, :] - G) * kc).T @ Vnew
        S[h] = Sh
    return o, S


def mla_absorbed(ck, L, x):
    """Absorbed MLA (docs/MODEL.md, "MLA") over a whole sequence from an empty cache."""
    c = ck.config
    p = "model.layers.%d.self_attn." % L
    Hm, dn, dr, dv, r = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora
    T = x.shape[0]
    q = (x @ ck.get(p + "q_proj.weight").T).reshape(T, Hm, dn + dr)
    ckv = x @ ck.get(p + "kv_a_proj_with_mqa.weight").T
    lat = rmsnorm(ckv[:, :r], ck.get(p + "kv_a_layernorm.weight"), MLA_KV_NORM_EPS)
    kpe = ckv[:, r:]
    kvb = ck.get(p + "kv_b_proj.weight").reshape(Hm, dn + dv, r)
    W_UK, W_UV = kvb[:, :dn, :], kvb[:, dn:, :]
    out = np.zeros((T, Hm, dv))
    for t in range(T):
        for h in range(Hm):
            ql = W_UK[h].T @ q[t, h, :dn]
            sc = (lat[:t + 1] @ ql + kpe[:t + 1] @ q[t, h, dn:]) * (dn + dr) ** -0.5
            pr = np.exp(sc - sc.max())
            pr /= pr.sum()
            out[t, h] = W_UV[h] @ (pr @ lat[:t + 1])
    return out.reshape(T, Hm * dv) @ ck.get(p + "o_proj.weight").T


def kda_step_literal(ck, L, x, st_):
    """docs/MODEL.md, "KDA" pseudocode transcribed loop by loop (one token); only for the self-test."""
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
            y[ch] = acc / (1.0 + np.exp(-acc))
            for j in range(W - 2):
                hist[j][ch] = hist[j + 1][ch]
            hist[W - 2][ch] = xp[ch]
        act.append(y)
    f = ck.get(p + "f_b_proj.weight") @ (ck.get(p + "f_a_proj.weight") @ x)
    gt = ck.get(p + "g_b_proj.weight") @ (ck.get(p + "g_a_proj.weight") @ x)
    bl = ck.get(p + "b_proj.weight") @ x
    A_log = ck.get(p + "A_log").reshape(-1)
    dt = ck.get(p + "dt_bias").reshape(-1)
    onw = ck.get(p + "o_norm.weight")
    z = [0.0] * P
    for h in range(H):
        qh = act[0][h * K:(h + 1) * K]
        kh = act[1][h * K:(h + 1) * K]
        vh = act[2][h * K:(h + 1) * K]
        nq = np.sqrt(sum(a * a for a in qh) + 1e-6)
        nk = np.sqrt(sum(a * a for a in kh) + 1e-6)
        qh = [a / nq / np.sqrt(K) for a in qh]
        kh = [a / nk for a in kh]
        beta = 1.0 / (1.0 + np.exp(-bl[h]))
        A = np.exp(A_log[h])
        S = st_["S"][h]
        for i in range(K):
            zz = f[h * K + i] + dt[h * K + i]
            sp = zz if zz > 20 else np.log(1.0 + np.exp(zz))
            alpha = np.exp(-A * sp)
            for j in range(K):
                S[i][j] *= alpha
        u = [beta * (vh[j] - sum(S[i][j] * kh[i] for i in range(K))) for j in range(K)]
        for i in range(K):
            for j in range(K):
                S[i][j] += kh[i] * u[j]
        o = [sum(S[i][j] * qh[i] for i in range(K)) for j in range(K)]
        r = 1.0 / np.sqrt(sum(a * a for a in o) / K + c.eps)
        for j in range(K):
            z[h * K + j] = o[j] * r * onw[j] / (1.0 + np.exp(-gt[h * K + j]))
    return ck.get(p + "o_proj.weight") @ np.array(z)


def moe_literal(ck, L, x):
    """docs/MODEL.md, "FFN and router" moe() for one token with docs/ARCHITECTURE.md, "Numerics" weights (unbiased s); only for the self-test."""
    c = ck.config
    p = "model.layers.%d.block_sparse_moe." % L
    Wg, bias = ck.get(p + "gate.weight"), ck.get(p + "gate.e_score_correction_bias")
    s = [1.0 / (1.0 + np.exp(-float(Wg[e] @ x))) for e in range(c.n_experts)]
    sc = [s[e] + bias[e] for e in range(c.n_experts)]
    top = sorted(range(c.n_experts), key=lambda e: (-sc[e], e))[:c.topk]
    w = [s[e] for e in top]
    tot = sum(w)
    w = [wi / (tot + 1e-20) * c.scale for wi in w]

    def sw(pre, g, u, d):
        a = ck.get(pre + g) @ x
        return ck.get(pre + d) @ (a / (1.0 + np.exp(-a)) * (ck.get(pre + u) @ x))
    y = sum(wk * sw(p + "experts.%d." % e, "w1.weight", "w3.weight", "w2.weight") for wk, e in zip(w, top))
    return y + sw(p + "shared_experts.", "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def selftest():
    import tempfile
    import gen_ckpt
    results = []

    def check(name, ok, why=""):
        results.append(ok)
        print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
        sys.stdout.flush()

    rng = np.random.default_rng(1234)

    # (a) chunked KDA == recurrence, random inputs, short last chunk, non-zero initial state
    for (T, H, K, V, C) in [(151, 2, 16, 12, 64), (37, 3, 8, 8, 16), (5, 1, 8, 8, 64)]:
        q = l2norm(rng.normal(size=(T, H, K))) * K ** -0.5
        k = l2norm(rng.normal(size=(T, H, K)))
        v = rng.normal(size=(T, H, V))
        A = rng.uniform(1, 16, size=H)
        g = -A[None, :, None] * softplus(rng.normal(size=(T, H, K)) + rng.normal(-2, 1, size=(1, H, K)))
        beta = sigmoid(rng.normal(size=(T, H)))
        S0 = rng.normal(size=(H, K, V)) * 0.3
        o1, S1 = kda_recurrent(q, k, v, g, beta, S0)
        o2, S2 = kda_chunked(q, k, v, g, beta, S0, C)
        err = max(np.abs(o1 - o2).max(), np.abs(S1 - S2).max())
        check("kda_chunked_eq_recurrent_T%d_C%d" % (T, C), err < 1e-10, "max abs diff %.3g" % err)

    # random in-memory model
    args = gen_ckpt.parse_args(["unused", "--hidden", "64", "--layers", "5", "--kda-heads", "2",
                                "--kda-head-dim", "16", "--mla-heads", "3", "--kv-lora", "24",
                                "--nope", "8", "--rope", "4", "--v-dim", "12", "--experts", "6",
                                "--topk", "2", "--moe-inter", "16", "--dense-inter", "48",
                                "--vocab", "97", "--full-attn", "2,5", "--seed", "7"])
    cfg, tensors = gen_ckpt.make_model(args)
    ck = DictCheckpoint(cfg, tensors)
    model = Model(ck)

    # (b) naive MLA == absorbed MLA
    x = rng.normal(size=(9, 64))
    for L in (1, 4):
        a1 = mla_layer(ck, L, x, {})
        a2 = mla_absorbed(ck, L, x)
        err = np.abs(a1 - a2).max() / np.abs(a1).max()
        check("mla_naive_eq_absorbed_layer%d" % L, err < 1e-12, "max rel diff %.3g" % err)

    # vectorised KDA layer == literal transcription of the docs/MODEL.md, "KDA" pseudocode, token by token
    x = rng.normal(size=(7, 64))
    for L in (0, 3):
        a1 = kda_layer(ck, L, x, {})
        lit = {}
        a2 = np.stack([kda_step_literal(ck, L, x[t], lit) for t in range(7)])
        err = np.abs(a1 - a2).max() / np.abs(a1).max()
        check("kda_layer_eq_spec_pseudocode_layer%d" % L, err < 1e-12, "max rel diff %.3g" % err)
    a1 = ffn_layer(ck, 2, x)
    a2 = np.stack([moe_literal(ck, 2, x[t]) for t in range(7)])
    err = np.abs(a1 - a2).max() / np.abs(a1).max()
    check("moe_eq_spec_pseudocode", err < 1e-12, "max rel diff %.3g" % err)

    # (c) prefill == incremental (token by token, and prefill(T-k) + k steps)
    ids = rng.integers(0, 97, size=20)
    full = model.forward(ids)
    s = model.new_state()
    inc = np.concatenate([model.forward([t], s) for t in ids])
    err = np.abs(full - inc).max() / np.abs(full).max()
    check("prefill_eq_token_by_token", err < 1e-10, "max rel diff %.3g" % err)
    s = model.new_state()
    part = np.concatenate([model.forward(ids[:13], s)] + [model.forward([t], s) for t in ids[13:17]]
                          + [model.forward(ids[17:], s)])
    err = np.abs(full - part).max() / np.abs(full).max()
    check("prefill_eq_split_prefill_plus_decode", err < 1e-10, "max rel diff %.3g" % err)
    ok = np.std(full) > 0.1 and np.isfinite(full).all()
    check("logits_healthy", ok, "std %.3g" % np.std(full))
    used = [int((cnt > 0).sum()) for cnt in model.stats.values()]
    check("moe_uses_varied_experts", min(used) >= 3, "experts used per layer %r" % used)

    # MoE weights: selection by biased score, weights from unbiased score
    class C_:
        topk, renorm, scale = 2, True, 2.0
    logits = np.array([[2.0, 1.0, 0.0, -1.0]])
    idx, w = route(C_, logits, np.array([0.0, 0.0, 5.0, 0.0]))
    s = sigmoid(logits[0])
    expect = np.array([s[2], s[0]]) / (s[2] + s[0] + 1e-20) * 2.0
    check("moe_select_biased_weight_unbiased", list(idx[0]) == [2, 0] and np.allclose(w[0], expect),
          "idx %r w %r" % (idx[0], w[0]))

    # layer map of the real 48B config (docs/MODEL.md, "Tensors")
    real = {"model_type": "kimi_linear", "hidden_size": 2304, "num_hidden_layers": 27,
            "vocab_size": 163840, "num_attention_heads": 32, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "q_lora_rank": None,
            "linear_attn_config": {"kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19,
                                                  21, 22, 23, 25, 26],
                                   "full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128,
                                   "num_heads": 32, "short_conv_kernel_size": 4},
            "intermediate_size": 9216, "moe_intermediate_size": 1024, "num_experts": 256,
            "num_experts_per_token": 8, "num_shared_experts": 1, "first_k_dense_replace": 1,
            "moe_layer_freq": 1}
    rc = Config(real)
    got = "".join("K" if t == "kda" else "M" for t in rc.layer_types)
    ffn = "".join("E" if rc.is_moe(L) else "D" for L in range(27))
    check("layer_map_48b", got == "KKKMKKKMKKKMKKKMKKKMKKKMKKM" and ffn == "D" + "E" * 26, got + " " + ffn)

    # format decoders
    e = st.E4M3_TABLE
    ok = (e[0x38] == 1.0 and e[0x7E] == 448.0 and e[0x08] == 2.0 ** -6 and e[0x01] == 2.0 ** -9
          and e[0xB8] == -1.0 and np.isnan(e[0x7F]) and np.isnan(e[0xFF]) and e[0x3C] == 1.5)
    x = rng.normal(size=1000) * 100
    rt = e[st.f_to_e4m3_bits(x)]
    ok = ok and np.all(np.abs(rt - np.clip(x, -448, 448)) <= np.maximum(np.abs(x) / 16, 2.0 ** -10))
    bf = st.bf16_bits_to_f32(np.array([0x3F80, 0xC000, 0x0001, 0x7F80], dtype=np.uint16))
    ok = ok and list(bf[:3]) == [1.0, -2.0, np.float32(2.0 ** -133)] and np.isinf(bf[3])
    ok = ok and st.f32_to_bf16_bits(np.float32(1.0 + 2.0 ** -8))[()] == 0x3F80      # tie to even
    ok = ok and st.f32_to_bf16_bits(np.float32(1.0 + 3 * 2.0 ** -8))[()] == 0x3F82
    check("format_decoders", bool(ok))

    # checkpoint round trips through files: every tensor read back must equal what the writer stored
    # (after rounding to the stored dtype / fp8 dequantisation), and so must the logits
    with tempfile.TemporaryDirectory() as tmp:
        for dt, extra in [("f32", ["--shards", "3"]), ("f32", ["--shards", "2", "--no-index", "--conv-2d"]),
                          ("bf16", ["--shards", "3"]), ("f16", ["--shards", "1"]),
                          ("mixed", ["--shards", "4", "--tie"]), ("fp8", ["--shards", "2", "--hidden", "160"])]:
            d = os.path.join(tmp, dt + "_" + str(len(extra)))
            a2 = gen_ckpt.parse_args([d] + sys_args_of(args) + ["--dtype", dt] + extra)
            gen_ckpt.generate(a2, quiet=True)
            cfg2, want = gen_ckpt.decoded_model(a2)
            ck2 = Checkpoint(d)
            bad = [n for n in want if not np.array_equal(ck2.get(n), want[n])]
            extra_t = [n for n in ck2.where if n not in want and not n.endswith("weight_scale_inv")]
            lg = Model(ck2).forward(ids[:8])
            lw = Model(DictCheckpoint(cfg2, want)).forward(ids[:8])
            err = np.abs(lg - lw).max() / np.abs(lw).max()
            name = "checkpoint_roundtrip_%s%s" % (dt, "".join(x.replace("--", "_") for x in extra
                                                            if x.startswith("--")))
            check(name, not bad and not extra_t and err == 0.0,
                  "mismatched %r extra %r logits diff %.3g" % (bad[:3], extra_t[:3], err))
    import k3_ref
    k3_ref.selftest(check)
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return all(results)


def sys_args_of(args):
    """Re-serialise the model-shape arguments of a gen_ckpt namespace (for the round-trip test)."""
    return ["--hidden", str(args.hidden), "--layers", str(args.layers), "--kda-heads", str(args.kda_heads),
            "--kda-head-dim", str(args.kda_head_dim), "--mla-heads", str(args.mla_heads),
            "--kv-lora", str(args.kv_lora), "--nope", str(args.nope), "--rope", str(args.rope),
            "--v-dim", str(args.v_dim), "--experts", str(args.experts), "--topk", str(args.topk),
            "--moe-inter", str(args.moe_inter), "--dense-inter", str(args.dense_inter),
            "--vocab", str(args.vocab), "--full-attn", args.full_attn, "--seed", str(args.seed)]


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description="numpy float64 reference forward pass of Kimi Linear / Kimi K3")
    ap.add_argument("model_dir", nargs="?", help="HF checkpoint directory (config.json + *.safetensors)")
    ap.add_argument("--ids", help='token ids, space or comma separated, e.g. "1 2 3" (no BOS is added)')
    ap.add_argument("--out", help="write float32 LE logits [n_tokens x vocab] here")
    ap.add_argument("--greedy", type=int, default=0, metavar="N",
                    help="also generate N greedy tokens; print their ids on stdout")
    ap.add_argument("--stats", action="store_true", help="print logits/expert-usage statistics to stderr")
    ap.add_argument("--selftest", action="store_true", help="run the built-in checks")
    a = ap.parse_args(argv)
    if a.selftest:
        return 0 if selftest() else 1
    if not a.model_dir or a.ids is None:
        ap.error("MODEL_DIR and --ids are required (or --selftest)")
    ids = [int(t) for t in a.ids.replace(",", " ").split()]
    if not ids:
        ap.error("--ids is empty")
    t0 = time.time()
    try:
        model = load_model(a.model_dir)
        logits, gen = greedy(model, ids, a.greedy)
    except (ValueError, KeyError, OSError) as e:
        print("kimi_ref: %s" % e, file=sys.stderr)
        return 1
    if a.out:
        logits.astype("<f4").tofile(a.out)
    if a.greedy:
        print(" ".join(str(t) for t in gen))
    if a.stats:
        c = model.c
        print("kimi_ref: %d tokens, vocab %d, %.2fs; logits std %.4f min %.3f max %.3f"
              % (len(ids), c.vocab, time.time() - t0, logits.std(), logits.min(), logits.max()),
              file=sys.stderr)
        print("kimi_ref: layers %s" % "".join("K" if t == "kda" else "M" for t in c.layer_types),
              file=sys.stderr)
        for L, cnt in sorted(model.stats.items()):
            print("kimi_ref: layer %d expert picks %s" % (L, " ".join(str(int(x)) for x in cnt)),
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
