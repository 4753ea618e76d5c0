#!/usr/bin/python3
"""demo_corpus.py - the English corpus the demo model (models/k3-mini) is trained on.

Everything comes from Debian packages installed by `tools/deps.sh --train`:
  wordnet-base  /usr/share/wordnet/{index,data}.{noun,verb,adj,adv}   (WordNet 3.0 licence)
  dict-gcide    /usr/share/dictd/gcide.{index,dict.dz}                 (GPL-3+)
  fortunes      /usr/share/games/fortunes/*                            (BSD-style, see its copyright)

Two kinds of documents, one JSON object a line:
  {"chat": [question, answer]}   a dialogue built from WordNet: "What does 'harbour' mean?" ->
                                 "The word 'harbour' means a sheltered port where ships ...". The
                                 first sense of each lemma comes from index.* (senses are ranked by
                                 frequency there). The answer repeats the word after " '" as the
                                 question has it, so it is the same tokens in both and can be copied.
                                 Or a copy dialogue (a quarter of all documents): "Repeat this:
                                 PASSAGE" -> PASSAGE, 10-60 words of another document, verbatim.
  {"text": paragraph}            GCIDE definitions as prose, and fortunes.

  demo_corpus.py OUT_DIR [--seed N]
writes OUT_DIR/train.jsonl, OUT_DIR/heldout.jsonl (every 50th document, by a seeded shuffle) and
OUT_DIR/tokenizer.txt (the text of train.jsonl, what `k3 gen --tokenizer-corpus` learns merges from).
  demo_corpus.py OUT_DIR --copy-run N [--seed N]
then adds the copy-heavy mix of the fourth training run (copy_run below): OUT_DIR/copy.jsonl and
OUT_DIR/copy_heldout.jsonl, drawn from the files the first command wrote.
Deterministic: the same packages and seed give byte-identical files.
"""
import gzip
import json
import os
import random
import re
import sys

WORDNET = "/usr/share/wordnet"
GCIDE = "/usr/share/dictd/gcide.dict.dz"
FORTUNES = "/usr/share/games/fortunes"
POS = [("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r")]
QUESTIONS = ["What does '{w}' mean?", "What does {w} mean?", "What is the meaning of '{w}'?",
             "Define '{w}'.", "What does the word '{w}' mean?", "Can you tell me what '{w}' means?"]
REPEATS = ["Repeat this: ", "Repeat after me: ", "Please repeat exactly: ", "Say this back to me: "]
COPY_SHARE = 0.25                                       # of all documents, copy dialogues
COPY_RUN_WORDS = (20, 60)                               # --copy-run: passage length in words
COPY_RUN_SOURCES = 80000                                # --copy-run: train.jsonl's first documents
COPY_HELDOUT = 200                                      # --copy-run: held-out copy dialogues


