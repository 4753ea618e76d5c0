#!/usr/bin/python3
"""heldout_ids.py - the demo model's held-out text as token ids, for `k3 eval --ids`.

usage: heldout_ids.py WORK_DIR MODEL_DIR N
       heldout_ids.py WORK_DIR --text BYTES

WORK_DIR/heldout.jsonl is what `tools/demo_corpus.py WORK_DIR` writes (every 50th document, seeded;
the packages `tools/deps.sh --train` installs, torch aside). Its documents are encoded as
tools/train_demo.py encodes them for the held-out loss (a dialogue in the model's XTML chat framing,
a text followed by [EOS]; tests/ref/tok_ref.py with MODEL_DIR's tokenizer), one after the other, and
the first N ids are printed on one line. With --text: the same documents as plain text (a
dialogue's question and answer on two lines, a blank line between documents) up to the document
that reaches BYTES, for a model with another tokenizer (`k3 eval --text-file`). docs/PERFORMANCE.md ("Quality against the exact model") measures
`--activations q8` on them.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import tok_ref  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: heldout_ids.py WORK_DIR MODEL_DIR N | WORK_DIR --text BYTES")
    work, model, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if model == "--text":
        docs = []
        with open(os.path.join(work, "heldout.jsonl")) as f:
            for line in f:
                d = json.loads(line)
                docs.append(d["chat"][0] + "\n" + d["chat"][1] if "chat" in d else d["text"])
                if sum(len(x) for x in docs) > want:
                    break
        sys.stdout.write("\n\n".join(docs) + "\n")
        return
    tok = tok_ref.Tokenizer(model)
    eos = tok.special_to_id["[EOS]"]
    ids = []
    with open(os.path.join(work, "heldout.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            if "chat" in d:
                ids += tok.chat_xtml([{"role": "user", "content": d["chat"][0]},
                                      {"role": "assistant", "content": d["chat"][1]}], add_generation_prompt=False)
            else:
                ids += tok.encode(d["text"], allow_special=False) + [eos]
            if len(ids) >= want:
                break
    print(" ".join(str(i) for i in ids[:want]))


if __name__ == "__main__":
    main()
