"""Backends serve a variant to lm-eval: `reference` (transformers) here; a server-based backend
plugs in by implementing base.Backend."""
from __future__ import annotations

from pipeline.backends.base import Backend, Session, Unsupported, Variant
from pipeline.config import Params

__all__ = ["Backend", "Session", "Unsupported", "Variant", "select"]


def select(params: Params) -> Backend:
    """`serving.backend`: reference | vllm | auto (vLLM when installed and a GPU is present)."""
    choice = params.serving.backend
    if choice == "auto":
        choice = "vllm" if _vllm_usable() else "reference"
    if choice == "reference":
        from pipeline.backends.reference import ReferenceBackend

        return ReferenceBackend(params.serving.reference, params.eval)
    raise Unsupported(
        "serving.backend: 'vllm' is not available in this version of qtier yet; use 'reference' or 'auto'"
    )


def _vllm_usable() -> bool:
    import importlib.util

    from pipeline.compat import accelerator_available

    return importlib.util.find_spec("vllm") is not None and accelerator_available()
