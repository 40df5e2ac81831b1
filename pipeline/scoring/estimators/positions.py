"""Fidelity by token position (issue 21): a variant's per-position next-token KL and top-1 agreement
against the baseline, teacher-forced on long texts, averaged per position bucket, with an interval
over texts. Pure: numpy and the standard library; tests/test_positions.py.

    edges = positions.bucket_edges(model_context=8192, max_model_len=4096)   # [0, 512, 1024, 2048, 4096]
    rows = positions.by_position(kl_per_text, agree_per_text, edges)

Positions. Row t of a text's per-position arrays is the prediction of token t + 1 from tokens 0..t
(pipeline/engines/reference/dists.py's layout), so its position is t: the prediction reads t + 1 tokens. A
bucket [lo, hi) holds rows lo <= t < hi; rows at or past the last edge are not counted (the last edge
is the smaller of the model's context and memory.max_model_len: a deployment never reads more).

Interval. Positions of one text are not independent (one text's hard passage raises the KL of every
position in it), so the unit of the interval is the text: per text, the mean over its positions in the
bucket; the bucket's value is the mean of those per-text means (texts weighted equally); its interval
is Student's t on them, mean +- t_{(1+c)/2, n-1} * sd / sqrt(n), n the texts that reach the bucket.
t rather than the bootstrap the short-context fidelity uses (pipeline/scoring/estimators/fidelity.py): long texts
are few (each costs a quadratic forward), and with 6 texts a percentile bootstrap covered 84% in the
simulation of tests/test_positions.py, t 93% for KL (per-text means with a coefficient of variation
of 0.5, skewed like KL) and 92% for agreement; an interval over positions (as if independent) 38%.
A bucket reached by one text has no interval; one where every text agrees at every position has a
zero-width one (no spread was seen, which is not proof of none). Intervals are clipped to [0, inf)
for KL and [0, 100] for agreement, which only removes values the mean cannot take.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def bucket_edges(model_context: int, max_model_len: int, first: int = 512,
                 edges: Sequence[int] | None = None) -> list[int]:
    """Bucket edges from 0 to min(model_context, max_model_len): `edges` clipped to that limit, or by
    default first, 2*first, 4*first, ... below it; the limit is always the last edge."""
    limit = min(model_context, max_model_len)
    if limit < 1 or first < 1:
        raise ValueError(f"positions: the context limit and the first edge must be positive "
                         f"(limit {limit}, first {first})")
    if edges is None:
        edges, e = [0], first
        while e < limit:
            edges.append(e)
            e *= 2
    else:
        edges = list(edges)
        if not edges or edges[0] != 0 or edges != sorted(set(edges)):
            raise ValueError(f"positions: edges must start at 0 and be strictly increasing, got {edges}")
        edges = [e for e in edges if e < limit]
    return [*edges, limit]


def per_text_means(values: Sequence[np.ndarray], edges: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-position values of each text -> ([texts, buckets] mean per bucket, NaN where the text has no
    position in it; [texts, buckets] positions per bucket). Positions at or past the last edge are dropped."""
    lengths = np.array([np.asarray(v).size for v in values], dtype=np.int64)
    flat = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    n_b = len(edges) - 1
    pos = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)   # position within its text
    bucket = np.searchsorted(np.asarray(edges), pos, side="right") - 1
    keep = bucket < n_b
    cell = (np.repeat(np.arange(lengths.size), lengths) * n_b + bucket)[keep]
    counts = np.bincount(cell, minlength=lengths.size * n_b).reshape(-1, n_b)
    sums = np.bincount(cell, weights=flat[keep], minlength=lengths.size * n_b).reshape(-1, n_b)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), counts


