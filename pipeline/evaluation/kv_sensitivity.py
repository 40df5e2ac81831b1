"""The KV repair's measurements on the reference engine: the mean next-token KL (full vocabulary, every
position of every text) of the model whose cache is stored in one format except in the layers kept,
to the same model with its own-dtype cache. Texts are fed in chunks through the reserved cache
(pipeline/evaluation/longctx.py `chunks`), as the long-context probe feeds them, so a chunk after the
first reads the rounded K/V of every chunk before it (TurboQuant's first chunk reads its own raw K/V,
as vLLM's prefill does). Used by stage kvscales for a mode with `repair` (pipeline/quant/kv_repair.py
decides what to keep; this only measures).

    probe = Probe(session.model, "nvfp4", seqs, chunk=64)
    probe.per_layer()            # {layer: KL with this format's rounding on that layer's K/V alone}
    probe.kl([3, 17])            # KL with every layer quantized but 3 and 17
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from pipeline.engines.reference import kv_formats
from pipeline.evaluation import longctx


def attention_layers(model) -> int:
    return sum(1 for m in model.modules() if hasattr(m, "k_proj") and hasattr(m, "v_proj"))


class Probe:
    def __init__(self, model, cache_dtype: str, seqs: Sequence[Sequence[int]], chunk: int = longctx.CHUNK):
        self.model, self.cache_dtype, self.chunk = model.eval(), cache_dtype, chunk
        self.seqs = [list(s) for s in seqs if len(s) > 1]
        if not self.seqs:
            raise ValueError("kv repair: no text has two tokens")
        self.layers = attention_layers(model)
        self.positions = sum(len(s) - 1 for s in self.seqs)
        self.base = self._logprobs(tuple(range(self.layers)))       # every layer kept: the model's own cache

    def _logprobs(self, kept: tuple[int, ...]) -> list[list[torch.Tensor]]:
        kv_formats.install(self.model, self.cache_dtype, kept)
        with torch.inference_mode():
            return [[lp for _, lp in longctx.chunks(self.model, seq, self.chunk)] for seq in self.seqs]

    def kl(self, kept: Sequence[int]) -> float:
        """Mean KL (nats per position) with every layer but `kept` in this format."""
        kv_formats.install(self.model, self.cache_dtype, tuple(kept))
        total = 0.0
        with torch.inference_mode():
            for base, seq in zip(self.base, self.seqs):
                for lp, (_, lq) in zip(base, longctx.chunks(self.model, seq, self.chunk)):
                    total += float((lp.exp() * (lp - lq)).sum(-1).clamp(min=0.0).double().sum())
        return total / self.positions

    def per_layer(self) -> dict[int, float]:
        """Each layer's KL with this format on its K/V alone (every other layer kept)."""
        every = set(range(self.layers))
        return {i: self.kl(sorted(every - {i})) for i in range(self.layers)}
