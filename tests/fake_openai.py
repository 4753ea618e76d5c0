#!/usr/bin/env python3
"""fake_openai.py - a tiny misbehaving OpenAI-compatible server for the fault
tests of `k3 chat --endpoint` (tests/t_endpoint.sh).

  fake_openai.py MODE [--metrics FILE] [--tls CERT KEY]
                         prints "port N" on stdout, serves 127.0.0.1:N,
                         exits by itself after 120 s

--metrics FILE serves FILE as /metrics (a vLLM or SGLang fixture), else
/metrics is a 404 as on a server without Prometheus. --tls serves HTTPS
with that certificate and key (python's ssl module).

MODE: ok (a good stream), malformed (garbage in the event stream), cut (the
connection closes mid-answer), slow (headers, then silence), 401 (wants key
"right-key"), 429 (two 429s with Retry-After: 1, then a good stream),
429forever, 500.

Thinking servers, each as its own source writes the stream (issue 29):
  vllm        vLLM >= 0.10: a role-only first chunk, delta.reasoning, then
              delta.content, a usage-only last chunk (choices: [])
              (vllm/entrypoints/openai/protocol.py DeltaMessage,
               vllm/entrypoints/openai/serving_chat.py)
  vllm_old    vLLM 0.8-0.9: delta.reasoning_content (same files, older)
  sglang      SGLang: delta.reasoning_content, usage on the finish chunk
              (python/sglang/srt/entrypoints/openai/serving_chat.py)
  llama       llama-server: delta.reasoning_content and a "timings" object
              on the last chunk (tools/server/server.cpp)
  think_length  reasoning until finish_reason "length", no answer
  tools       a tool_calls delta, finish_reason "tool_calls", no content
  onechunk    the whole answer in one chunk (usage: 50 tokens)
  flood       ignores max_tokens: 64 KiB content events without end
  models_flood  an endless /v1/models body
  nocompletions  /v1/completions is a 404 (chat only)
--record FILE appends each POST as {"path":..., "body":...} per line.
"""
import json, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
ARGS = sys.argv[2:]
METRICS = ARGS[ARGS.index("--metrics") + 1] if "--metrics" in ARGS else None
TLS = ARGS[ARGS.index("--tls") + 1:ARGS.index("--tls") + 3] if "--tls" in ARGS else None
RECORD = ARGS[ARGS.index("--record") + 1] if "--record" in ARGS else None
REASONING = ["The user", " greets me;", " answer", " briefly.", "\nKeep it short."]
ANSWER = ["Hello", " there."]
STATE = {"posts": 0}


def chunk(text=None, finish=None, usage=None):
    d = {"id": "fake-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
         "choices": [{"index": 0, "delta": {"content": text} if text is not None else {}, "finish_reason": finish}]}
    if usage:
        d["choices"] = []
        d["usage"] = usage
    return ("data: " + json.dumps(d) + "\n\n").encode()


def event(obj):
    return ("data: " + json.dumps(obj) + "\n\n").encode()


def delta_chunk(delta, finish=None, extra=None):
    d = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
         "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
    d.update(extra or {})
    return event(d)


