#!/usr/bin/python3
"""k3_gen.py - write a random tiny Kimi K3 checkpoint in the real K3 layout (gen_ckpt.py --arch k3).

Follows docs/MODEL.md, "Kimi K3": a kimi_k3 wrapper config with the decoder in
text_config (quantization_config inside it), tensors prefixed language_model., BF16 trunk with the docs/MODEL.md, "MXFP4 experts"
F32 exceptions (conv weights, dt_bias, A_log [alog_len], KDA o_norm, e_score_correction_bias), routed
experts as compressed-tensors MXFP4 (weight_packed U8 [rows, cols/2], weight_scale U8 [rows, cols/32]),
dummy vision_tower.* / mm_projector.* tensors in the last shard, shards named
model-0000i-of-00000N.safetensors (5-digit index, 6-digit total, as the release) with an index.
Each layer's trunk is one run inside one shard; all experts of a layer sit in one shard as contiguous
6-tensor pages in lexicographic name order (experts.0, experts.1, experts.10, ...), so NOT in numeric
id order (with <= 10 experts a seeded non-identity page permutation is used instead).

  gen_ckpt.py OUT_DIR --arch k3 [--hidden 64 --layers 7 --attn-res-block 2 --kda-heads 2
      --kda-head-dim 16 --mla-heads 2 --q-lora 32 --kv-lora 32 --nope 16 --rope 8 --v-dim 16
      --experts 12 --topk 3 --moe-inter 64 --latent HIDDEN/2 --dense-inter 128 --shared 2
      --scaling 1.0 --vocab 400 --shards 3 --dtype bf16|f32 --alog-len 128 --seed N
      --full-attn "4,6,7" --no-index --tie]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

PREFIX = "language_model."
GROUP = 32
E2M1_MAG = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
IGNORE = ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
          "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*"]        # docs/MODEL.md, "MXFP4 experts", verbatim


def parse_k3(argv):
    ap = argparse.ArgumentParser(description="write a random tiny Kimi K3 checkpoint (real K3 layout)")
    ap.add_argument("out_dir")
    ap.add_argument("--arch", default="k3", choices=["k3"])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--attn-res-block", type=int, default=2, help="attn_res_block_size")
    ap.add_argument("--kda-heads", type=int, default=2)
    ap.add_argument("--kda-head-dim", type=int, default=16)
    ap.add_argument("--conv", type=int, default=4, help="short_conv_kernel_size")
    ap.add_argument("--lower-bound", type=float, default=-5.0, help="gate_lower_bound")
    ap.add_argument("--alog-len", type=int, default=128,
                    help="stored A_log length (real: 128 for 96 heads; entries past the heads are 0)")
    ap.add_argument("--mla-heads", type=int, default=2)
    ap.add_argument("--q-lora", type=int, default=32)
    ap.add_argument("--kv-lora", type=int, default=32)
    ap.add_argument("--nope", type=int, default=16)
    ap.add_argument("--rope", type=int, default=8)
    ap.add_argument("--v-dim", type=int, default=16)
    ap.add_argument("--experts", type=int, default=12)
    ap.add_argument("--topk", type=int, default=3)
    ap.add_argument("--moe-inter", type=int, default=64)
    ap.add_argument("--latent", type=int, default=None, help="routed_expert_hidden_size (default hidden/2)")
    ap.add_argument("--dense-inter", type=int, default=128)
    ap.add_argument("--shared", type=int, default=2, help="num_shared_experts (fused, inter = moe_inter*shared)")
    ap.add_argument("--first-dense", type=int, default=1)
    ap.add_argument("--moe-freq", type=int, default=1)
    ap.add_argument("--scaling", type=float, default=1.0, help="routed_scaling_factor")
    ap.add_argument("--no-renorm", action="store_true")
    ap.add_argument("--situ-beta", type=float, default=4.0)
    ap.add_argument("--situ-linear-beta", type=float, default=25.0)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--vocab", type=int, default=400)
    ap.add_argument("--tie", action="store_true")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"],
                    help="bf16: the release's dtypes (docs/MODEL.md, 'MXFP4 experts'); f32: every non-expert tensor F32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full-attn", default=None,
                    help='1-based MLA layers (default: every 4th layer plus the last two)')
    ap.add_argument("--no-index", action="store_true")
    a = ap.parse_args(argv)
    if a.latent is None:
        a.latent = a.hidden // 2
    if a.full_attn is None:
        a.full_attn = ",".join(str(i) for i in range(1, a.layers + 1) if i % 4 == 0 or i >= a.layers - 1)
    for name, v in (("--latent", a.latent), ("--moe-inter", a.moe_inter)):
        if v % GROUP:
            raise SystemExit("gen_ckpt: %s %d must be a multiple of %d (MXFP4 groups)" % (name, v, GROUP))
    if a.alog_len < a.kda_heads:
        raise SystemExit("gen_ckpt: --alog-len must be >= --kda-heads")
    if not 1 <= a.topk <= a.experts:
        raise SystemExit("gen_ckpt: need 1 <= --topk <= --experts")
    return a


def shape_args(a):
    """Model-shape arguments of a parsed namespace (to regenerate the same model in another layout)."""
    out = []
    for k in ("hidden", "layers", "attn_res_block", "kda_heads", "kda_head_dim", "conv", "alog_len",
              "mla_heads", "q_lora", "kv_lora", "nope", "rope", "v_dim", "experts", "topk", "moe_inter",
              "latent", "dense_inter", "shared", "first_dense", "moe_freq", "scaling", "vocab", "seed",
              "full_attn", "lower_bound", "situ_beta", "situ_linear_beta", "eps"):
        out += ["--" + k.replace("_", "-"), str(getattr(a, k))]
    return out + (["--tie"] if a.tie else []) + (["--no-renorm"] if a.no_renorm else [])


def full_list(a):
    full = sorted(int(x) for x in a.full_attn.replace(" ", ",").split(",") if x)
    for i in full:
        if not 1 <= i <= a.layers:
            raise SystemExit("gen_ckpt: --full-attn layer %d outside 1..%d" % (i, a.layers))
    return full


def quant_config():
    """As the release (docs/MODEL.md, "MXFP4 experts"), in the standard compressed-tensors nesting."""
    w = {"num_bits": 4, "type": "float", "group_size": GROUP, "strategy": "group", "symmetric": True,
         "dynamic": False, "actorder": None, "block_structure": None, "scale_dtype": "torch.uint8",
         "zp_dtype": None, "observer": "minmax", "observer_kwargs": {}}
    return {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
            "quantization_status": "compressed", "global_compression_ratio": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": w, "input_activations": None,
                                          "output_activations": None, "format": "mxfp4-pack-quantized"}},
            "ignore": list(IGNORE), "kv_cache_scheme": None, "sparsity_config": {}}


def make_config(a):
    full = full_list(a)
    kda = [i for i in range(1, a.layers + 1) if i not in full]
    V = a.vocab
    text = {
        "model_type": "kimi_linear",
        "architectures": ["KimiLinearForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiLinearConfig",
                     "AutoModelForCausalLM": "modeling_kimi_linear.KimiLinearForCausalLM"},
        "vocab_size": V,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.mla_heads,
        "num_key_value_heads": a.mla_heads,
        "intermediate_size": a.dense_inter,
        "hidden_act": "situ",
        "activation_situ_beta": a.situ_beta,
        "activation_situ_linear_beta": a.situ_linear_beta,
        "rms_norm_eps": a.eps,
        "max_position_embeddings": 1048576,
        "q_lora_rank": a.q_lora,
        "kv_lora_rank": a.kv_lora,
        "qk_nope_head_dim": a.nope,
        "qk_rope_head_dim": a.rope,
        "v_head_dim": a.v_dim,
        "mla_use_nope": True,
        "mla_use_output_gate": True,
        "num_experts": a.experts,
        "num_experts_per_token": a.topk,
        "num_shared_experts": a.shared,
        "moe_intermediate_size": a.moe_inter,
        "routed_expert_hidden_size": a.latent,
        "latent_moe_use_norm": True,
        "moe_router_activation_func": "sigmoid",
        "moe_renormalize": not a.no_renorm,
        "routed_scaling_factor": a.scaling,
        "topk_method": "noaux_tc",
        "use_grouped_topk": True,
        "num_expert_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": a.first_dense,
        "moe_layer_freq": a.moe_freq,
        "attn_res_block_size": a.attn_res_block,
        "num_nextn_predict_layers": 0,
        "tie_word_embeddings": bool(a.tie),
        "linear_attn_config": {
            "num_heads": a.kda_heads,
            "head_dim": a.kda_head_dim,
            "short_conv_kernel_size": a.conv,
            "gate_lower_bound": a.lower_bound,
            "use_full_rank_gate": True,
            "full_attn_layers": full,
            "kda_layers": kda,
        },
        "bos_token_id": V - 256 if V > 256 else 0,
        "eos_token_id": V - 254 if V > 256 else 1,
        "pad_token_id": V - 1,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "quantization_config": quant_config(),
    }
    return {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiK3Config",
                     "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration"},
        "model_type": "kimi_k3",
        "bos_token_id": text["bos_token_id"],
        "eos_token_id": text["eos_token_id"],
        "pad_token_id": text["pad_token_id"],
        "media_placeholder_token_id": min(V - 1, 163605),
        "image_placeholder": "<|kimi_image_placeholder|>",
        "vt_num_hidden_layers": 1, "vt_hidden_size": 32, "vt_intermediate_size": 64,
        "vt_num_attention_heads": 2, "patch_size": 14, "mm_hidden_size": 32,
        "mm_projector_type": "patchmergerv2", "merge_type": "sd2_tpool", "merge_kernel_size": [2, 2],
        "pos_emb_type": "divided_fixed",
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
        "text_config": text,
    }


def quant_mxfp4(w):
    """float [rows, cols] -> (packed U8 [rows, cols/2], scale U8 [rows, cols/32], decoded float64).
    Per group of 32 along the columns: E8M0 exponent so that amax/2^e <= 6, nearest E2M1 magnitude,
    sign bit from the value (a small negative becomes -0, nibble 8). Scale bytes stay in 1..254."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // GROUP, GROUP)
    amax = np.maximum(np.abs(g).max(axis=2), 1e-30)
    e = np.clip(np.ceil(np.log2(amax / 6.0)), -126, 127).astype(np.int64)
    y = g / np.ldexp(1.0, e)[:, :, None]
    mag = np.argmin(np.abs(np.abs(y)[..., None] - E2M1_MAG), axis=-1)
    nib = (mag | np.where(y < 0, 8, 0)).reshape(rows, cols).astype(np.uint8)
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)      # LOW nibble = EVEN column
    scale = (e + 127).astype(np.uint8)
    sign = np.where(nib & 8, -1.0, 1.0)
    dec = sign * E2M1_MAG[nib & 7] * np.repeat(np.ldexp(1.0, e), GROUP, axis=1)
    return packed, scale, dec


