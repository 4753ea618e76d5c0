#!/usr/bin/python3
"""gguf_vocab.py - a GGUF holding a model's Kimi tiktoken vocabulary, as llama.cpp's converter writes
it (docs/MODEL.md, "The vocabulary in a GGUF"), and bad variants of it for tests/t_gguf_vocab.sh.

Written from the converter's algorithm as docs/MODEL.md restates it, with the project's own writer
(gguf_np.gguf_bytes); stdlib only. The converter's steps: the ranks of tiktoken.model; each base
token spelled in GPT-2's byte-to-unicode alphabet; for each token of two or more bytes, byte-pair
merging its bytes under the lower ranks only, and a merge "A B" written when that ends in exactly
two parts; the specials of tokenization_kimi.py (ids n_base .. n_base+257, named by
tokenizer_config.json's added_tokens_decoder, else "<|reserved_token_ID|>"); then for every id below
config.json's vocab_size its token (type 1 normal, 3 control) or "[PADid]" (type 5 unused).

    gguf_vocab.py write MODEL_DIR OUT.gguf [DEFECT]   the vocabulary; with DEFECT, that bad variant
    gguf_vocab.py defects                             the defect names, one a line: NAME<TAB>the
                                                      message k3 must give
    gguf_vocab.py synthetic MODEL_DIR [N_BASE VOCAB]  a tokenizer-only model folder at Kimi's sizes
                                                      (163584 ranks, vocab_size 163840: the last two
                                                      special slots unwritten): tiktoken.model,
                                                      tokenizer_config.json, config.json
"""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_np import ARRAY, F32V, I32, STRING, U32, gguf_bytes  # noqa: E402

NUM_SPECIAL = 258


def byte_spelling():
    """GPT-2's byte -> character map: printable Latin-1 bytes as themselves, the other 68 bytes
    U+0100 upwards in byte order."""
    own = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    spell, n = {}, 0
    for b in range(256):
        if b in own:
            spell[b] = chr(b)
        else:
            spell[b] = chr(0x100 + n)
            n += 1
    return spell


SPELL = byte_spelling()


def spelled(token):
    return "".join(SPELL[b] for b in token)


