#!/usr/bin/python3
"""gen_ckpt.py - write a random Kimi Linear checkpoint in exact Hugging Face layout.

An independent writer (numpy only, no code shared with the C engine), so the C loader can be tested
on checkpoints "written by another tool". Tensor names and shapes follow docs/MODEL.md, "Tensors":
A_log as [1,1,H,1], conv weights as [C,1,W] (or [C,W] with --conv-2d), experts as
block_sparse_moe.experts.E.w1/w2/w3, shared experts as shared_experts.gate_proj/up_proj/down_proj,
the dense MLP on layers < first_k_dense_replace as mlp.gate_proj/up_proj/down_proj.

Tensors are spread over the shards at random; inside every shard the data area and the JSON header
are in two different shuffled orders. model.safetensors.index.json is written unless --no-index.

  gen_ckpt.py OUT_DIR [--hidden 96 --layers 4 --kda-heads 2 --kda-head-dim 32 --mla-heads 2
      --kv-lora 32 --nope 16 --rope 8 --v-dim 16 --experts 8 --topk 2 --moe-inter 32
      --dense-inter 128 --shared 1 --vocab 400 --shards 3 --dtype bf16|f32|f16|mixed|fp8
      --seed N --full-attn "2,4" --first-dense 1 --conv 4 --no-index --conv-2d --tie]
  gen_ckpt.py OUT_DIR --arch k3 [...]    Kimi K3 layout; options and layout in k3_gen.py
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


def parse_args(argv):
    if arch_of(argv) == "k3":                 # Kimi K3: its own options (k3_gen.py)
        import k3_gen
        return k3_gen.parse_k3(argv)
    ap = argparse.ArgumentParser(description="write a random Kimi Linear checkpoint (HF layout); "
                                             "--arch k3 writes a Kimi K3 checkpoint (options: --arch k3 -h)")
    ap.add_argument("out_dir")
    ap.add_argument("--arch", default="kl", choices=["kl", "k3"],
                    help="kl = Kimi Linear (these options); k3 = Kimi K3 (see --arch k3 -h)")
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--kda-heads", type=int, default=2)
    ap.add_argument("--kda-head-dim", type=int, default=32)
    ap.add_argument("--conv", type=int, default=4, help="short_conv_kernel_size")
    ap.add_argument("--mla-heads", type=int, default=2)
    ap.add_argument("--kv-lora", type=int, default=32)
    ap.add_argument("--nope", type=int, default=16)
    ap.add_argument("--rope", type=int, default=8)
    ap.add_argument("--v-dim", type=int, default=16)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--moe-inter", type=int, default=32)
    ap.add_argument("--dense-inter", type=int, default=128)
    ap.add_argument("--shared", type=int, default=1, help="num_shared_experts (0 = none)")
    ap.add_argument("--first-dense", type=int, default=1, help="first_k_dense_replace")
    ap.add_argument("--moe-freq", type=int, default=1, help="moe_layer_freq")
    ap.add_argument("--scaling", type=float, default=2.446, help="routed_scaling_factor")
    ap.add_argument("--no-renorm", action="store_true", help="moe_renormalize = false")
    ap.add_argument("--eps", type=float, default=1e-5, help="rms_norm_eps")
    ap.add_argument("--vocab", type=int, default=400)
    ap.add_argument("--tie", action="store_true", help="tie_word_embeddings (no lm_head.weight)")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32", "f16", "mixed", "fp8"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full-attn", default=None,
                    help='1-based MLA layers, e.g. "2,4" (default: every 4th layer and the last one)')
    ap.add_argument("--no-index", action="store_true", help="do not write model.safetensors.index.json")
    ap.add_argument("--conv-2d", action="store_true", help="store conv weights as [C,W] instead of [C,1,W]")
    ap.add_argument("--tokenizer", action="store_true",
                    help="also write tiktoken.model and tokenizer_config.json (a byte-level BPE of --vocab ids, "
                         "the last 16 special), so converters that need the vocabulary can read the checkpoint")
    a = ap.parse_args(argv)
    if a.full_attn is None:
        a.full_attn = ",".join(str(i) for i in range(1, a.layers + 1) if i % 4 == 0 or i == a.layers)
    return a


def arch_of(argv):
    """--arch kl (Kimi Linear, the default) or k3 (Kimi K3, written by k3_gen.py)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--arch", default="kl", choices=["kl", "k3"])
    return pre.parse_known_args(argv)[0].arch