def wordnet_data(pos):
    """offset -> (gloss definition, [examples]) of one data.POS file."""
    out = {}
    with open(os.path.join(WORDNET, "data." + pos), encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("  ") or "|" not in line:
                continue                                # the licence header
            head, gloss = line.split("|", 1)
            parts = [p.strip() for p in gloss.strip().split(";")]
            defs = [p for p in parts if p and not p.startswith('"')]
            exs = [p.strip('"') for p in parts if p.startswith('"')]
            if defs:
                out[head.split()[0]] = ("; ".join(defs), exs)
    return out


def wordnet_dialogues():
    """One dialogue per lemma (its two most frequent senses across parts of speech)."""
    senses = {}
    for pos, _ in POS:
        data = wordnet_data(pos)
        with open(os.path.join(WORDNET, "index." + pos), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                t = line.split()
                lemma, n_ptr = t[0], int(t[3])
                offsets = t[4 + n_ptr + 2:]
                for off in offsets[:2]:
                    if off in data:
                        senses.setdefault(lemma, []).append(data[off])
    docs = []
    for lemma in sorted(senses):
        if not re.fullmatch(r"[a-z][a-z_'-]*", lemma) or len(lemma) > 24:
            continue                                    # names, numbers, abbreviations
        w = lemma.replace("_", " ")
        (d1, ex1) = senses[lemma][0]
        ans = "The word '%s' means %s." % (w, d1)
        if ex1:
            ans += ' For example: "%s".' % ex1[0]
        if len(senses[lemma]) > 1 and senses[lemma][1][0] != d1:
            ans += " It can also mean %s." % senses[lemma][1][0]
        q = QUESTIONS[len(docs) % len(QUESTIONS)].format(w=w)
        docs.append({"chat": [q, ans]})
    return docs


def gcide_texts(limit_chars):
    """Numbered definitions of GCIDE entries as plain prose: 'Harbor, n. A place of security ...'."""
    raw = gzip.open(GCIDE).read().decode("utf-8", "replace")
    docs, total = [], 0
    for entry in raw.split("\n\n"):
        lines = [l.strip() for l in entry.split("\n") if l.strip() and "[1913 Webster]" not in l
                 and "[PJC]" not in l and "[Webster 1913 Suppl.]" not in l]
        if len(lines) < 2:
            continue
        m = re.match(r"^([A-Z][a-z]+)\s+\\[^\\]*\\,\s*([a-z. ]+?)[,.]", lines[0])
        if not m:
            continue
        body = " ".join(lines[1:])
        body = re.sub(r"\{([^}]*)\}", r"\1", body)
        body = re.sub(r"--[A-Z][\w. ]+\.?", "", body)   # --Shak. quotation sources
        body = re.sub(r"\[[^\]]*\]", "", body)
        body = re.sub(r"\s+", " ", body).strip()
        if len(body) < 30 or not re.match(r"^(1\. )?[A-Z(]", body):
            continue
        text = "%s, %s. %s" % (m.group(1), m.group(2).strip().rstrip("."), body[:600])
        if any(ord(c) > 127 for c in text):
            continue
        docs.append({"text": text})
        total += len(text)
        if total > limit_chars:
            break
    return docs


def fortune_texts():
    docs = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or os.path.islink(path) or name in ("art", "ascii-art", "translate-me"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for item in f.read().split("\n%\n"):
                item = item.strip()
                if 20 <= len(item) <= 700 and all(ord(c) < 128 for c in item):
                    docs.append({"text": item})
    return docs


def words_of(text):
    return re.sub(r"\s+", " ", text).strip().split(" ")


def copy_dialogues(sources, n, rng, lo=10, hi=60):
    """n dialogues "Repeat this: PASSAGE" -> PASSAGE, the passage verbatim: lo-hi words of one
    source document (a GCIDE entry, a fortune or a WordNet answer), whitespace made single
    spaces, starting at a sentence start where there is one. Copying is the skill that also makes
    a definition answer name the asked word (attention finds the earlier occurrence and repeats
    what followed it); a small model learns it far faster from plain copy data than from the few
    copied tokens of each definition."""
    docs = []
    while len(docs) < n:
        d = sources[rng.randrange(len(sources))]
        ws = words_of(d["chat"][1] if "chat" in d else d["text"])
        if len(ws) < lo:
            continue
        starts = [0] + [i + 1 for i, w in enumerate(ws[:-lo]) if w.endswith((".", "!", "?"))]
        at = starts[rng.randrange(len(starts))]
        k = min(len(ws) - at, rng.randint(lo, hi))
        if k < lo:
            continue
        passage = " ".join(ws[at:at + k])
        docs.append({"chat": [REPEATS[len(docs) % len(REPEATS)] + passage, passage]})
    return docs


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")


def is_copy(d):
    return "chat" in d and d["chat"][0].startswith(tuple(REPEATS))


def copy_run(out, n, seed):
    """The copy-heavy mix of the fourth training run: OUT/copy.jsonl, n copy dialogues of
    COPY_RUN_WORDS words whose passages come from train.jsonl's first documents (the ones the
    trainer reads; copy dialogues are not sources), and OUT/copy_heldout.jsonl, COPY_HELDOUT of
    them from heldout.jsonl, what `train_demo.py loss --copy` scores. The trainer mixes copy.jsonl
    into train.jsonl's documents (--extra). 20-60 words: passages as long as a paragraph a user
    asks to have repeated, and a dialogue still fits a training row of 320 tokens."""
    lo, hi = COPY_RUN_WORDS
    train = [d for d in read_jsonl(os.path.join(out, "train.jsonl"))[:COPY_RUN_SOURCES] if not is_copy(d)]
    held = [d for d in read_jsonl(os.path.join(out, "heldout.jsonl")) if not is_copy(d)]
    rng = random.Random(seed)
    write_jsonl(os.path.join(out, "copy.jsonl"), copy_dialogues(train, n, rng, lo, hi))
    write_jsonl(os.path.join(out, "copy_heldout.jsonl"), copy_dialogues(held, COPY_HELDOUT, rng, lo, hi))
    print("demo_corpus: %d copy dialogues from %d sources, %d held out from %d"
          % (n, len(train), COPY_HELDOUT, len(held)))


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: demo_corpus.py OUT_DIR [--seed N] [--copy-run N]")
    out = argv[0]
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
    if "--copy-run" in argv:
        copy_run(out, int(argv[argv.index("--copy-run") + 1]), seed)
        return
    for need in (WORDNET, GCIDE, FORTUNES):
        if not os.path.exists(need):
            sys.exit("demo_corpus: %s is missing (sh tools/deps.sh --train installs the corpus packages)" % need)
    docs = wordnet_dialogues() + gcide_texts(6_000_000) + fortune_texts()
    rng = random.Random(seed)
    docs += copy_dialogues(docs, int(len(docs) * COPY_SHARE / (1 - COPY_SHARE)), rng)
    rng.shuffle(docs)
    os.makedirs(out, exist_ok=True)
    held = docs[::50]
    train = [d for i, d in enumerate(docs) if i % 50]
    write_jsonl(os.path.join(out, "train.jsonl"), train)
    write_jsonl(os.path.join(out, "heldout.jsonl"), held)
    with open(os.path.join(out, "tokenizer.txt"), "w", encoding="utf-8") as f:
        for d in train:
            f.write(("\n".join(d["chat"]) if "chat" in d else d["text"]) + "\n")
    n_chat = sum(1 for d in docs if "chat" in d)
    chars = sum(len(json.dumps(d)) for d in docs)
    print("demo_corpus: %d documents (%d dialogues, %d texts), %.1f MB; %d held out"
          % (len(docs), n_chat, len(docs) - n_chat, chars / 1e6, len(held)))


if __name__ == "__main__":
    main(sys.argv[1:])
