"""The engines serve a variant to lm-eval: `reference` (transformers in-process), `vllm` (a real
server subprocess) and `endpoint` (a server already running), one room each. Each implements
base.Backend; the stages and the evaluation protocol (pipeline/evaluation) do not know which one
runs, and pick one with selection.select. An engine reads no verdict: it imports nothing of
pipeline/scoring."""
from __future__ import annotations

from pipeline.engines.base import Backend, Session, Unsupported, Variant

__all__ = ["Backend", "Session", "Unsupported", "Variant"]
