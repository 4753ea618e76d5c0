#!/usr/bin/python3
"""train_demo.py - train the demo model (models/k3-mini), a small Kimi K3, on CPU with PyTorch.

The forward pass is tests/ref/k3_ref.py (the independent numpy reference the engine is checked
against) ported to batched torch: AttnRes mixes over block snapshots, KDA with the safe gate
(g = lb*sigmoid(exp(A_log)*(f+dt_bias))) and the full-rank output gate, gated MLA with q-LoRA
(NoPE, naive decompressed form), the latent MoE (sigmoid router on the full width, top-k on
s + e_score_correction_bias, weights from the unbiased s, renormalised, routed experts in the
latent, RMSNorm of the weighted sum, up-projection, the fused shared expert added), SiTU-GLU in
every FFN. Training adds what MoE training uses: an auxiliary load-balancing loss and the
bias update of auxiliary-loss-free balancing; the final steps train through an MXFP4 fake
quantisation of the routed experts (straight-through), so the exported MXFP4 model loses little.

  train_demo.py train WORK_DIR OUT_DIR [--minutes M | --steps N] [--seed S] [--threads N]
      [--seq T] [--batch B] [--lr PEAK] [--warmup STEPS] [--copy-weight W] [--init MODEL_DIR]
      [--docs N] [--extra FILE] [--snapshot-min M]
      WORK_DIR holds train.jsonl/heldout.jsonl (tools/demo_corpus.py) and tok/ (the tokenizer
      `k3 gen --tokenizer-corpus` learned); OUT_DIR gets the checkpoint in the K3 release layout.
      --docs: how many of train.jsonl's first documents to train on (40000); their token ids are
      cached in WORK_DIR/train.jsonl.ids.npy (a cache of more documents serves a smaller N). --extra: every
      document of WORK_DIR/FILE too (the fourth run's copy.jsonl of `demo_corpus.py --copy-run`),
      shuffled in among them by the seed. --snapshot-min: export to OUT_DIR every M minutes as
      well, so a run stopped early leaves its latest weights.
  train_demo.py eval MODEL_DIR --ids "1 2 3" --out logits.f32 [--greedy N]
      float32 forward of an exported checkpoint (weights decoded by tests/ref/k3_ref.py), teacher
      forced; prints the greedy continuation (lowest id wins ties) like kimi_ref.py --greedy.
  train_demo.py loss MODEL_DIR WORK_DIR [--random | --unigram | --answer-head]
      held-out loss (nats/token) of the exported model; --random: of the same shapes, untrained;
      --unigram: of the training set's unigram distribution (add-one); --answer-head: loss and
      greedy accuracy on the dialogues' answers up to ' means' only (the copied question word).
  train_demo.py loss MODEL_DIR WORK_DIR --copy
      copy accuracy on WORK_DIR/copy_heldout.jsonl (`demo_corpus.py --copy-run`): loss on the
      answers, the fraction of answer tokens whose greedy prediction is right, and the fraction of
      dialogues whose every answer token (the end marker included) is: exactly those whose greedy
      answer reproduces the passage verbatim.

Deterministic given the seed and --steps N (torch.manual_seed, deterministic algorithms, one
thread): the schedule then follows the step count. With --minutes (what the shipped model used)
the schedule follows the wall clock, so the number of steps depends on the machine's speed.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ref"))
import k3_gen  # noqa: E402  (the K3 release config, MXFP4 quantiser, shard layout)
import k3_ref  # noqa: E402
import safetensors_np as st  # noqa: E402
import tok_ref  # noqa: E402

# One thread by default: on a machine with more runnable threads than cores a second torch thread
# mostly spin-waits (measured at a load average of 12 on 2 cores: 12-22 CPU seconds per training
# step with 2 threads against 1.0 with one, with the default OMP_WAIT_POLICY; not measured with
# OMP_WAIT_POLICY=passive, which tests/check.sh sets for the engine for the same reason).
THREADS = 1
GROUP = 32
E2M1_MAG = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])

# The model's shape: gen_ckpt-style arguments of tests/ref/k3_gen.py (its config writer is reused).
SHAPE = dict(hidden=96, layers=4, attn_res_block=2, kda_heads=2, kda_head_dim=32, conv=4,
             lower_bound=-5.0, alog_len=128, mla_heads=2, q_lora=48, kv_lora=48, nope=32, rope=16,
             v_dim=32, experts=16, topk=2, moe_inter=64, latent=64, dense_inter=192, shared=1,
             first_dense=1, moe_freq=1, scaling=1.0, no_renorm=False, situ_beta=4.0,
             situ_linear_beta=25.0, eps=1e-5, vocab=2048, tie=False, full_attn="2,4")


def shape_ns():
    class A:
        pass
    a = A()
    for k, v in SHAPE.items():
        setattr(a, k, v)
    return a


# ---------------------------------------------------------------------------------------------
# the forward pass (x is [B, T, D]; p is a dict of tensors named as the checkpoint, unprefixed)

def rmsnorm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def situ(g, u, beta, lbeta):
    return beta * torch.tanh(g / beta) * torch.sigmoid(g) * (lbeta * torch.tanh(u / lbeta))


def situ_mlp(c, x, wg, wu, wd):
    return situ(x @ wg.T, x @ wu.T, c.situ_beta, c.situ_lbeta) @ wd.T


def mxfp4_fake(w):
    """Round w [rows, cols] to MXFP4 exactly as k3_gen.quant_mxfp4 does (E8M0 scale per 32 columns,
    nearest E2M1 magnitude); the gradient passes straight through."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // GROUP, GROUP)
    amax = g.detach().abs().amax(-1).clamp_min(1e-30)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-126, 127)
    scale = torch.exp2(e)[..., None]
    y = (g / scale).detach()
    mag = E2M1_MAG.to(w.dtype)[torch.argmin((y.abs()[..., None] - E2M1_MAG.to(w.dtype)).abs(), -1)]
    q = (torch.sign(y) * mag * scale).reshape(rows, cols)
    return w + (q - w).detach()


