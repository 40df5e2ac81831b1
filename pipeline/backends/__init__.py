"""Backends serve a variant to lm-eval: `reference` (transformers in-process) and `vllm` (a real
server subprocess). Both implement base.Backend; the stages do not know which one runs, and pick
one with selection.select."""
from __future__ import annotations

from pipeline.backends.base import Backend, Session, Unsupported, Variant

__all__ = ["Backend", "Session", "Unsupported", "Variant"]