def thinking_stream(w, mode):
    """The reasoning profiles: vllm, vllm_old, sglang, llama, think_length, tools."""
    field = "reasoning" if mode == "vllm" else "reasoning_content"
    usage = {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
    w.write(delta_chunk({"role": "assistant", "content": ""}))          # role-only first chunk
    if mode == "tools":
        w.write(delta_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                             "function": {"name": "get_weather", "arguments": ""}}]}))
        w.write(delta_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Paris\"}"}}]}))
        w.write(delta_chunk({}, "tool_calls"))
        w.write(b"data: [DONE]\n\n")
        return
    for piece in REASONING:
        d = {field: piece}
        if mode == "sglang":
            d["content"] = None
        w.write(delta_chunk(d))
        w.flush()
        time.sleep(0.01)
    time.sleep(0.3)                                   # thinking done: the answer comes later (TTFT is the first reasoning token)
    if mode == "think_length":
        w.write(delta_chunk({}, "length"))
        w.write(b"data: [DONE]\n\n")
        return
    for piece in ANSWER:
        w.write(delta_chunk({"content": piece}))
        w.flush()
        time.sleep(0.01)
    if mode == "sglang":
        w.write(delta_chunk({}, "stop", {"usage": usage}))
    elif mode == "llama":
        w.write(delta_chunk({}, "stop", {"usage": usage, "timings": {
            "prompt_n": 12, "prompt_ms": 30.5, "prompt_per_second": 393.4,
            "predicted_n": 6, "predicted_ms": 142.9, "predicted_per_token_ms": 23.8, "predicted_per_second": 42.0}}))
    else:
        w.write(delta_chunk({}, "stop"))
        w.write(event({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                       "choices": [], "usage": usage}))               # usage-only last chunk
    w.write(b"data: [DONE]\n\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models" and MODE == "models_flood":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"object":"list","data":[')
                for _ in range(256):                       # 64 MiB at most, unless the client hangs up
                    self.wfile.write(b'{"id":"x","object":"model"},' * 9000)
            except OSError:
                pass
            return
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        elif self.path == "/metrics" and METRICS:
            body = open(METRICS, "rb").read()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_json(404, {"error": {"message": "no such path"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        STATE["posts"] += 1
        if RECORD:
            with open(RECORD, "a") as f:
                f.write(json.dumps({"path": self.path, "body": json.loads(body or b"{}")}) + "\n")
        if self.path == "/v1/completions" and MODE == "nocompletions":
            return self.send_json(404, {"error": {"message": "Not Found"}})
        if MODE == "401" and self.headers.get("Authorization") != "Bearer right-key":
            return self.send_json(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
        if MODE == "500":
            return self.send_json(500, {"error": {"message": "the GPUs are on fire"}})
        if MODE == "429forever" or (MODE == "429" and STATE["posts"] <= 2):
            return self.send_json(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "1"})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        w = self.wfile
        if MODE == "slow":
            w.flush()
            time.sleep(60)
            return
        if MODE in ("vllm", "vllm_old", "sglang", "llama", "think_length", "tools"):
            thinking_stream(w, MODE)
            w.flush()
            return
        if MODE == "onechunk":
            w.write(delta_chunk({"role": "assistant", "content": "Hello from the fake server in one piece."}, "stop",
                                {"usage": {"prompt_tokens": 9, "completion_tokens": 50, "total_tokens": 59}}))
            w.write(b"data: [DONE]\n\n")
            w.flush()
            return
        if MODE == "flood":
            big = "x" * 65536
            try:
                for _ in range(4096):                      # 256 MiB at most, unless the client hangs up
                    w.write(delta_chunk({"content": big}))
            except OSError:
                pass
            return
        if self.path == "/v1/completions":
            for word in ["raw", " completion"]:
                w.write(event({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake",
                               "choices": [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}]}))
            w.write(event({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake",
                           "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}]}))
            w.write(b"data: [DONE]\n\n")
            w.flush()
            return
        for word in ["Hello", " from", " the", " fake", " server."]:
            w.write(chunk(word))
            w.flush()
            time.sleep(0.02)
            if MODE == "cut" and word == " the":
                self.close_connection = True
                return
            if MODE == "malformed" and word == " from":
                w.write(b"this is not an event\n\n")
                w.flush()
                time.sleep(0.5)
                return
        w.write(chunk(finish="stop"))
        w.write(chunk(usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}))
        w.write(b"data: [DONE]\n\n")
        w.flush()


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
if TLS:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(TLS[0], TLS[1])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("port", srv.server_address[1], flush=True)
threading.Timer(120, lambda: __import__("os")._exit(0)).start()
srv.serve_forever()
