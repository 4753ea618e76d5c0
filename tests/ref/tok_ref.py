#!/usr/bin/python3
"""tok_ref.py - independent Python reference of the Kimi tokenizer.

Written from docs/MODEL.md, "Tokenizer and chat format" (not from the C code), using the `regex`
module, which supports the `&&` class intersection of the original pat_str in
its V1 mode. Run with /usr/bin/python3 (Debian's python3-regex).

usage:
  tok_ref.py DIR encode            text on stdin -> ids (special strings allowed)
  tok_ref.py DIR encode-plain      same, special strings encoded as text
  tok_ref.py DIR chat FILE.json    K2 chat framing + generation prompt -> ids
  tok_ref.py DIR decode "IDS"      ids -> text on stdout (no newline added)
  tok_ref.py DIR chat-xtml-think EFFORT FILE.json   K3 XTML with thinking at EFFORT (low..max)
  tok_ref.py DIR pretok            text on stdin -> pre-tokens, one per line, hex UTF-8
"""
import base64
import heapq
import json
import os
import sys

import regex

# docs/MODEL.md, "Tokenizer and chat format", alternatives joined with "|" in this order.
PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
PATTERN = regex.compile(PAT_STR, flags=regex.V1)

NUM_SPECIAL = 256 + 2          # num_reserved_special_tokens + 2 (docs/MODEL.md, "Tokenizer and chat format")
MAX_CHUNK_CHARS = 400_000      # tiktoken limit workaround (docs/MODEL.md, "Tokenizer and chat format")
MAX_RUN_CHARS = 25_000