def kda(c, p, s, x):
    B, T, _ = x.shape
    H, K, W = c.kda_heads, c.kda_dim, c.conv_w
    acts = []
    for n in "qkv":
        proj = (x @ p[s + n + "_proj.weight"].T).transpose(1, 2)              # [B, P, T]
        y = F.conv1d(F.pad(proj, (W - 1, 0)), p[s + n + "_conv1d.weight"].reshape(H * K, 1, W), groups=H * K)
        acts.append(F.silu(y.transpose(1, 2)).reshape(B, T, H, K))
    q, k, v = acts
    q = l2norm(q) * K ** -0.5
    k = l2norm(k)
    f = ((x @ p[s + "f_a_proj.weight"].T) @ p[s + "f_b_proj.weight"].T).reshape(B, T, H, K)
    A = torch.exp(p[s + "A_log"].reshape(-1)[:H])
    g = c.lower_bound * torch.sigmoid(A[:, None] * (f + p[s + "dt_bias"].reshape(H, K)))
    beta = torch.sigmoid(x @ p[s + "b_proj.weight"].T)                           # [B, T, H]
    decay = torch.exp(g)
    S = x.new_zeros(B, H, K, K)
    outs = []
    for t in range(T):                           # decay -> predict -> update -> read
        S = S * decay[:, t, :, :, None]
        pred = torch.einsum("bhkv,bhk->bhv", S, k[:, t])
        u = beta[:, t, :, None] * (v[:, t] - pred)
        S = S + k[:, t, :, :, None] * u[:, :, None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    o = torch.stack(outs, 1)                                                     # [B, T, H, K]
    gt = (x @ p[s + "g_proj.weight"].T).reshape(B, T, H, K)
    z = rmsnorm(o, p[s + "o_norm.weight"], c.eps) * torch.sigmoid(gt)
    return z.reshape(B, T, H * K) @ p[s + "o_proj.weight"].T


def mla(c, p, s, x):
    B, T, _ = x.shape
    Hm, dn, dr, dv, r = c.mla_heads, c.nope, c.rope, c.v_dim, c.kv_lora
    cq = rmsnorm(x @ p[s + "q_a_proj.weight"].T, p[s + "q_a_layernorm.weight"], k3_ref.MLA_Q_NORM_EPS)
    q = (cq @ p[s + "q_b_proj.weight"].T).reshape(B, T, Hm, dn + dr)
    ckv = x @ p[s + "kv_a_proj_with_mqa.weight"].T
    lat = rmsnorm(ckv[..., :r], p[s + "kv_a_layernorm.weight"], k3_ref.MLA_KV_NORM_EPS)
    kpe = ckv[..., r:]
    kvb = (lat @ p[s + "kv_b_proj.weight"].T).reshape(B, T, Hm, dn + dv)
    sc = (torch.einsum("bthd,bshd->bhts", q[..., :dn], kvb[..., :dn]) +
          torch.einsum("bthd,bsd->bhts", q[..., dn:], kpe)) * (dn + dr) ** -0.5
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    sc = sc.masked_fill(~mask, float("-inf"))
    pr = torch.softmax(sc, -1)
    o = torch.einsum("bhts,bshd->bthd", pr, kvb[..., dn:]).reshape(B, T, Hm * dv)
    o = o * torch.sigmoid(x @ p[s + "g_proj.weight"].T)
    return o @ p[s + "o_proj.weight"].T


def moe(c, p, s, x, aux, quant):
    B, T, D = x.shape
    xf = x.reshape(B * T, D)
    sc = torch.sigmoid(xf @ p[s + "gate.weight"].T)                              # [N, E]
    idx = torch.topk(sc.detach() + p[s + "gate.e_score_correction_bias"], c.topk, -1).indices
    w = sc.gather(1, idx)
    if c.renorm and c.topk > 1:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    w = w * c.scale
    if aux is not None:                          # switch-style balance: E * sum(load_i * mean prob_i)
        load = torch.zeros(c.n_experts).scatter_add(0, idx.reshape(-1), torch.ones(idx.numel())) / idx.numel()
        prob = (sc / sc.sum(-1, keepdim=True)).mean(0)
        aux.append((c.n_experts * (load * prob).sum(), load))
    zl = xf @ p[s + "routed_expert_down_proj.weight"].T                          # [N, latent]
    W1, W2, W3 = (p[s + "experts." + n] for n in ("w1", "w2", "w3"))             # [E, out, in]
    if quant:
        W1, W2, W3 = (torch.stack([mxfp4_fake(m) for m in Wx]) for Wx in (W1, W2, W3))
    N = xf.shape[0]
    flat, order = torch.sort(idx.reshape(-1), stable=True)                      # (token, slot) by expert
    token = torch.arange(N).repeat_interleave(c.topk)[order]
    counts = torch.bincount(flat, minlength=c.n_experts).tolist()
    zs = zl[token]
    outs, at = [], 0
    for e, n in enumerate(counts):               # each expert on the rows routed to it
        if n:
            z = zs[at:at + n]
            outs.append(situ(z @ W1[e].T, z @ W3[e].T, c.situ_beta, c.situ_lbeta) @ W2[e].T)
            at += n
    ycat = torch.cat(outs) * w.reshape(-1)[order][:, None]
    acc = torch.zeros_like(zl).index_add(0, token, ycat)
    acc = rmsnorm(acc, p[s + "routed_expert_norm.weight"], c.eps)
    y = acc @ p[s + "routed_expert_up_proj.weight"].T
    q = s + "shared_experts."
    y = y + situ_mlp(c, xf, p[q + "gate_proj.weight"], p[q + "up_proj.weight"], p[q + "down_proj.weight"])
    return y.reshape(B, T, D)


def mix(sources, nw, pw, eps):
    V = torch.stack(sources)                                                     # [n, B, T, D]
    keys = V / torch.sqrt((V * V).mean(-1, keepdim=True) + eps)
    a = torch.softmax(keys @ (nw * pw.reshape(-1)), 0)
    return (a[..., None] * V).sum(0)


def forward(c, p, ids, aux=None, quant=False):
    """ids [B, T] -> logits [B, T, vocab] (tests/ref/k3_ref.py K3Model.forward, batched)."""
    h = p["model.embed_tokens.weight"][ids]
    Bs = []
    for L in range(c.n_layers):
        pre = "model.layers.%d." % L
        pin = h
        a = mix(Bs + [pin], p[pre + "self_attention_res_norm.weight"], p[pre + "self_attention_res_proj.weight"],
                c.eps) if Bs else pin
        part = pin
        if L % c.block == 0:
            Bs.append(pin)
            part = None
        xa = rmsnorm(a, p[pre + "input_layernorm.weight"], c.eps)
        y = (kda if c.layer_types[L] == "kda" else mla)(c, p, pre + "self_attn.", xa)
        part = y if part is None else part + y
        m = mix(Bs + [part], p[pre + "mlp_res_norm.weight"], p[pre + "mlp_res_proj.weight"], c.eps)
        xm = rmsnorm(m, p[pre + "post_attention_layernorm.weight"], c.eps)
        if c.is_moe(L):
            z = moe(c, p, pre + "block_sparse_moe.", xm, aux, quant)
        else:
            z = situ_mlp(c, xm, p[pre + "mlp.gate_proj.weight"], p[pre + "mlp.up_proj.weight"],
                         p[pre + "mlp.down_proj.weight"])
        h = part + z
    h = mix(Bs + [h], p["model.output_attn_res_norm.weight"], p["model.output_attn_res_proj.weight"], c.eps)
    return rmsnorm(h, p["model.norm.weight"], c.eps) @ p["lm_head.weight"].T


# ---------------------------------------------------------------------------------------------
# parameters: k3_gen.make_model's random K3 (its names and shapes), experts stacked per layer

def init_params(seed):
    a = shape_ns()
    a.seed = seed
    cfg, t, _ = k3_gen.make_model(a)
    c = k3_ref.K3Config(cfg)
    p = {}
    for name, arr in t.items():
        if ".experts." in name:
            continue
        p[name] = torch.tensor(arr, dtype=torch.float32)
    p["model.embed_tokens.weight"] *= 0.3
    p["lm_head.weight"] *= 0.5
    for L in range(c.n_layers):
        if not c.is_moe(L):
            continue
        s = "model.layers.%d.block_sparse_moe." % L
        p[s + "gate.e_score_correction_bias"].zero_()
        for n in ("w1", "w2", "w3"):
            p[s + "experts." + n] = torch.tensor(np.stack([t[s + "experts.%d.%s.weight" % (e, n)]
                                                           for e in range(c.n_experts)]), dtype=torch.float32)
    for k in p:
        if not k.endswith("e_score_correction_bias"):
            p[k].requires_grad_(True)
    return cfg, c, p


def unstack(c, p):
    """{unprefixed name: float64 numpy} with one tensor per expert, as the checkpoint names them."""
    out = {}
    for k, v in p.items():
        if ".experts." in k:
            s, n = k.split("experts.")
            for e in range(c.n_experts):
                out["%sexperts.%d.%s.weight" % (s, e, n)] = v[e].detach().double().numpy()
        else:
            out[k] = v.detach().double().numpy()
    return out


def load_params(model_dir):
    """An exported checkpoint as float32 torch tensors (decoded by the numpy reference's loader)."""
    ck = k3_ref.K3Checkpoint(model_dir)
    c = ck.config
    p = {}
    for name in sorted(ck.where):
        if name.endswith(("weight_packed", "weight_scale")):
            name = name[:-len("_packed")] if name.endswith("_packed") else name[:-len("_scale")]
        if name in p or ".experts." in name:
            continue
        p[name] = torch.tensor(ck.get(name), dtype=torch.float32)
    for L in range(c.n_layers):
        if c.is_moe(L):
            s = "model.layers.%d.block_sparse_moe." % L
            for n in ("w1", "w2", "w3"):
                p[s + "experts." + n] = torch.tensor(np.stack([ck.get(s + "experts.%d.%s.weight" % (e, n))
                                                               for e in range(c.n_experts)]), dtype=torch.float32)
    return c, p


# ---------------------------------------------------------------------------------------------
# data

class CachedTokenizer(tok_ref.Tokenizer):
    """tok_ref's encoder with a cache per pre-token (a corpus repeats its words)."""

    def __init__(self, d):
        super().__init__(d)
        self.memo = {}

    def bpe(self, piece):
        r = self.memo.get(piece)
        if r is None:
            r = self.memo[piece] = super().bpe(piece)
        return r


def encode_doc(tok, d, eos):
    if "chat" in d:
        return tok.chat_xtml([{"role": "user", "content": d["chat"][0]},
                              {"role": "assistant", "content": d["chat"][1]}], add_generation_prompt=False)
    return tok.encode(d["text"], allow_special=False) + [eos]


def load_docs(work, name, tok, eos, limit=None):
    cache = os.path.join(work, name + ".ids.npy")
    lens = np.load(cache[:-8] + ".lens.npy") if os.path.exists(cache) else None
    if lens is not None and (limit is None or len(lens) >= limit):
        flat = np.load(cache)                     # a cache of at least `limit` documents: its first
        lens = lens[:limit]                       # `limit` are the file's first `limit`
    else:
        seqs = []
        with open(os.path.join(work, name)) as f:
            for i, line in enumerate(f):
                if limit is not None and i >= limit:
                    break
                seqs.append(encode_doc(tok, json.loads(line), eos))
        flat = np.array([t for s in seqs for t in s], dtype=np.int32)
        lens = np.array([len(s) for s in seqs], dtype=np.int64)
        np.save(cache, flat)
        np.save(cache[:-8] + ".lens.npy", lens)
    offs = np.concatenate([[0], np.cumsum(lens)])
    return [flat[offs[i]:offs[i + 1]] for i in range(len(lens))]


def answer_head_weights(docs, tok, weight):
    """Per token of each document, the weight of predicting it: `weight` for a dialogue's answer up
    to and including its first ' means' (the copied question word: "The word 'harbour' means"), 1
    elsewhere. The copy is a few tokens of a hundred, so unweighted it hardly moves the loss."""
    sp = tok.special_to_id
    head = [sp["<|open|>"]] + tok.encode("response", allow_special=False) + [sp["<|sep|>"]]
    means = tok.encode(" means", allow_special=False)[0]
    out = []
    for d in docs:
        w = np.ones(len(d), dtype=np.float32)
        dl = list(d)
        for i in range(len(dl) - len(head) + 1):
            if dl[i:i + len(head)] == head:
                j = i + len(head)
                while j < len(dl) and dl[j] != means:
                    j += 1
                w[i + len(head):min(j + 1, len(dl))] = weight
                break
        out.append(w)
    return out


def pack(docs, T, pad, weights=None):
    """Rows of T+1 tokens, each starting at a document start; later documents fill the row and the
    last one is cut at its end (so a row carries no padding, and every row begins as a chat does).
    With weights (one array per document), also the rows of their weights (0 on padding)."""
    rows, cur, wrows, wcur = [], [], [], []
    for i, d in enumerate(docs):
        n = T + 1 - len(cur)
        cur = cur + list(d[:n])
        if weights is not None:
            wcur = wcur + list(weights[i][:n])
        if len(cur) == T + 1:
            rows.append(cur)
            wrows.append(wcur)
            cur, wcur = [], []
    if cur:
        rows.append(cur + [pad] * (T + 1 - len(cur)))
        wrows.append(wcur + [0.0] * (T + 1 - len(wcur)))
    if weights is None:
        return torch.tensor(rows, dtype=torch.long)
    return torch.tensor(rows, dtype=torch.long), torch.tensor(wrows, dtype=torch.float32)


def heldout_loss(c, p, rows, pad, quant=False, bs=32, only=None, with_accuracy=False):
    """Mean cross-entropy (nats/token) of rows' next tokens; only: a [rows, T] mask of the targets to
    count. with_accuracy: also the fraction whose greedy prediction is right (teacher forced)."""
    tot, n, right = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(rows), bs):
            r = rows[i:i + bs]
            lg = forward(c, p, r[:, :-1], quant=quant)
            tgt = r[:, 1:]
            keep = tgt != pad
            if only is not None:
                keep &= only[i:i + bs]
            tot += F.cross_entropy(lg[keep], tgt[keep], reduction="sum").item()
            right += int((lg[keep].argmax(-1) == tgt[keep]).sum())
            n += int(keep.sum())
    return (tot / n, right / n) if with_accuracy else tot / n