def make_config(a):
    full = sorted(int(x) for x in a.full_attn.replace(" ", ",").split(",") if x)
    for i in full:
        if not 1 <= i <= a.layers:
            raise SystemExit("gen_ckpt: --full-attn layer %d outside 1..%d" % (i, a.layers))
    kda = [i for i in range(1, a.layers + 1) if i not in full]
    V = a.vocab
    return {
        "architectures": ["KimiLinearForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_kimi.KimiLinearConfig",
                     "AutoModel": "modeling_kimi.KimiLinearModel",
                     "AutoModelForCausalLM": "modeling_kimi.KimiLinearForCausalLM"},
        "model_type": "kimi_linear",
        "dtype": "bfloat16",
        "torch_dtype": "bfloat16",
        "vocab_size": V,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.mla_heads,
        "num_key_value_heads": a.mla_heads,
        "head_dim": a.hidden // a.mla_heads,       # not used by any computation (docs/MODEL.md, "Tensors")
        "q_lora_rank": None,
        "kv_lora_rank": a.kv_lora,
        "qk_nope_head_dim": a.nope,
        "qk_rope_head_dim": a.rope,
        "v_head_dim": a.v_dim,
        "mla_use_nope": True,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "linear_attn_config": {
            "kda_layers": kda,
            "full_attn_layers": full,
            "head_dim": a.kda_head_dim,
            "num_heads": a.kda_heads,
            "short_conv_kernel_size": a.conv,
        },
        "hidden_act": "silu",
        "intermediate_size": a.dense_inter,
        "moe_intermediate_size": a.moe_inter,
        "num_experts": a.experts,
        "num_experts_per_token": a.topk,
        "num_shared_experts": a.shared,
        "first_k_dense_replace": a.first_dense,
        "moe_layer_freq": a.moe_freq,
        "moe_router_activation_func": "sigmoid",
        "moe_renormalize": not a.no_renorm,
        "routed_scaling_factor": a.scaling,
        "use_grouped_topk": True,
        "num_expert_group": 1,
        "topk_group": 1,
        "num_nextn_predict_layers": 0,
        "rms_norm_eps": a.eps,
        "tie_word_embeddings": bool(a.tie),
        "bos_token_id": V - 4,
        "eos_token_id": V - 2,
        "pad_token_id": V - 1,
        "initializer_range": 0.02,
        "use_cache": True,
        "transformers_version": "4.57.1",
    }


def make_model(a):
    """Return (config dict, {name: float64 array}). Values are exactly representable in float32."""
    cfg = make_config(a)
    rng = np.random.default_rng(a.seed)
    t = {}
    D = a.hidden

    def lin(name, out, inp):
        t[name] = rng.normal(0.0, 1.0 / np.sqrt(inp), size=(out, inp))

    def norm(name, n):
        t[name] = 1.0 + 0.1 * rng.normal(size=n)

    # untied: N(0,1) rows; tied: N(0,1/D) so that logits = E h stay O(1) and are not dominated by
    # the current token's own embedding (which makes greedy decoding repeat the input token)
    t["model.embed_tokens.weight"] = rng.normal(0.0, 1.0 / np.sqrt(D) if a.tie else 1.0, size=(a.vocab, D))
    full = cfg["linear_attn_config"]["full_attn_layers"]
    H, K, W = a.kda_heads, a.kda_head_dim, a.conv
    P = H * K
    for L in range(a.layers):
        p = "model.layers.%d." % L
        norm(p + "input_layernorm.weight", D)
        norm(p + "post_attention_layernorm.weight", D)
        s = p + "self_attn."
        if (L + 1) not in full:             # KDA (docs/MODEL.md, "Tensors")
            for n in "qkv":
                lin(s + n + "_proj.weight", P, D)
                shape = (P, W) if a.conv_2d else (P, 1, W)
                t[s + n + "_conv1d.weight"] = rng.normal(0.0, 0.5, size=shape)
            lin(s + "f_a_proj.weight", K, D)
            lin(s + "f_b_proj.weight", P, K)
            t[s + "dt_bias"] = rng.normal(-2.0, 1.0, size=P)   # mixed decays: fast and slow channels
            t[s + "A_log"] = np.log(rng.uniform(1.0, 16.0, size=(1, 1, H, 1)))
            lin(s + "b_proj.weight", H, D)
            lin(s + "g_a_proj.weight", K, D)
            lin(s + "g_b_proj.weight", P, K)
            norm(s + "o_norm.weight", K)
            lin(s + "o_proj.weight", D, P)
        else:                               # MLA (docs/MODEL.md, "Tensors")
            lin(s + "q_proj.weight", a.mla_heads * (a.nope + a.rope), D)
            lin(s + "kv_a_proj_with_mqa.weight", a.kv_lora + a.rope, D)
            norm(s + "kv_a_layernorm.weight", a.kv_lora)
            lin(s + "kv_b_proj.weight", a.mla_heads * (a.nope + a.v_dim), a.kv_lora)
            lin(s + "o_proj.weight", D, a.mla_heads * a.v_dim)
        moe = a.experts > 0 and L >= a.first_dense and L % a.moe_freq == 0
        if not moe:                         # dense SwiGLU (docs/MODEL.md, "Tensors")
            lin(p + "mlp.gate_proj.weight", a.dense_inter, D)
            lin(p + "mlp.up_proj.weight", a.dense_inter, D)
            lin(p + "mlp.down_proj.weight", D, a.dense_inter)
        else:
            m = p + "block_sparse_moe."
            lin(m + "gate.weight", a.experts, D)
            t[m + "gate.e_score_correction_bias"] = 0.1 * rng.normal(size=a.experts)
            for e in range(a.experts):
                lin(m + "experts.%d.w1.weight" % e, a.moe_inter, D)
                lin(m + "experts.%d.w2.weight" % e, D, a.moe_inter)
                lin(m + "experts.%d.w3.weight" % e, a.moe_inter, D)
            if a.shared > 0:
                si = a.moe_inter * a.shared
                lin(m + "shared_experts.gate_proj.weight", si, D)
                lin(m + "shared_experts.up_proj.weight", si, D)
                lin(m + "shared_experts.down_proj.weight", D, si)
    norm("model.norm.weight", D)
    if not a.tie:
        lin("lm_head.weight", a.vocab, D)
    for k in t:
        t[k] = t[k].astype(np.float32).astype(np.float64)
    return cfg, t


