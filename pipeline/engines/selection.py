"""Which backend serves the variants: `serving.backend` = reference | vllm | auto.

Apart from the package's __init__ so that importing any backends module (vllm/launch, vllm/logs, base) does
not load both engines and torch with them.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.engines.base import Backend
from pipeline.engines.endpoint.backend import EndpointBackend
from pipeline.engines.llama_cpp.backend import LlamaCppBackend
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.engines.vllm.backend import VllmBackend
from pipeline.engines.vllm.session import other_concurrency
from pipeline.domain.hardware.machine import accelerator_available
from pipeline.schema import Params, Tier


def select(params: Params, noise: bool = False, tier: Tier | None = None) -> Backend:
    """`serving.backend`: reference | vllm | auto (vLLM when installed and a GPU is present). noise: the
    same engine in its second arithmetic (stage noise): on the reference backend
    serving.reference.noise_arithmetic, on vLLM another batch composition (lm-eval's requests one at a
    time, or two at once when the run sends them one at a time). A tier of method endpoint is its own
    server, whatever serving.backend says; a tier of method gguf is llama.cpp's server's."""
    if tier is not None and tier.method == "endpoint":
        return EndpointBackend(params.serving.vllm, params.eval, params.serving.slo, params.decision.baseline.kv)
    if tier is not None and tier.method == "gguf":
        return LlamaCppBackend(params.serving.vllm, params.eval, params.serving.slo, params.decision.baseline.kv)
    choice = params.serving.backend
    if choice == "auto":
        choice = "vllm" if _vllm_usable(params) else "reference"
    if choice == "reference":
        return ReferenceBackend(params.serving.reference, params.eval, noise=noise)
    cfg = other_concurrency(params.serving.vllm) if noise else params.serving.vllm
    return VllmBackend(cfg, params.eval, params.serving.slo)


def _vllm_usable(params: Params) -> bool:
    return Path(params.serving.vllm.python).is_file() and accelerator_available()