def last_merge(ranks, token, rank):
    """Merge token's bytes by lowest rank, using only ranks below its own; the two parts left, or
    None when the merging stops elsewhere."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts if len(parts) == 2 else None


def read_model(model_dir):
    ranks = {}
    for line in open(os.path.join(model_dir, "tiktoken.model"), "rb").read().splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    added = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))["added_tokens_decoder"]
    names = {int(k): v["content"] for k, v in added.items()}
    config = json.load(open(os.path.join(model_dir, "config.json")))
    return ranks, names, config.get("text_config", config)   # Kimi K3 nests the language model's


def vocab_lists(model_dir):
    """tokens, types, merges, bos id, eos id as the converter makes them."""
    ranks, names, config = read_model(model_dir)
    n_base = len(ranks)
    merges = []
    for token, rank in ranks.items():          # file order: rank order
        if len(token) > 1:
            parts = last_merge(ranks, token, rank)
            if parts:
                merges.append(spelled(parts[0]) + " " + spelled(parts[1]))
    by_id = {rank: spelled(token) for token, rank in ranks.items()}
    specials = {i: names.get(i, "<|reserved_token_%d|>" % i) for i in range(n_base, n_base + NUM_SPECIAL)}
    tokens, types = [], []
    for i in range(config["vocab_size"]):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(1)
        elif i in specials:
            tokens.append(specials[i])
            types.append(3)
        else:
            tokens.append("[PAD%d]" % i)
            types.append(5)
    return tokens, types, merges, config.get("bos_token_id"), config.get("eos_token_id")


# name -> message k3 gives (a substring of its one line)
DEFECTS = {
    "model_llama": 'tokenizer.ggml.model is "llama"',
    "pre_other": 'tokenizer.ggml.pre is "llama-bpe"',
    "no_pre": "no tokenizer.ggml.pre",
    "no_tokens": "no tokenizer.ggml.tokens",
    "tokens_numbers": "tokenizer.ggml.tokens is not an array of strings",
    "types_short": "token types for",
    "types_float": "tokenizer.ggml.token_type is not an array of integers",
    "bad_spelling_space": "tokenizer.ggml.tokens[300] is not in GPT-2's byte-to-unicode spelling",
    "bad_spelling_han": "tokenizer.ggml.tokens[300] is not in GPT-2's byte-to-unicode spelling",
    "bad_utf8": "tokenizer.ggml.tokens[300] is not in GPT-2's byte-to-unicode spelling",
    "empty_token": "tokenizer.ggml.tokens[300] is empty",
    "duplicate_token": "token 301 has the same bytes as token 300",
    "swapped_ids": "the ids are not the tiktoken ranks k3 merges by",
    "missing_byte": "byte 0x41 has no token",
    "normal_after_special": "is 1 after the specials start",
    "user_defined": "is 4 after the specials start",
    "few_normal": "200 normal tokens before the first special",
    "no_merges": "no tokenizer.ggml.merges",
    "merge_unknown": "is not two tokens joining into a token",
    "merges_extra": "merges for",
    "special_empty": "'s name is empty",
    "special_twice": "named twice",
    "truncated": "runs past the end of the file",
}


def write(model_dir, out, defect=None):
    tokens, types, merges, bos, eos = vocab_lists(model_dir)
    n_base = types.index(3)
    model, pre, token_kv, type_kv = "gpt2", "kimi-k2", (STRING, tokens), (I32, types)
    if defect == "model_llama":
        model = "llama"
    elif defect == "pre_other":
        pre = "llama-bpe"
    elif defect == "tokens_numbers":
        token_kv = (I32, list(range(len(tokens))))
    elif defect == "types_short":
        type_kv = (I32, types[:-1])
    elif defect == "types_float":
        type_kv = (F32V, [float(t) for t in types])
    elif defect == "bad_spelling_space":
        tokens[300] = tokens[300][:1] + " " + tokens[300][1:]
    elif defect == "bad_spelling_han":
        tokens[300] = tokens[300][:1] + "\u4e2d"
    elif defect == "bad_utf8":
        tokens[300] = b"a\xc3("
    elif defect == "empty_token":
        tokens[300] = ""
    elif defect == "duplicate_token":
        tokens[301] = tokens[300]
    elif defect == "swapped_ids":
        # two merge results next to each other in the merges list, their ids exchanged
        joined = ["".join(m.split(" ")) for m in merges]
        k = next(k for k in range(len(joined) - 1) if tokens.index(joined[k + 1]) == tokens.index(joined[k]) + 1)
        a, b = tokens.index(joined[k]), tokens.index(joined[k + 1])
        tokens[a], tokens[b] = tokens[b], tokens[a]
    elif defect == "missing_byte":
        tokens[tokens.index("A")] = "A" * 40
    elif defect == "normal_after_special":
        types[n_base + 5] = 1
    elif defect == "user_defined":
        types[n_base + 5] = 4
    elif defect == "few_normal":
        types[200:n_base] = [3] * (n_base - 200)
    elif defect == "merge_unknown":
        merges[3] = "x \u0120\u0120\u0120\u0120\u0120\u0120zq"
    elif defect == "merges_extra":         # more merges than tokens of two or more bytes
        merges += merges[:300]
    elif defect == "special_empty":
        tokens[n_base + 3] = ""
    elif defect == "special_twice":
        tokens[n_base + 3] = tokens[n_base + 2]
    kvs = [("general.architecture", STRING, "kimi-linear"),
           ("tokenizer.ggml.model", STRING, model)]
    if defect != "no_pre":
        kvs.append(("tokenizer.ggml.pre", STRING, pre))
    if defect != "no_tokens":
        kvs.append(("tokenizer.ggml.tokens", ARRAY, token_kv))
    kvs.append(("tokenizer.ggml.token_type", ARRAY, type_kv))
    if defect != "no_merges":
        kvs.append(("tokenizer.ggml.merges", ARRAY, (STRING, merges)))
    if bos is not None:
        kvs.append(("tokenizer.ggml.bos_token_id", U32, bos))
    if eos is not None:
        kvs.append(("tokenizer.ggml.eos_token_id", U32, eos))
    data = gguf_bytes(kvs, [])
    if defect == "truncated":      # the file ends inside the tokens array
        data = data[:len(data) // 2]
    open(out, "wb").write(data)


def synthetic(model_dir, n_base=163584, vocab_size=163840, seed=11):
    """Ranks as a byte-level BPE trainer leaves them: the 256 bytes, then each new token the join of
    two earlier ones (at most 24 bytes, none twice), drawn with a fixed seed; Kimi's framing
    specials named as its tokenizer_config.json names them."""
    import random
    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    # favour common pieces: letters, space-prefixed words, digits, UTF-8 lead and continuation bytes
    hot = [bytes([b]) for b in b"etaoinshrdlucmfwypvbgkqjxz ETAOIN0123456789.,\n\t"] + [b" "] * 8
    while len(tokens) < n_base:
        a = tokens[rng.randrange(min(len(tokens), len(tokens) // 2 + 256))] if rng.random() < 0.7 else rng.choice(hot)
        b = rng.choice(tokens) if rng.random() < 0.5 else rng.choice(hot)
        t = a + b
        if len(t) <= 24 and t not in seen:
            seen.add(t)
            tokens.append(t)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "tiktoken.model"), "w") as f:
        for r, t in enumerate(tokens):
            f.write("%s %d\n" % (base64.b64encode(t).decode(), r))
    names = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", None, "<|start_header_id|>",
             "<|end_header_id|>", None, "[EOT]", "<|im_system|>", "<|tool_calls_section_begin|>",
             "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
             "<|tool_call_end|>", None, "<|im_middle|>"]
    added = {str(n_base + i): {"content": c, "special": True} for i, c in enumerate(names) if c}
    added[str(n_base + 254)] = {"content": "[UNK]", "special": True}
    added[str(n_base + 255)] = {"content": "[PAD]", "special": True}
    json.dump({"added_tokens_decoder": added, "bos_token": "[BOS]", "eos_token": "[EOS]"},
              open(os.path.join(model_dir, "tokenizer_config.json"), "w"), indent=1)
    json.dump({"model_type": "kimi_linear", "vocab_size": vocab_size, "bos_token_id": n_base,
               "eos_token_id": n_base + 1}, open(os.path.join(model_dir, "config.json"), "w"))


def main(argv):
    if argv[:1] == ["write"] and len(argv) in (3, 4):
        write(argv[1], argv[2], argv[3] if len(argv) == 4 else None)
    elif argv[:1] == ["synthetic"] and len(argv) in (2, 4):
        synthetic(argv[1], *[int(x) for x in argv[2:]])
    elif argv[:1] == ["defects"]:
        for name, msg in DEFECTS.items():
            print("%s\t%s" % (name, msg))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