SMALL = ("layernorm.weight", "norm.weight", "A_log", "dt_bias", "conv1d.weight", "e_score_correction_bias")


def dtype_for(name, shape, mode):
    small = name.endswith(SMALL)
    if mode == "f32":
        return "F32"
    if mode == "f16":
        return "F16"
    if mode == "bf16":
        return "BF16"
    if mode == "fp8":
        if small:
            return "F32"
        if "embed_tokens" in name or name == "lm_head.weight" or name.endswith("gate.weight"):
            return "BF16"
        return "F8_E4M3"
    # mixed: big matrices bf16, small tensors f32, some of both in f16
    if small:
        return "F16" if name.endswith(("post_attention_layernorm.weight", "o_norm.weight")) else "F32"
    if "shared_experts" in name or name.endswith("b_proj.weight") or name == "lm_head.weight":
        return "F16"
    return "BF16"


def quant_fp8(w, block=128):
    """Block-wise E4M3 quantisation: returns (W8 as decoded float values, scale_inv [ceil(M/b), ceil(N/b)])."""
    M, N = w.shape
    gm, gn = (M + block - 1) // block, (N + block - 1) // block
    s = np.zeros((gm, gn))
    for i in range(gm):
        for j in range(gn):
            amax = np.abs(w[i * block:(i + 1) * block, j * block:(j + 1) * block]).max()
            s[i, j] = max(amax, 1e-12) / 448.0
    s = s.astype(np.float32).astype(np.float64)
    full = np.repeat(np.repeat(s, block, 0), block, 1)[:M, :N]
    return w / full, s


def stored_items(a):
    """(config, {name: (array, safetensors dtype)}) exactly as generate() writes them."""
    if getattr(a, "arch", "kl") == "k3":
        import k3_gen
        return k3_gen.stored_items(a)
    cfg, t = make_model(a)
    if a.dtype == "fp8":
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}
    items = {}
    for name, arr in t.items():
        dt = dtype_for(name, arr.shape, a.dtype)
        if dt == "F8_E4M3":
            q, s = quant_fp8(arr)
            items[name] = (q, dt)
            items[name[:-len("weight")] + "weight_scale_inv"] = (s, "F32")
        else:
            items[name] = (arr, dt)
    return cfg, items


def decoded_model(a):
    """(config, {name: float64}) as a correct reader must see the written checkpoint (after rounding
    to the stored dtypes and fp8 dequantisation)."""
    if getattr(a, "arch", "kl") == "k3":
        import k3_gen
        return k3_gen.decoded_model(a)
    cfg, items = stored_items(a)
    out = {}
    for name, (arr, dt) in items.items():
        if name.endswith("weight_scale_inv"):
            continue
        v = st.decode(st.encode(arr, dt), dt, arr.shape)
        sname = name[:-len("weight")] + "weight_scale_inv"
        if sname in items:
            s = items[sname][0]
            v = v * np.repeat(np.repeat(s, 128, 0), 128, 1)[:v.shape[0], :v.shape[1]]
        out[name] = v
    return cfg, out


# two-byte merges of common English pairs: each is formed from two single-byte ranks, so any prefix of
# the list is a valid BPE rank table
MERGE_PAIRS = ["th", "he", "in", "er", "an", " t", "re", "on", " a", "en", "at", "nd", "st", "es", " o",
               "or", "ed", "is", "it", "ar", " s", "te", "ng", "ou", " w", "al", "to", "le", "ha", " i",
               "se", "ti", "nt", "ve", "me", " b", "de", " c", "ri", "ne", "ea", " h", " f", "ro", "ll"]
