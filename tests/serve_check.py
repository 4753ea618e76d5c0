#!/usr/bin/env python3
"""serve_check.py - small checks on k3 serve responses for tests/t_serve.sh.

  serve_check.py sse FILE            -> prints the streamed text as JSON, then
                                        finish_reason, then the usage (or null);
                                        exit 1 if the stream is malformed or has
                                        no [DONE]
  serve_check.py field FILE PATH     -> prints a field of a JSON file
                                        (PATH like choices.0.message.content)
  serve_check.py metrics FILE        -> checks the Prometheus text: every
                                        sample has a HELP/TYPE, histogram
                                        buckets are cumulative and +Inf ==
                                        _count; prints "name value" lines
"""
import json, re, sys


def field(obj, path):
    for p in path.split("."):
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    return obj


def sse(path):
    text, finish, usage, done = "", None, None, False
    data = open(path, encoding="utf-8").read()
    for block in data.split("\n\n"):
        if not block.strip():
            continue
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            if not line.startswith("data: "):
                sys.exit("malformed SSE line: %r" % line)
            payload = line[6:]
            if payload == "[DONE]":
                done = True
                continue
            if done:
                sys.exit("data after [DONE]")
            j = json.loads(payload)
            if "error" in j:
                sys.exit("stream error: %s" % j["error"]["message"])
            for c in j["choices"]:
                d = c.get("delta", {})
                text += d.get("content") or c.get("text") or ""
                if c.get("finish_reason"):
                    finish = c["finish_reason"]
            if j.get("usage"):
                usage = j["usage"]
    if not done:
        sys.exit("no [DONE]")
    print(json.dumps(text))
    print(finish)
    print(json.dumps(usage))


def metrics(path):
    typed, values = {}, {}
    buckets = {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            typed[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$', line)
        if not m:
            sys.exit("bad sample line: %r" % line)
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        base = re.sub(r'_(bucket|sum|count)$', '', name)
        if name not in typed and base not in typed:
            sys.exit("sample without TYPE: %s" % name)
        values[name + labels] = value
        if name.endswith("_bucket"):
            buckets.setdefault(base, []).append(value)
    for base, b in buckets.items():
        if any(b[i] > b[i + 1] for i in range(len(b) - 1)):
            sys.exit("buckets of %s are not cumulative" % base)
        if b[-1] != values[base + "_count"]:
            sys.exit("%s: +Inf bucket %g != count %g" % (base, b[-1], values[base + "_count"]))
    for k, v in values.items():
        print(k, int(v) if v == int(v) else v)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "sse":
        sse(sys.argv[2])
    elif cmd == "field":
        v = field(json.load(open(sys.argv[2])), sys.argv[3])
        print(json.dumps(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else v)
    elif cmd == "metrics":
        metrics(sys.argv[2])
