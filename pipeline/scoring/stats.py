"""Paired bootstrap intervals for tier-minus-baseline deltas, and classification flips. Pure.

Corpus metrics (BLEU, chrF) are resampled the way sacrebleu's paired bootstrap does it
(Koehn, 2004; sacrebleu/significance.py): per-sentence sufficient statistics are drawn with the same
indices for both systems and the corpus score is recomputed from their sum. Per-sample metrics
(ROUGE) resample the per-sample scores. Percentile intervals; numpy's PCG64 with a fixed seed, so
results are reproducible bit for bit. A metric whose every sample is 0 or 100 (accuracy, exact match)
gets the paired score interval instead (pipeline/scoring/paired_binary.py: the bootstrap is too narrow
when few samples differ); its bootstrap SE is kept for power planning.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pipeline.scoring import paired_binary


@dataclass(frozen=True)
class Interval:
    delta: float      # tier - baseline on the full sample
    lo: float
    hi: float
    n: int
    se: float | None = None   # SD of the bootstrap distribution of the delta: its standard error
    # a 0/100 metric's discordant pairs (baseline right and tier wrong, the other way): its interval is
    # the paired score interval of those counts at any confidence (paired_binary, repeated)
    discordant: tuple[int, int] | None = None

    def as_dict(self) -> dict:
        out = {"delta": self.delta, "lo": self.lo, "hi": self.hi, "n": self.n, "se": self.se}
        return out if self.discordant is None else {**out, "discordant": list(self.discordant)}


BINARY = (0.0, 100.0)       # the two values of a per-sample accuracy or exact match (metrics.py: 0-100)


def binary(lost: int, gained: int, n: int, confidence: float, se: float | None) -> Interval:
    """The paired score interval of a 0/100 metric, in points: `lost` samples the baseline got right
    and the tier wrong, `gained` the other way, of `n`."""
    lo, hi = paired_binary.interval(lost, gained, n, confidence)
    return Interval(100.0 * (gained - lost) / n, 100.0 * float(lo), 100.0 * float(hi), n, se, (lost, gained))


def repeated(iv: Interval, confidence: float) -> Interval:
    """The look's repeated confidence interval (Jennison & Turnbull ch. 9): for a 0/100 metric the score
    interval of its discordant pairs at `confidence`, else delta -/+ z x SE with the bootstrap's SE (a
    percentile interval at a first look's 99.99% would need far more resamples than its tails hold,
    and so would be too narrow)."""
    if iv.discordant is not None:
        return binary(*iv.discordant, iv.n, confidence, iv.se)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    se = iv.se or 0.0
    return Interval(iv.delta, iv.delta - z * se, iv.delta + z * se, iv.n, iv.se)


def _indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def paired_mean(base: Sequence[float], tier: Sequence[float], resamples: int, seed: int,
                confidence: float = 0.95) -> Interval:
    b, t = np.asarray(base, dtype=float), np.asarray(tier, dtype=float)
    if b.shape != t.shape or b.size == 0:
        raise ValueError(f"paired samples must be non-empty and equal in length ({b.size} vs {t.size})")
    diff = t - b
    boot = diff[_indices(diff.size, resamples, seed)].mean(axis=1)
    se = float(boot.std(ddof=1))
    if np.isin(b, BINARY).all() and np.isin(t, BINARY).all():
        return binary(int((diff < 0).sum()), int((diff > 0).sum()), int(diff.size), confidence, se)
    lo, hi = _percentiles(boot, confidence)
    return Interval(float(diff.mean()), lo, hi, int(diff.size), se)


def _sacrebleu_metric(name: str):
    from sacrebleu.metrics import BLEU, CHRF

    return {"bleu": BLEU(), "chrf": CHRF()}[name]


# sacrebleu has no public API for per-sentence sufficient statistics of chrF (CHRFScore carries
# only the score; BLEUScore has counts, but one mechanism for both metrics keeps them consistent).
# Its own paired bootstrap (sacrebleu/significance.py) uses these two private methods, so we do
# too, in these two functions only.
# sacrebleu is pinned exactly in pyproject.toml; tests/test_stats.py checks that both methods still
# exist and that summed statistics reproduce the public corpus_score.
def segment_stats(metric, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """One row of sufficient statistics per sentence (sacrebleu Metric._extract_corpus_statistics)."""
    return np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]))


def score_from_stats(metric, summed: np.ndarray) -> float:
    """The corpus score from summed statistics (sacrebleu Metric._compute_score_from_stats)."""
    return float(metric._compute_score_from_stats(list(summed)).score)


def paired_corpus(metric: str, refs: Sequence[str], base_hyps: Sequence[str], tier_hyps: Sequence[str],
                  resamples: int, seed: int, confidence: float = 0.95) -> Interval:
    if not (len(refs) == len(base_hyps) == len(tier_hyps)) or not refs:
        raise ValueError("refs and both systems' outputs must be non-empty and aligned")
    m = _sacrebleu_metric(metric)
    sb = segment_stats(m, base_hyps, refs)
    st = segment_stats(m, tier_hyps, refs)

    def score(stats: np.ndarray) -> float:
        return score_from_stats(m, stats.sum(0))

    delta = score(st) - score(sb)
    idx = _indices(len(refs), resamples, seed)
    # each resample's summed statistics in one gather (integer counts: the same sums as row by row)
    boot = np.array([score_from_stats(m, t) - score_from_stats(m, b)
                     for t, b in zip(st[idx].sum(1), sb[idx].sum(1))])
    lo, hi = _percentiles(boot, confidence)
    return Interval(delta, lo, hi, len(refs), float(boot.std(ddof=1)))


@dataclass(frozen=True)
class Flips:
    right_to_wrong: int
    wrong_to_right: int
    n: int

    @property
    def rate(self) -> float:
        return (self.right_to_wrong + self.wrong_to_right) / self.n if self.n else 0.0


def flips(golds: Sequence[int], base_preds: Sequence[int], tier_preds: Sequence[int]) -> Flips:
    if not (len(golds) == len(base_preds) == len(tier_preds)):
        raise ValueError("golds and predictions must be aligned")
    r2w = sum(1 for g, b, t in zip(golds, base_preds, tier_preds) if b == g and t != g)
    w2r = sum(1 for g, b, t in zip(golds, base_preds, tier_preds) if b != g and t == g)
    return Flips(r2w, w2r, len(golds))