TOKENIZER_SPECIALS = 16


def write_tokenizer(a, cfg):
    """tiktoken.model (256 byte ranks, then two-byte merges) and tokenizer_config.json with the last 16 ids
    special: config.json's bos (V-4), [EOS] (V-3, the tokenizer's eos), <|im_end|> (V-2, config eos)
    and [PAD] (V-1), as Kimi's tokenizer files lay them out."""
    import base64
    V = a.vocab
    n_base = V - TOKENIZER_SPECIALS
    if not 256 <= n_base <= 256 + len(MERGE_PAIRS):
        raise SystemExit("gen_ckpt: --tokenizer needs --vocab in %d..%d" % (256 + TOKENIZER_SPECIALS,
                                                                            256 + len(MERGE_PAIRS) + TOKENIZER_SPECIALS))
    ranks = [bytes([b]) for b in range(256)] + [m.encode() for m in MERGE_PAIRS[:n_base - 256]]
    with open(os.path.join(a.out_dir, "tiktoken.model"), "w") as f:
        for i, tok in enumerate(ranks):
            f.write("%s %d\n" % (base64.b64encode(tok).decode(), i))
    names = {V - 4: "[BOS]", V - 3: "[EOS]", V - 2: "<|im_end|>", V - 1: "[PAD]", n_base: "<|im_user|>",
             n_base + 1: "<|im_assistant|>", n_base + 2: "<|im_system|>", n_base + 3: "<|im_middle|>",
             n_base + 4: "[UNK]"}
    dec = {}
    for i in range(n_base, V):
        dec[str(i)] = {"content": names.get(i, "<|reserved_token_%d|>" % i), "lstrip": False,
                       "normalized": False, "rstrip": False, "single_word": False, "special": True}
    tc = {"added_tokens_decoder": dec, "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]",
          "unk_token": "[UNK]", "model_max_length": 1048576, "tokenizer_class": "TikTokenTokenizer"}
    with open(os.path.join(a.out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
        f.write("\n")


def generate(a, quiet=False):
    if getattr(a, "arch", "kl") == "k3":
        import k3_gen
        return k3_gen.generate(a, quiet)
    cfg, items = stored_items(a)
    if getattr(a, "tokenizer", False):
        cfg["model_max_length"] = 1048576     # the real config's context length (llama.cpp needs one)
    os.makedirs(a.out_dir, exist_ok=True)
    for fn in os.listdir(a.out_dir):      # stale shards from an earlier run would confuse loaders
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(a.out_dir, fn))
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    rng = np.random.default_rng(a.seed + 1000003)
    names = list(items.keys())
    nsh = max(1, min(a.shards, len(names)))
    perm = rng.permutation(len(names))
    shard_of = {}
    for i, j in enumerate(perm):            # first nsh tensors of the permutation seed each shard
        shard_of[names[j]] = i if i < nsh else int(rng.integers(nsh))
    if nsh == 1:
        files = ["model.safetensors"]
    else:
        files = ["model-%05d-of-%05d.safetensors" % (i + 1, nsh) for i in range(nsh)]
    weight_map, total = {}, 0
    for i, fn in enumerate(files):
        mine = [n for n in names if shard_of[n] == i]
        data_order = [mine[j] for j in rng.permutation(len(mine))]
        header_order = [mine[j] for j in rng.permutation(len(mine))]
        total += st.write(os.path.join(a.out_dir, fn), {n: items[n] for n in mine}, data_order=data_order,
                          header_order=header_order, metadata={"format": "pt"})
        for n in mine:
            weight_map[n] = fn
    if getattr(a, "tokenizer", False):
        write_tokenizer(a, cfg)
    if not a.no_index:
        wm = {k: weight_map[k] for k in sorted(weight_map)}
        with open(os.path.join(a.out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
            f.write("\n")
    if not quiet:
        nparam = sum(int(np.prod(v[0].shape)) for k, v in items.items() if not k.endswith("_scale_inv"))
        print("gen_ckpt: wrote %s: %d tensors, %d parameters, %d bytes in %d shard(s), dtype %s, layers %s"
              % (a.out_dir, len(items), nparam, total, nsh, a.dtype,
                 "".join("M" if (L + 1) in cfg["linear_attn_config"]["full_attn_layers"] else "K"
                         for L in range(a.layers))))
    return cfg


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.arch == "k3":
        import k3_gen
        k3_gen.generate(a)
        return 0
    if a.topk > a.experts and a.experts > 0:
        raise SystemExit("gen_ckpt: --topk > --experts")
    generate(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
