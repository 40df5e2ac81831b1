"""The KV repair's measurements on the reference engine: the mean next-token KL (full vocabulary, every
position of every text) of the model whose cache is stored in one format except in the layers kept,
to the same model with its own-dtype cache. Texts are fed in chunks through the reserved cache
(pipeline/evaluation/longctx.py `chunks`), and every position reads the rounded K/V, its own chunk's
too, as a decode step reads the cache (and as a continuation scored after a cached prompt does):
TurboQuant's prefill reads its own chunk raw in vLLM (kv_formats.RoundTrip.prefill_raw), which here
would hide most of its error from a teacher-forced pass, so the probe turns that off. Used by stage
kvrepair for a mode with `repair` (pipeline/quant/kv_repair.py decides what to keep; this only
measures).

    probe = Probe(session.model, "nvfp4", seqs)
    probe.per_layer()            # {layer: KL with this format's rounding on that layer's K/V alone}
    probe.kl([3, 17])            # KL with every layer quantized but 3 and 17
"""
from __future__ import annotations

import dataclasses
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

    def _install(self, kept) -> None:
        kv_formats.install(self.model, self.cache_dtype, tuple(kept))
        for m in self.model.modules():       # every position reads the cache rounded (module docstring)
            trip = getattr(m, "qtier_kv_round_trip", None)
            if trip is not None and trip.prefill_raw:
                m.qtier_kv_round_trip = dataclasses.replace(trip, prefill_raw=False)

    def _logprobs(self, kept: tuple[int, ...]) -> list[list[torch.Tensor]]:
        self._install(kept)
        with torch.inference_mode():
            return [[lp for _, lp in longctx.chunks(self.model, seq, self.chunk)] for seq in self.seqs]

    def kl(self, kept: Sequence[int]) -> float:
        """Mean KL (nats per position) with every layer but `kept` in this format."""
        self._install(kept)
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