def copy_accuracy(c, p, tok, work, quant=False, bs=8):
    """(answer loss, token accuracy, verbatim fraction) on WORK/copy_heldout.jsonl, teacher forced.
    A dialogue counts as verbatim when the greedy prediction is right at every answer token and
    the end marker after it: then greedy decoding of the request yields the passage and stops,
    so no generation loop is needed to know it."""
    sp = tok.special_to_id
    head = [sp["<|open|>"]] + tok.encode("response", allow_special=False) + [sp["<|sep|>"]]
    pad = sp["[PAD]"]
    rows, masks = [], []
    with open(os.path.join(work, "copy_heldout.jsonl")) as f:
        for line in f:
            ids = encode_doc(tok, json.loads(line), sp["[EOS]"])
            i = next(j for j in range(len(ids)) if ids[j:j + len(head)] == head) + len(head)
            m = [False] * len(ids)
            for j in range(i, len(ids)):        # the answer and the end marker that follows it
                m[j] = True
                if ids[j] == sp["<|close|>"]:
                    break
            rows.append(ids)
            masks.append(m)
    tot, n, right, whole = 0.0, 0, 0, 0
    with torch.no_grad():
        for i in range(0, len(rows), bs):
            T = max(len(r) for r in rows[i:i + bs])
            r = torch.tensor([x + [pad] * (T - len(x)) for x in rows[i:i + bs]])
            m = torch.tensor([x + [False] * (T - len(x)) for x in masks[i:i + bs]])[:, 1:]
            lg = forward(c, p, r[:, :-1], quant=quant)
            tgt = r[:, 1:]
            tot += F.cross_entropy(lg[m], tgt[m], reduction="sum").item()
            ok = (lg.argmax(-1) == tgt) | ~m
            right += int((ok & m).sum())
            n += int(m.sum())
            whole += int(ok.all(-1).sum())
    return tot / n, right / n, whole / len(rows)


