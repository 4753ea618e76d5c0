#!/usr/bin/env python3
"""bench_serve.py - figures for `k3 serve` (a benchmark: prints, never asserts).

  tools/bench_serve.py MODEL [--tokens N] [--history-tokens N] [--runs R]

1. Overhead per token: `k3 run MODEL --chat` against the same chat through
   `k3 serve` (streamed, greedy, N tokens), alternating, R runs each
   (default 7); the engine-side rate from the server log and the
   client-side rate; the ratio of each adjacent pair, and their median (a
   shared machine's load moves both sides of a pair alike); and within each
   request the client's ms/token minus the engine's: what the HTTP/SSE path
   costs per token, free of the load that moves run-to-run figures.
2. TTFT of a follow-up request (the first request's history plus one new
   message) on a server with state reuse and on one with --state-cache 0.
3. Queue: 8 concurrent streaming clients on one server (queue 16): each
   client's time to first token and total, and the server's total.
Servers listen on 127.0.0.1, a free port, and are stopped at the end.
"""
import http.client, json, re, statistics, subprocess, sys, threading, time

K3 = "./k3"
args = sys.argv[1:]
if not args:
    sys.exit(__doc__)
MODEL = args[0]
N = int(args[args.index("--tokens") + 1]) if "--tokens" in args else 128
HIST = int(args[args.index("--history-tokens") + 1]) if "--history-tokens" in args else 400
RUNS = int(args[args.index("--runs") + 1]) if "--runs" in args else 7
print("load average at the start:", open("/proc/loadavg").read().split()[:3])


def start(*extra):
    p = subprocess.Popen([K3, "serve", MODEL, "--port", "0", *extra], stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"127\.0\.0\.1:(\d+)", line)
    if not m:
        sys.exit("server did not start: " + line)
    log = []
    threading.Thread(target=lambda: [log.append(l) for l in p.stderr], daemon=True).start()
    return p, int(m.group(1)), log


def chat(port, messages, max_tokens, stream=True):
    """Returns (ttft_s, total_s, text, usage)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": MODEL.rstrip("/").split("/")[-1], "messages": messages, "max_tokens": max_tokens,
                       "temperature": 0, "stream": stream, "stream_options": {"include_usage": True}})
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, text, usage = None, "", None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("usage"):
            usage = j["usage"]
        for ch in j.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.time() - t0
                text += piece
    return ttft, time.time() - t0, text, usage


def local_rate(prompt):
    out = subprocess.run([K3, "run", MODEL, "--chat", "-p", prompt, "-n", str(N), "--temp", "0"],
                         capture_output=True, text=True).stderr
    m = re.search(r"generated (\d+) tokens, ([\d.]+) tok/s", out)
    return int(m.group(1)), float(m.group(2))


prompt = "Tell me a very long story"
srv, port, log = start()
chat(port, [{"role": "user", "content": "warm up"}], 4)
runs_local, runs_engine, runs_client = [], [], []
for i in range(RUNS):
    n, r = local_rate(prompt)
    runs_local.append(r)
    ttft, total, text, usage = chat(port, [{"role": "user", "content": prompt}], N)
    time.sleep(0.2)
    m = re.search(r"(\d+) generated, ([\d.]+) tok/s", log[-1])
    runs_engine.append(float(m.group(2)))
    gen = usage["completion_tokens"]
    runs_client.append((gen - 1) / (total - ttft) if gen > 1 and total > ttft else 0)
same = [1e3 / c - 1e3 / e for e, c in zip(runs_engine, runs_client) if c > 0 and e > 0]
print(f"1. serving cost per token within each request (client-side minus engine-side ms/token, the same stream): "
      f"{[round(x, 3) for x in same]}, median {statistics.median(same):.3f} ms "
      f"(engine side median {1e3 / statistics.median(runs_engine):.2f} ms/token)")
pair_engine = [l / e for l, e in zip(runs_local, runs_engine)]
pair_client = [l / c for l, c in zip(runs_local, runs_client) if c > 0]
print(f"1. per-pair ratio of ms/token, serve over run: engine side {[round(x, 3) for x in pair_engine]}, median "
      f"{statistics.median(pair_engine):.3f}; client side {[round(x, 3) for x in pair_client]}, median "
      f"{statistics.median(pair_client):.3f}")
ml, me, mc = statistics.median(runs_local), statistics.median(runs_engine), statistics.median(runs_client)
print(f"1. decode, {n} tokens greedy: k3 run {ml:.1f} tok/s ({1e3 / ml:.2f} ms/token); k3 serve engine side "
      f"{me:.1f} tok/s ({1e3 / me:.2f} ms/token), client side {mc:.1f} tok/s ({1e3 / mc:.2f} ms/token); "
      f"ratio serve/run per token: {ml / me:.3f} (engine), {ml / mc:.3f} (client)   "
      f"[runs: run {runs_local}, serve {runs_engine}, client {[round(x, 1) for x in runs_client]}]")

fresh, fport, flog = start("--state-cache", "0")
long_user = " ".join(["The quick brown fox jumps over the lazy dog."] * max(1, HIST // 10))
first = [{"role": "user", "content": long_user}]
res = {}
for name, p in (("state reuse", port), ("no state reuse", fport)):
    _, _, answer, u1 = chat(p, first, 32)
    follow = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    ttft, total, _, u2 = chat(p, follow, 8)
    res[name] = (ttft, u1["prompt_tokens"], u2["prompt_tokens"], u2["prompt_tokens_details"]["cached_tokens"])
for name, (ttft, p1, p2, cached) in res.items():
    print(f"2. follow-up TTFT, {name}: {ttft * 1e3:.0f} ms (prompt {p2} tokens, {cached} cached; first prompt {p1})")
fresh.terminate()

results = [None] * 8
def client(i):
    results[i] = chat(port, [{"role": "user", "content": f"Client {i} asks a question"}], 32)
t0 = time.time()
th = [threading.Thread(target=client, args=(i,)) for i in range(8)]
[t.start() for t in th]
[t.join() for t in th]
wall = time.time() - t0
ttfts = sorted(r[0] for r in results if r[0] is not None)
served = sum(1 for r in results if r[3] is not None)
print(f"3. 8 concurrent clients, up to 32 tokens each, one at a time: {served} of 8 answered in {wall:.2f} s "
      f"({len(ttfts)} with text); "
      f"TTFT min {ttfts[0] * 1e3:.0f} ms, median {statistics.median(ttfts) * 1e3:.0f} ms, max {ttfts[-1] * 1e3:.0f} ms "
      f"(the queue wait); per client total {', '.join(f'{r[1]:.2f}' for r in results)} s")
srv.terminate()
print("load average at the end:", open("/proc/loadavg").read().split()[:3])
