"""llama.cpp backend: a tier of `method: gguf` served by llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`, in .venv-llama: bash scripts/install.sh --llama-cpp) on 127.0.0.1, then
judged through the endpoint path (pipeline/engines/endpoint/backend.py: the server contract, lm-eval's
local-completions, the decode probe, `vllm bench serve`'s load test: its request ids sent as UUIDs, the
only x-request-id the server takes, so at most 10 requests a level: LlamaCppSession).

The server is started in its own process group and stopped in `finally` (pipeline/engines/vllm/server.py):
on success, on error and on Ctrl-C no process is left. It is healthy once GET /v1/models answers (it has
no /health). It takes text prompts only (a list of token ids fails its request schema), so lm-eval sends
text and the server tokenizes with the GGUF's own tokenizer; the contract's tokenizer round-trip checks
that it counts tokens as the model's tokenizer does.

Log-likelihood: llama-cpp-python 0.3.36 answers `echo` with `logprobs` (logits_all), pairing the score row
of position i with the echoed token i after dropping a leading BOS (llama_cpp/llama.py,
_create_completion). Row i predicts token i + 1, so the pairing is right only when the prompt starts with
BOS; without one every prompt log-prob is one position off (SmolLM2's GGUF adds none: " capital" in "The
capital of France" is scored -9.6 under the row whose top token is " of", -0.41). echo_aligned() reads
which case the server is in from its own answer; misaligned, the log-likelihood tasks are refused with
that reason (the generation tasks still run).
"""
from __future__ import annotations

import json
import os
import uuid
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline import paths
from pipeline.engines.base import Unsupported, Variant
from pipeline.engines.endpoint.backend import EndpointBackend
from pipeline.engines.llama_cpp.argv import server_argv
from pipeline.engines.vllm import preflight
from pipeline.engines.vllm.server import Server, ServerDied, free_port
from pipeline.engines.vllm.session import VllmSession
from pipeline.io import read_json

PROMPT = preflight.PROBE
MISALIGNED = ("llama-cpp-python 0.3.36 pairs each echoed prompt token with the score row of its own position "
              "(the row predicting the next token) unless the prompt starts with a BOS token, which this "
              "GGUF's tokenizer does not add: its prompt log-probs are one position off (llama_cpp/llama.py, "
              "_create_completion)")


def echo_aligned(answer: dict) -> bool:
    """Whether the server's echoed prompt log-probs are paired with the right tokens, read from its answer to
    a 1-token echo request. llama-cpp-python zips the echoed tokens with the evaluated score rows: after
    dropping a leading BOS the generated token is among them (the tokens spell the prompt and the answer);
    without a BOS the rows run out one token early and the tokens spell the prompt alone, each paired with
    the row predicting the token after it. Not shown aligned (an empty answer, no log-probs) is False. Pure."""
    choice = (answer.get("choices") or [{}])[0]
    tokens = (choice.get("logprobs") or {}).get("tokens") or []
    spelled, text = "".join(tokens), choice.get("text") or ""
    return bool(tokens) and spelled == text and len(spelled) > len(PROMPT)


def _echo_answer(base_url: str, served: str, timeout_s: float) -> dict:
    body = {"model": served, "prompt": PROMPT, "max_tokens": 1, "echo": True, "logprobs": 1,
            "temperature": 0}
    req = urllib.request.Request(f"{base_url}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.loads(r.read())


NO_FIDELITY = ("llama-cpp-python's server has no prompt_logprobs (vLLM's extension fidelity reads) and takes no "
               "token-id prompts, and its echoed log-probs are paired as MISALIGNED says without a BOS")


class LlamaCppSession(VllmSession):
    # starlette-context's RequestIdPlugin answers 400 to an x-request-id that is not a UUID, and vLLM's bench
    # names each request prefix + its index: 31 hex digits + one digit parse as one (argv.bench_argv)
    uuid_prefix = uuid.uuid4().hex[:31]

    def token_dists(self, seqs, k):
        raise Unsupported(NO_FIDELITY)


class LlamaCppBackend(EndpointBackend):
    name = "endpoint"           # judged as a server's answers are (memory from the GGUF file, not a checkpoint)
    tokenized = False
    session_class = LlamaCppSession
    root = Path(".")

    @contextmanager
    def session(self, variant: Variant) -> Iterator[VllmSession]:
        if variant.kv != self.baseline_kv:
            raise Unsupported(f"llama.cpp tiers are evaluated with the server's f16 KV cache, under the "
                              f"baseline's KV mode {self.baseline_kv!r} only (llama.cpp's -ctk/-ctv not wired)")
        py = self.root / paths.LLAMA_PYTHON
        if not py.is_file():
            raise Unsupported(f"no llama.cpp environment at {py}: bash scripts/install.sh --llama-cpp")
        ref = read_json(variant.checkpoint / paths.GGUF_REF)
        out_dir = variant.out_dir or Path(".")
        port = free_port()
        argv = server_argv(py, Path(ref["path"]), variant.key, port, self.cfg.max_model_len)
        server = Server(argv, dict(os.environ), out_dir / paths.LLAMA_SERVER_LOG, port, health="/v1/models")
        server.start()
        try:
            try:
                startup_s = server.wait_healthy(self.cfg.startup_timeout_s)
            except (ServerDied, TimeoutError) as e:
                last = (server.log().strip().splitlines() or [""])[-1]
                raise Unsupported(f"llama.cpp's server did not start: {e}: {last}") from None
            with self.served(variant, server, variant.key, device="cpu") as session:
                aligned = echo_aligned(_echo_answer(server.base_url, variant.key, self.cfg.first_request_timeout_s))
                if not aligned and session.loglik_refusal is None:
                    session.loglik_refusal = MISALIGNED
                    session.info["contract"]["failures"].append(MISALIGNED)     # shown with the contract
                # page 1's line for this tier: how to serve the file (the port and alias are this run's)
                session.info.update(command=f"python -m llama_cpp.server --model {ref['path']} "
                                            f"--n_ctx {self.cfg.max_model_len}", startup_s=round(startup_s, 1))
                yield session
        finally:
            server.stop()