# ---------------------------------------------------------------------------------------------
# export: the K3 release layout of tests/ref/k3_gen.py (bf16 trunk with its F32 exceptions,
# MXFP4 routed experts, vision bait tensors, index), with our trained values

def export(c, p, cfg, out_dir, seed):
    a = shape_ns()
    a.seed = seed
    a.out_dir = out_dir
    a.shards = 2
    a.dtype = "bf16"
    a.no_index = False
    trained = unstack(c, p)
    real_make = k3_gen.make_model

    def make_trained(_a):
        q = {}
        t = dict(trained)
        for name in list(t):
            if ".experts." in name:
                pk, sc, dec = k3_gen.quant_mxfp4(t[name])
                q[name[:-len(".weight")]] = (pk, sc)
                t[name] = dec
        return cfg, t, q
    k3_gen.make_model = make_trained
    try:
        k3_gen.generate(a, quiet=True)
    finally:
        k3_gen.make_model = real_make


def write_checkpoint(c, p, cfg, out, seed, work):
    """The K3 release layout of p in OUT with the tokenizer of WORK and a generation config."""
    export(c, p, cfg, out, seed)
    for fn in ("tiktoken.model", "tokenizer_config.json"):
        with open(os.path.join(work, "tok", fn), "rb") as src, open(os.path.join(out, fn), "wb") as dst:
            dst.write(src.read())
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                   "max_length": 1048576}, f, indent=2)
        f.write("\n")


