"""The contract an OpenAI-compatible server must meet before qtier scores anything through it, checked
with a handful of requests: prompt log-probs with echo, how many top log-probs it returns, the
tokenizer it counts with, and whether its greedy output is degenerate.

    python -m pipeline.engines.vllm.preflight <base_url> <served model name> <tokenizer dir>

Why each: a server that returns log-probs only for generated tokens (llama.cpp's) makes lm-eval's
log-likelihood tasks score every choice alike, i.e. exactly at chance; the top-log-prob depth (vLLM:
--max-logprobs, 20 by default) bounds any KL computed from its answers; a server counting tokens with
another tokenizer miscounts prompts and speeds; a server looping " 1 1 1" is not serving the model
the user thinks. The vLLM backend runs it on its own server and records it (pipeline/engines/vllm/backend.py).
"""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from typing import Callable

from pipeline.domain.sets.loops import loop_unit
from pipeline.domain.result.facts import Contract

PROBE = "The quick brown fox jumps over the lazy dog. It was a calm and sunny day."
PROMPTS = ("Write one sentence about the sea.", "List three colours.")
DEPTHS = (20, 5, 1)


def _post(url: str, body: dict, timeout_s: float, api_key: str | None) -> dict:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.loads(r.read())


def _echo(base_url: str, model: str, depth: int, timeout_s: float, api_key: str | None) -> dict:
    return _post(f"{base_url}/v1/completions", {"model": model, "prompt": PROBE, "max_tokens": 1, "echo": True,
                                                "logprobs": depth, "temperature": 0}, timeout_s, api_key)


def prompt_logprobs(choice: dict, requested: int) -> tuple[bool, int]:
    """(the answer carries a log-prob for every prompt token after the first, the top-log-prob depth). Pure.
    A prompt token outside the top `requested` is listed with them (vLLM: `requested` + 1 entries), and
    tokens that decode alike share one key of the answer's dict (fewer entries), so the depth is the
    longest list, at most `requested`."""
    lp = choice.get("logprobs") or {}
    values, tokens, tops = lp.get("token_logprobs") or [], lp.get("tokens") or [], lp.get("top_logprobs") or []
    # echo puts the prompt's tokens first; their first has no log-prob (nothing precedes it)
    ok = len(tokens) >= 2 and len(values) == len(tokens) and all(v is not None for v in values[1:-1])
    depth = max((len(t) for t in tops[1:] if t), default=0)
    return ok, min(depth, requested)


def check(base_url: str, model: str, encode: Callable[[str], list[int]], timeout_s: float = 60,
          api_key: str | None = None, chat: bool = False) -> Contract:
    """Run every check; `encode` is the base model's tokenizer (special tokens as the server adds them)."""
    answer = None
    for depth in DEPTHS:      # the deepest the server accepts
        try:
            answer = _echo(base_url, model, depth, timeout_s, api_key)
            break
        except urllib.error.HTTPError as e:
            if e.code not in (400, 422):
                raise
    if answer is None:
        return Contract(failures=["every echo request with logprobs was refused"])
    choice = (answer.get("choices") or [{}])[0]
    c = Contract(*prompt_logprobs(choice, depth), server_tokens=(answer.get("usage") or {}).get("prompt_tokens"),
                 tokenizer_tokens=len(encode(PROBE)))
    if not c.prompt_logprobs:
        c.failures.append(c.loglik_refusal)
    if c.server_tokens is not None and c.server_tokens != c.tokenizer_tokens:
        c.failures.append(f"tokenizer round-trip: the server counts {c.server_tokens} tokens in the probe, the "
                          f"model's tokenizer {c.tokenizer_tokens}")
    for prompt in PROMPTS:
        out = _generate(base_url, model, prompt, timeout_s, api_key, chat)
        unit = loop_unit(out)
        if not out.strip():
            c.degenerate.append(f"empty answer to {prompt!r}")
        elif unit is not None:
            c.degenerate.append(f"{unit!r} repeated in the answer to {prompt!r}")
    return c


def _generate(base_url: str, model: str, prompt: str, timeout_s: float, api_key: str | None, chat: bool) -> str:
    if chat:
        answer = _post(f"{base_url}/v1/chat/completions", {"model": model, "max_tokens": 32, "temperature": 0,
                       "messages": [{"role": "user", "content": prompt}]}, timeout_s, api_key)
        return ((answer.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
    answer = _post(f"{base_url}/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 32,
                                                  "temperature": 0}, timeout_s, api_key)
    return (answer.get("choices") or [{}])[0].get("text") or ""


def main(argv: list[str]) -> None:
    from transformers import AutoTokenizer  # seconds of imports: only for the command line

    print(json.dumps(check(argv[0], argv[1], AutoTokenizer.from_pretrained(argv[2]).encode).as_dict(), indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