def make_model(a):
    """(config, {unprefixed name: float64}, {unprefixed expert module: (packed, scale)}).
    Expert float values are the exact MXFP4 decodings; other values are exact in float32."""
    cfg = make_config(a)
    full = cfg["text_config"]["linear_attn_config"]["full_attn_layers"]
    rng = np.random.default_rng(a.seed)
    t, q = {}, {}
    D = a.hidden
    H, K, W = a.kda_heads, a.kda_head_dim, a.conv
    P = H * K

    def lin(name, out, inp, gain=1.0):
        t[name] = rng.normal(0.0, gain / np.sqrt(inp), size=(out, inp))

    def norm(name, n):
        t[name] = 1.0 + 0.1 * rng.normal(size=n)

    def res(name):                 # AttnRes pair: norm weight [D] and proj [1, D] (scores O(1))
        norm(name + "_norm.weight", D)
        lin(name + "_proj.weight", 1, D, gain=1.5)

    t["model.embed_tokens.weight"] = rng.normal(0.0, 1.0 / np.sqrt(D) if a.tie else 1.0, size=(a.vocab, D))
    for L in range(a.layers):
        p = "model.layers.%d." % L
        norm(p + "input_layernorm.weight", D)
        norm(p + "post_attention_layernorm.weight", D)
        res(p + "self_attention_res")
        res(p + "mlp_res")
        s = p + "self_attn."
        if (L + 1) not in full:                     # KDA (docs/MODEL.md, "KDA in K3")
            for n in "qkv":
                lin(s + n + "_proj.weight", P, D)
                t[s + n + "_conv1d.weight"] = rng.normal(0.0, 0.5, size=(P, 1, W))
            lin(s + "f_a_proj.weight", K, D)
            lin(s + "f_b_proj.weight", P, K)
            lin(s + "b_proj.weight", H, D)
            alog = np.zeros(a.alog_len)
            alog[:H] = np.log(rng.uniform(0.5, 4.0, size=H))       # tail exactly 0, as released
            t[s + "A_log"] = alog
            t[s + "dt_bias"] = rng.normal(-1.0, 1.5, size=P)       # decays from ~e^-5 to ~1
            lin(s + "g_proj.weight", P, D)
            t[s + "o_norm.weight"] = 1.0 + 0.1 * rng.normal(size=K)
            lin(s + "o_proj.weight", D, P)
        else:                                       # gated MLA with q-LoRA (docs/MODEL.md, "Gated MLA with q-LoRA")
            lin(s + "q_a_proj.weight", a.q_lora, D)
            norm(s + "q_a_layernorm.weight", a.q_lora)
            lin(s + "q_b_proj.weight", a.mla_heads * (a.nope + a.rope), a.q_lora)
            lin(s + "kv_a_proj_with_mqa.weight", a.kv_lora + a.rope, D)
            norm(s + "kv_a_layernorm.weight", a.kv_lora)
            lin(s + "kv_b_proj.weight", a.mla_heads * (a.nope + a.v_dim), a.kv_lora)
            lin(s + "o_proj.weight", D, a.mla_heads * a.v_dim)
            lin(s + "g_proj.weight", a.mla_heads * a.v_dim, D)
        if not (L >= a.first_dense and L % a.moe_freq == 0):      # dense SiTU MLP (docs/MODEL.md, "Latent MoE and SiTU")
            lin(p + "mlp.gate_proj.weight", a.dense_inter, D, gain=2.5)
            lin(p + "mlp.up_proj.weight", a.dense_inter, D)
            lin(p + "mlp.down_proj.weight", D, a.dense_inter)
        else:                                       # Latent MoE (docs/MODEL.md, "Latent MoE and SiTU")
            m = p + "block_sparse_moe."
            lin(m + "gate.weight", a.experts, D)
            t[m + "gate.e_score_correction_bias"] = 0.1 * rng.normal(size=a.experts)
            lin(m + "routed_expert_down_proj.weight", a.latent, D)
            lin(m + "routed_expert_up_proj.weight", D, a.latent)
            norm(m + "routed_expert_norm.weight", a.latent)
            for e in range(a.experts):
                for wn, (o, i, gain) in (("w1", (a.moe_inter, a.latent, 2.5)), ("w2", (a.latent, a.moe_inter, 1.0)),
                                         ("w3", (a.moe_inter, a.latent, 1.0))):
                    name = m + "experts.%d.%s" % (e, wn)
                    w = rng.normal(0.0, gain / np.sqrt(i), size=(o, i))
                    w *= np.repeat(np.exp2(rng.uniform(-1.5, 1.5, size=(o, i // GROUP))), GROUP, axis=1)
                    pk, sc, dec = quant_mxfp4(w)      # per-group spread -> varied E8M0 bytes
                    q[name] = (pk, sc)
                    t[name + ".weight"] = dec
            if a.shared > 0:
                si = a.moe_inter * a.shared
                lin(m + "shared_experts.gate_proj.weight", si, D, gain=2.5)
                lin(m + "shared_experts.up_proj.weight", si, D)
                lin(m + "shared_experts.down_proj.weight", D, si)
    norm("model.norm.weight", D)
    res("model.output_attn_res")
    if not a.tie:
        lin("lm_head.weight", a.vocab, D)
    for k in t:
        if k[:-len(".weight")] not in q:
            t[k] = t[k].astype(np.float32).astype(np.float64)
    return cfg, t, q


F32_SUFFIXES = ("conv1d.weight", "dt_bias", "A_log", "e_score_correction_bias", "self_attn.o_norm.weight")


def dtype_for(name, mode):
    """docs/MODEL.md, "MXFP4 experts": F32 for the KDA conv weights, dt_bias, A_log, KDA o_norm, e_score_correction_bias;
    BF16 for everything else (matrices, RMSNorm weights, *_res_proj rows)."""
    if mode == "f32" or name.endswith(F32_SUFFIXES):
        return "F32"
    return "BF16"


def vision_items(cfg):
    """A few dummy vision tensors; a text-only reader must ignore them. One is named so that a reader
    that strips any first name component would collide with language_model.model.norm.weight."""
    D = cfg["text_config"]["hidden_size"]
    rng = np.random.default_rng(99)
    return {
        "vision_tower.patch_embed.proj.weight": (rng.normal(size=(32, 3, 14, 14)), "BF16"),
        "vision_tower.encoder.blocks.0.attn.qkv.weight": (rng.normal(size=(96, 32)), "BF16"),
        "vision_tower.encoder.blocks.0.norm0.weight": (np.ones(32), "F32"),
        "vision_tower.model.norm.weight": (np.zeros(D), "BF16"),
        "mm_projector.pre_norm.weight": (np.ones(32), "F32"),
        "mm_projector.proj.0.weight": (rng.normal(size=(64, 128)), "BF16"),
    }


def stored_items(a):
    """(config, {full tensor name: (array, dtype)}) exactly as generate() writes them."""
    cfg, t, q = make_model(a)
    items = {}
    for name, arr in t.items():
        mod = name[:-len(".weight")]
        if mod in q:
            items[PREFIX + mod + ".weight_packed"] = (q[mod][0], "U8")
            items[PREFIX + mod + ".weight_scale"] = (q[mod][1], "U8")
        else:
            items[PREFIX + name] = (arr, dtype_for(name, a.dtype))
    items.update(vision_items(cfg))
    return cfg, items


def decoded_model(a):
    """(config, {unprefixed name: float64}) as a correct reader must see the written checkpoint:
    rounded to the stored dtypes, MXFP4 experts decoded (exposed as X.weight)."""
    cfg, t, q = make_model(a)
    out = {}
    for name, arr in t.items():
        if name[:-len(".weight")] in q:
            out[name] = arr
        else:
            dt = dtype_for(name, a.dtype)
            out[name] = st.decode(st.encode(arr, dt), dt, arr.shape)
    return cfg, out


def units(a, items):
    """Ordered list of (kind, [names in data order]) runs: embed, per layer trunk and experts, tail,
    vision."""
    rng = np.random.default_rng(a.seed + 7919)
    text = sorted(n for n in items if n.startswith(PREFIX))
    out = [("text", [PREFIX + "model.embed_tokens.weight"])]
    for L in range(a.layers):
        p = PREFIX + "model.layers.%d." % L
        mine = [n for n in text if n.startswith(p)]
        ex = [n for n in mine if ".experts." in n]
        out.append(("text", [n for n in mine if n not in ex]))     # lexicographic, one run
        if ex:
            ids = sorted({int(n.split(".experts.")[1].split(".")[0]) for n in ex}, key=str)   # "0","1","10",..
            if ids == sorted(ids):                                 # <= 10 experts: force a non-id order
                while ids == sorted(ids):
                    ids = [int(i) for i in rng.permutation(ids)]
            page = {}
            for n in ex:
                page.setdefault(int(n.split(".experts.")[1].split(".")[0]), []).append(n)
            out.append(("text", [n for e in ids for n in sorted(page[e])]))  # w1p w1s w2p w2s w3p w3s
    tail = [PREFIX + n for n in ("model.norm.weight", "model.output_attn_res_norm.weight",
                                 "model.output_attn_res_proj.weight", "lm_head.weight") if PREFIX + n in items]
    out.append(("tail", tail))
    out.append(("vision", sorted(n for n in items if not n.startswith(PREFIX))))
    return out


def generate(a, quiet=False):
    cfg, items = stored_items(a)
    os.makedirs(a.out_dir, exist_ok=True)
    for fn in os.listdir(a.out_dir):
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(a.out_dir, fn))
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    nbytes = {n: int(np.prod(np.shape(v[0]))) * st.DTYPE_SIZE[v[1]] for n, v in items.items()}
    us = units(a, items)
    body = [u for u in us if u[0] == "text"]
    total = sum(nbytes[n] for _, ns in body for n in ns)
    nsh = max(1, min(a.shards, len(body) + 1))
    per = total / max(1, nsh - 1) if nsh > 1 else total
    shards = [[] for _ in range(nsh)]
    cum = 0
    for _, ns in body:                              # sequential, size-balanced; last shard = tail + vision
        i = min(int(cum // per), nsh - 2) if nsh > 1 else 0
        shards[i].extend(ns)
        cum += sum(nbytes[n] for n in ns)
    for kind, ns in us:
        if kind != "text":
            shards[-1].extend(ns)
    shards = [s for s in shards if s]
    nsh = len(shards)
    files = ["model-%05d-of-%06d.safetensors" % (i + 1, nsh) for i in range(nsh)]
    rng = np.random.default_rng(a.seed + 1000003)
    weight_map, total_bytes = {}, 0
    for fn, names in zip(files, shards):
        header_order = [names[j] for j in rng.permutation(len(names))]   # JSON order means nothing
        total_bytes += st.write(os.path.join(a.out_dir, fn), {n: items[n] for n in names}, data_order=names,
                                header_order=header_order, metadata={"format": "pt"})
        for n in names:
            weight_map[n] = fn
    if not a.no_index:
        with open(os.path.join(a.out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total_bytes},
                       "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}, f, indent=2)
            f.write("\n")
    if not quiet:
        full = cfg["text_config"]["linear_attn_config"]["full_attn_layers"]
        nq = sum(1 for n in items if n.endswith("weight_packed"))
        print("gen_ckpt: wrote %s (kimi_k3): %d tensors (%d MXFP4 experts, %d vision), %d bytes in %d shard(s), "
              "dtype %s, layers %s, AttnRes boundaries %s"
              % (a.out_dir, len(items), nq, sum(1 for n in items if not n.startswith(PREFIX)), total_bytes,
                 nsh, a.dtype, "".join("M" if (L + 1) in full else "K" for L in range(a.layers)),
                 ",".join(str(L) for L in range(0, a.layers, a.attn_res_block))))
    return cfg


def main(argv=None):
    generate(parse_k3(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