class Tokenizer:
    def __init__(self, model_dir):
        self.ranks = {}
        with open(os.path.join(model_dir, "tiktoken.model"), "rb") as f:
            for line in f.read().splitlines():
                if not line:
                    continue
                token, rank = line.split()
                self.ranks[base64.b64decode(token)] = int(rank)
        self.n_base = len(self.ranks)
        self.id_to_bytes = {rank: tok for tok, rank in self.ranks.items()}
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        named = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
        self.special_to_id = {}
        for i in range(self.n_base, self.n_base + NUM_SPECIAL):
            self.special_to_id[named.get(i, f"<|reserved_token_{i}|>")] = i
        for name, i in self.special_to_id.items():
            self.id_to_bytes[i] = name.encode("utf-8")
        # Longest name first, so at one position the longest special wins.
        names = sorted(self.special_to_id, key=len, reverse=True)
        self.special_re = regex.compile("|".join(regex.escape(n) for n in names))

    # tiktoken's byte-pair merge: lowest-rank adjacent pair first, leftmost on ties.
    def bpe(self, piece):
        if piece in self.ranks:
            return [self.ranks[piece]]
        if len(piece) > 64:
            return self.bpe_long(piece)
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best_rank, best_i = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank, best_i = r, i
            if best_rank is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        return [self.ranks[p] for p in parts]

    def bpe_long(self, piece):
        """The same merge order for long pieces (25,000-char runs) without the
        quadratic rescan: a heap of (rank, start) with stale entries skipped.
        Parts are kept as start offsets linked by `nxt`."""
        n = len(piece)
        nxt = list(range(1, n + 2))
        prv = list(range(-1, n))
        alive = [True] * (n + 1)
        heap = []

        def pair(i):                   # rank of part i joined with the next part
            j = nxt[i]
            if j >= n:
                return None
            return self.ranks.get(piece[i:nxt[j]])

        for i in range(n - 1):
            r = pair(i)
            if r is not None:
                heap.append((r, i, i + 2))
        heapq.heapify(heap)
        while heap:
            r, i, end = heapq.heappop(heap)
            if not alive[i] or nxt[i] >= n or nxt[nxt[i]] != end:
                continue               # part i changed since this entry
            j = nxt[i]
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[j] <= n:
                prv[nxt[j]] = i
            for k in (i, prv[i]):
                if k >= 0:
                    rk = pair(k)
                    if rk is not None:
                        heapq.heappush(heap, (rk, k, nxt[nxt[k]]))
        ids, i = [], 0
        while i < n:
            ids.append(self.ranks[piece[i:nxt[i]]])
            i = nxt[i]
        return ids

    def encode_ordinary(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            ids.extend(self.bpe(piece.encode("utf-8")))
        return ids

    # One tiktoken encode() call: specials (if allowed) cut the text first.
    def encode_chunk(self, text, allow_special):
        if not allow_special:
            return self.encode_ordinary(text)
        ids, start = [], 0
        while True:
            m = self.special_re.search(text, start)
            end = m.start() if m else len(text)
            ids.extend(self.encode_ordinary(text[start:end]))
            if not m:
                return ids
            ids.append(self.special_to_id[m.group(0)])
            start = m.end()

    @staticmethod
    def split_runs(s, limit):
        """Cut so no piece holds more than `limit` consecutive whitespace or
        non-whitespace characters (str.isspace), as in docs/MODEL.md, "Tokenizer and chat format"."""
        run, is_space, start = 0, (s[0].isspace() if s else False), 0
        for i, ch in enumerate(s):
            now = ch.isspace()
            if now != is_space:
                run, is_space = 1, now
            else:
                run += 1
                if run > limit:
                    yield s[start:i]
                    start, run = i, 1
        yield s[start:]

    def encode(self, text, allow_special=True):
        ids = []
        for i in range(0, len(text), MAX_CHUNK_CHARS):
            for sub in self.split_runs(text[i:i + MAX_CHUNK_CHARS], MAX_RUN_CHARS):
                ids.extend(self.encode_chunk(sub, allow_special))
        return ids

    def decode(self, ids):
        data = b"".join(self.id_to_bytes.get(i, "\ufffd".encode()) for i in ids)
        return data.decode("utf-8", errors="replace")

    # docs/MODEL.md, "Tokenizer and chat format" K2 framing; no default system prompt, no [BOS].
    def chat(self, messages, add_generation_prompt=True):
        start_of = {"system": "<|im_system|>", "tool": "<|im_system|>",
                    "user": "<|im_user|>", "assistant": "<|im_assistant|>"}
        sp = self.special_to_id
        ids = []
        for m in messages:
            role = m["role"]
            ids.append(sp[start_of[role]])
            ids.extend(self.encode(role, allow_special=False))
            ids.append(sp["<|im_middle|>"])
            ids.extend(self.encode(m.get("content") or "", allow_special=False))
            ids.append(sp["<|im_end|>"])
        if add_generation_prompt:
            ids.append(sp["<|im_assistant|>"])
            ids.extend(self.encode("assistant", allow_special=False))
            ids.append(sp["<|im_middle|>"])
        return ids


    # Kimi K3 XTML (docs/MODEL.md, "XTML chat format"); every segment encoded on its own
    # with specials disallowed; structural markers are special ids. effort None = thinking
    # off; else (llama.cpp models/templates/Kimi-K3.jinja with thinking=true) an internal
    # thinking-effort system message first, a think block (reasoning trimmed) in every
    # assistant message, and the generation prompt opening "think".
    def chat_xtml(self, messages, add_generation_prompt=True, effort=None):
        sp = self.special_to_id
        ids = []

        def text(t):
            ids.extend(self.encode(t, allow_special=False))

        def open_(tag, attrs=()):
            ids.append(sp["<|open|>"])
            text(tag)
            for k, v in attrs:
                text(" " + k)
                text('="')
                text(v.replace("&", "&amp;").replace('"', "&quot;"))
                text('"')
            ids.append(sp["<|sep|>"])

        def close(tag):
            ids.append(sp["<|close|>"])
            text(tag)
            ids.append(sp["<|sep|>"])

        if effort is not None:
            open_("message", [("role", "system"), ("type", "thinking-effort")])
            text(("`thinking_effort` guides on how much to think in your thinking channel (not including "
                  "the response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
                  "Now the system is invoked with `thinking_effort=%s`." % effort).strip())
            close("message")
            ids.append(sp["<|end_of_msg|>"])
        for m in messages:
            open_("message", [("role", m["role"])])
            if m["role"] == "assistant":
                if effort is not None:
                    open_("think")
                    r = (m.get("reasoning_content") or "").strip()
                    if r:
                        text(r)
                    close("think")
                open_("response")
                text(m.get("content") or "")
                close("response")
            else:
                text(m.get("content") or "")
            close("message")
            ids.append(sp["<|end_of_msg|>"])
        if add_generation_prompt:
            open_("message", [("role", "assistant")])
            open_("think" if effort is not None else "response")
        return ids


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    tok = Tokenizer(argv[1])
    cmd = argv[2]
    if cmd in ("encode", "encode-plain", "pretok"):
        text = sys.stdin.buffer.read().decode("utf-8")
        if cmd == "pretok":
            for piece in PATTERN.findall(text):
                print(piece.encode("utf-8").hex())
            return 0
        print(" ".join(str(i) for i in tok.encode(text, allow_special=(cmd == "encode"))))
    elif cmd in ("chat", "chat-xtml", "chat-xtml-think"):
        with open(argv[-1], encoding="utf-8") as f:
            msgs = json.load(f)
        if cmd == "chat":
            ids = tok.chat(msgs)
        elif cmd == "chat-xtml":
            ids = tok.chat_xtml(msgs)
        else:
            ids = tok.chat_xtml(msgs, effort=argv[3])
        print(" ".join(str(i) for i in ids))
    elif cmd == "decode":
        ids = [int(x) for x in argv[3].replace(",", " ").split()]
        sys.stdout.buffer.write(tok.decode(ids).encode("utf-8"))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
