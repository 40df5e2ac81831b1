"""Backends serve a variant to lm-eval: `reference` (transformers in-process) and `vllm` (a real
server subprocess). Both implement base.Backend; the stages do not know which one runs."""
from __future__ import annotations

from pathlib import Path

from pipeline.backends.base import Backend, Session, Unsupported, Variant
from pipeline.backends.reference import ReferenceBackend
from pipeline.backends.vllm_backend import VllmBackend
from pipeline.domain.machine import accelerator_available
from pipeline.schema import Params

__all__ = ["Backend", "Session", "Unsupported", "Variant", "select"]


def select(params: Params) -> Backend:
    """`serving.backend`: reference | vllm | auto (vLLM when installed and a GPU is present)."""
    choice = params.serving.backend
    if choice == "auto":
        choice = "vllm" if _vllm_usable(params) else "reference"
    if choice == "reference":
        return ReferenceBackend(params.serving.reference, params.eval)
    return VllmBackend(params.serving.vllm, params.eval, params.serving.slo)


def _vllm_usable(params: Params) -> bool:
    return Path(params.serving.vllm.python).is_file() and accelerator_available()
