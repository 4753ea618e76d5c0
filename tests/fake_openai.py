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
"""
import json, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
ARGS = sys.argv[2:]
METRICS = ARGS[ARGS.index("--metrics") + 1] if "--metrics" in ARGS else None
TLS = ARGS[ARGS.index("--tls") + 1:ARGS.index("--tls") + 3] if "--tls" in ARGS else None
STATE = {"posts": 0}


def chunk(text=None, finish=None, usage=None):
    d = {"id": "fake-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
         "choices": [{"index": 0, "delta": {"content": text} if text is not None else {}, "finish_reason": finish}]}
    if usage:
        d["choices"] = []
        d["usage"] = usage
    return ("data: " + json.dumps(d) + "\n\n").encode()


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
        self.rfile.read(n)
        STATE["posts"] += 1
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