def bf16_round(p):
    """The trunk as the checkpoint stores it (bf16, F32 exceptions kept); experts unquantised."""
    out = {}
    for k, v in p.items():
        if ".experts." in k or k.endswith(k3_gen.F32_SUFFIXES):
            out[k] = v.detach().clone()
        else:
            out[k] = v.detach().to(torch.bfloat16).to(torch.float32)
    return out


# ---------------------------------------------------------------------------------------------
# commands

def setup(seed, threads=THREADS):
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)


def arg(argv, name, kind, default):
    return kind(argv[argv.index(name) + 1]) if name in argv else default


def cmd_train(argv):
    work, out = argv[0], argv[1]
    minutes = arg(argv, "--minutes", float, 40.0)
    seed = arg(argv, "--seed", int, 1)
    threads = arg(argv, "--threads", int, THREADS)
    T, BS = arg(argv, "--seq", int, 96), arg(argv, "--batch", int, 12)
    peak_lr = arg(argv, "--lr", float, 4e-3)
    warmup = arg(argv, "--warmup", int, 20)
    copy_w = arg(argv, "--copy-weight", float, 1.0)
    init = arg(argv, "--init", str, None)
    n_docs = arg(argv, "--docs", int, 40000)
    extra = arg(argv, "--extra", str, None)
    snapshot_s = arg(argv, "--snapshot-min", float, 0.0) * 60
    setup(seed, threads)
    tok = CachedTokenizer(os.path.join(work, "tok"))
    cfg, c, p = init_params(seed)
    if init is not None:                          # warm start: an exported checkpoint, decoded
        _, q = load_params(init)
        for k in p:
            if q[k].shape != p[k].shape:
                sys.exit("train_demo: %s in %s has shape %s, the model needs %s"
                         % (k, init, tuple(q[k].shape), tuple(p[k].shape)))
            with torch.no_grad():
                p[k].copy_(q[k])
    V = c.vocab
    if tok.n_base + 256 != V:
        sys.exit("train_demo: the tokenizer has %d ranks; the model's vocabulary is %d" % (tok.n_base, V))
    eos, pad = tok.special_to_id["[EOS]"], tok.special_to_id["[PAD]"]
    t0 = time.time()
    docs = load_docs(work, "train.jsonl", tok, eos, limit=n_docs)
    if extra is not None:                         # mixed in by a seeded shuffle of the documents
        docs = docs + load_docs(work, extra, tok, eos)
        docs = [docs[i] for i in torch.randperm(len(docs)).tolist()]
    train, train_w = pack(docs, T, pad, answer_head_weights(docs, tok, copy_w))
    held = pack(load_docs(work, "heldout.jsonl", tok, eos, limit=800), 96, pad)[:96]
    print("train_demo: %d training rows x %d tokens, %d held-out rows; data %.0f s"
          % (len(train), T + 1, len(held), time.time() - t0), flush=True)
    params = [v for k, v in p.items() if v.requires_grad]
    decay = [v for v in params if v.dim() >= 2]
    nodecay = [v for v in params if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95))
    budget_s = minutes * 60
    max_steps = arg(argv, "--steps", int, 0)
    qat_from = 0.85                               # the last 15% of the time trains through MXFP4
    order = torch.randperm(len(train))
    step, pos, start = 0, 0, time.time()
    next_snapshot_s = snapshot_s
    log = []
    while True:
        frac = step / max_steps if max_steps else (time.time() - start) / budget_s
        if frac >= 1.0:
            break
        lr = peak_lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for gparam in opt.param_groups:
            gparam["lr"] = lr
        if pos + BS > len(order):
            order, pos = torch.randperm(len(train)), 0
        batch = train[order[pos:pos + BS]]
        bw = train_w[order[pos:pos + BS]][:, 1:]
        pos += BS
        aux = []
        lg = forward(c, p, batch[:, :-1], aux=aux, quant=frac >= qat_from)
        tgt = batch[:, 1:]
        keep = tgt != pad
        ce_tok = F.cross_entropy(lg[keep], tgt[keep], reduction="none")
        ce = ce_tok.mean()                        # what the log reports: plain cross-entropy
        bal = sum(x[0] for x in aux) / len(aux)
        loss = (ce_tok * bw[keep]).sum() / bw[keep].sum() + 0.01 * bal
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():                     # auxiliary-loss-free balancing: nudge the selection bias
            li = 0
            for L in range(c.n_layers):
                if c.is_moe(L):
                    load = aux[li][1]
                    b = p["model.layers.%d.block_sparse_moe.gate.e_score_correction_bias" % L]
                    b += 1e-3 * torch.sign(load.mean() - load)
                    li += 1
        if step % 50 == 0:
            el = time.time() - start
            print("step %5d  %6.0f s  lr %.2e  loss %.3f  balance %.3f%s" % (step, el, lr, ce.item(), bal.item(),
                  "  (MXFP4 QAT)" if frac >= qat_from else ""), flush=True)
            log.append((step, round(el), round(ce.item(), 4)))
        step += 1
        if snapshot_s and time.time() - start >= next_snapshot_s:
            write_checkpoint(c, p, cfg, out, seed, work)
            print("train_demo: step %d exported to %s" % (step, out), flush=True)
            next_snapshot_s += snapshot_s
    wall = time.time() - start
    l_f32 = heldout_loss(c, p, held, pad)
    l_bf16 = heldout_loss(c, bf16_round(p), held, pad)
    l_mx = heldout_loss(c, bf16_round(p), held, pad, quant=True)
    print("train_demo: %d steps, %d tokens, %.0f s; held-out loss f32 %.4f, bf16 %.4f, bf16+MXFP4 %.4f"
          % (step, step * BS * T, wall, l_f32, l_bf16, l_mx), flush=True)
    copy = None
    if os.path.exists(os.path.join(work, "copy_heldout.jsonl")):
        copy = dict(zip(("loss", "token_accuracy", "verbatim"), copy_accuracy(c, bf16_round(p), tok, work, quant=True)))
        print("train_demo: copy (bf16+MXFP4) loss %.4f, tokens right %.4f, verbatim %.4f"
              % (copy["loss"], copy["token_accuracy"], copy["verbatim"]), flush=True)
    write_checkpoint(c, p, cfg, out, seed, work)
    with open(os.path.join(out, "training_log.json"), "w") as f:
        json.dump({"seed": seed, "threads": threads, "steps": step, "batch": BS, "seq": T, "lr": peak_lr,
                   "warmup": warmup, "copy_weight": copy_w, "init": init, "docs": n_docs, "extra": extra,
                   "tokens": step * BS * T, "wall_s": round(wall), "loss_curve": log,
                   "heldout_rows": len(held), "heldout_loss": {"f32": l_f32, "bf16": l_bf16,
                                                               "bf16_mxfp4_fake": l_mx},
                   "copy_heldout": copy}, f, indent=1)
        f.write("\n")