def _t_cdf(x: float, df: int) -> float:
    """Student's t CDF at x >= 0: 0.5 + the density's integral over [0, x] (Simpson, 4,000 panels:
    error far below the 1e-6 the quantile needs)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    grid = np.linspace(0.0, x, 4001)
    f = c * (1.0 + grid * grid / df) ** (-(df + 1) / 2)
    h = x / 4000
    return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in (0.5, 1), df >= 1, to 1e-9 by bisection on _t_cdf."""
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"t_quantile: need 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-9 * max(1.0, hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def t_interval(x: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """(mean, lo, hi) of Student's t interval for the mean of x; lo = hi = None with one value."""
    a = [float(v) for v in x]      # a handful of texts: plain floats beat numpy's per-call overhead
    if not a or not all(math.isfinite(v) for v in a):
        raise ValueError(f"t_interval: need finite values, got {len(a)} values")
    m = math.fsum(a) / len(a)
    if len(a) < 2:
        return m, None, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in a) / (len(a) - 1))
    half = t_quantile((1 + confidence) / 2, len(a) - 1) * sd / math.sqrt(len(a))
    return m, m - half, m + half


@dataclass(frozen=True)
class Bucket:
    lo: int                    # positions lo <= t < hi
    hi: int
    n_texts: int               # texts with at least one position here
    n_positions: int
    reach: int                 # 1 + the largest position seen here (== hi when some text covers it)
    kl_mean: float | None      # nats/token, mean of per-text means; None: no text reaches the bucket
    kl_ci: tuple[float, float] | None
    top1: float | None         # percent of positions whose top-1 tokens agree, mean of per-text rates
    top1_ci: tuple[float, float] | None

    def as_dict(self) -> dict:
        def sig(v):
            return None if v is None else float(f"{v:.6g}")
        return {"lo": self.lo, "hi": self.hi, "n_texts": self.n_texts, "n_positions": self.n_positions,
                "reach": self.reach, "kl_mean": sig(self.kl_mean),
                "kl_ci": None if self.kl_ci is None else [sig(v) for v in self.kl_ci],
                "top1": sig(self.top1), "top1_ci": None if self.top1_ci is None else [sig(v) for v in self.top1_ci]}


def by_position(kl_per_text: Sequence[np.ndarray], agree_per_text: Sequence[np.ndarray], edges: Sequence[int],
                confidence: float = 0.95) -> list[Bucket]:
    """One Bucket per [edges[i], edges[i+1]): the per-text means of KL and of top-1 agreement (as a
    percentage) and their t intervals over texts."""
    if len(kl_per_text) != len(agree_per_text) or not kl_per_text:
        raise ValueError(f"positions: need non-empty, aligned per-text lists ({len(kl_per_text)} KL, "
                         f"{len(agree_per_text)} agreement)")
    if len(edges) < 2 or list(edges) != sorted(set(edges)) or edges[0] != 0:
        raise ValueError(f"positions: edges must start at 0 and be strictly increasing, got {list(edges)}")
    kls = [np.asarray(k, dtype=np.float64).ravel() for k in kl_per_text]
    agrees = [np.asarray(a, dtype=bool).ravel() for a in agree_per_text]
    for kl, agree in zip(kls, agrees):
        if kl.shape != agree.shape or not np.isfinite(kl).all():
            raise ValueError(f"positions: a text has {kl.size} KL values (finite: {bool(np.isfinite(kl).all())}) "
                             f"and {agree.size} agreement flags")
    kl_m, cnt = per_text_means(kls, edges)
    ag_m = 100.0 * per_text_means(agrees, edges)[0]
    lengths = np.array([k.size for k in kls])
    out = []
    for b in range(len(edges) - 1):
        lo, hi = int(edges[b]), int(edges[b + 1])
        present = cnt[:, b] > 0
        if not present.any():
            out.append(Bucket(lo, hi, 0, 0, lo, None, None, None, None))
            continue
        k_mean, k_lo, k_hi = t_interval(kl_m[present, b], confidence)
        a_mean, a_lo, a_hi = t_interval(ag_m[present, b], confidence)
        out.append(Bucket(lo, hi, int(present.sum()), int(cnt[:, b].sum()), int(min(hi, lengths.max())),
                          k_mean, None if k_lo is None else (max(0.0, k_lo), k_hi),
                          a_mean, None if a_lo is None else (max(0.0, a_lo), min(100.0, a_hi))))
    return out