def cmd_eval(argv):
    setup(1)
    d = argv[0]
    ids = [int(x) for x in argv[argv.index("--ids") + 1].split()]
    out = argv[argv.index("--out") + 1]
    n = int(argv[argv.index("--greedy") + 1]) if "--greedy" in argv else 0
    c, p = load_params(d)
    with torch.no_grad():
        lg = forward(c, p, torch.tensor([ids]))[0]
        lg.numpy().astype("<f4").tofile(out)
        seq = list(ids)
        gen = []
        for _ in range(n):
            nxt = int(torch.argmax(forward(c, p, torch.tensor([seq]))[0, -1]))   # first max = lowest id
            gen.append(nxt)
            seq.append(nxt)
    if n:
        print(" ".join(str(i) for i in gen))


def cmd_loss(argv):
    setup(1)
    d, work = argv[0], argv[1]
    tok = CachedTokenizer(os.path.join(work, "tok"))
    eos, pad = tok.special_to_id["[EOS]"], tok.special_to_id["[PAD]"]
    docs = load_docs(work, "heldout.jsonl", tok, eos, limit=800)
    held, held_w = pack(docs, 96, pad, answer_head_weights(docs, tok, 2.0))
    held, held_w = held[:96], held_w[:96]
    if "--unigram" in argv:                      # add-one unigram of the training tokens
        counts = np.bincount(np.concatenate(load_docs(work, "train.jsonl", tok, eos, limit=40000)),
                             minlength=tok.n_base + 256).astype(np.float64) + 1.0
        logp = np.log(counts / counts.sum())
        tgt = held[:, 1:].reshape(-1).numpy()
        tgt = tgt[tgt != pad]
        print("%.4f" % -logp[tgt].mean())
        return
    if "--random" in argv:
        _, c, p = init_params(1)
        p = {k: v.detach() for k, v in p.items()}
    else:
        c, p = load_params(d)
    if "--copy" in argv:
        print("%.4f %.4f %.4f" % copy_accuracy(c, p, tok, work))
        return
    if "--answer-head" in argv:                  # only the answer up to ' means': the copied word
        loss, acc = heldout_loss(c, p, held, pad, only=held_w[:, 1:] > 1, with_accuracy=True)
        print("%.4f %.4f" % (loss, acc))
        return
    print("%.4f" % heldout_loss(c, p, held, pad))


def main(argv):
    cmds = {"train": cmd_train, "eval": cmd_eval, "loss": cmd_loss}
    if not argv or argv[0] not in cmds or len(argv) < 2:
        sys.exit(__doc__)
    cmds[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
