"""Paired intervals for tier-minus-baseline deltas, and classification flips. Pure.

Every interval is a test inverted at the variance the hypothesised delta requires, because the
paired differences of a close tier are mostly exact zeros and a bootstrap or Wald interval is then
far too narrow (docs/decisions/graded-interval.md):
- a metric whose every sample is 0 or 100 (accuracy, exact match): the paired score interval of its
  discordant pairs (pipeline/scoring/estimators/paired_binary.py);
- a graded per-sample metric (ROUGE): the floored studentized interval (paired_graded.py);
- a corpus metric (BLEU, chrF): the same interval on the jackknife pseudo-values of the corpus delta
  (per-sentence sufficient statistics as sacrebleu's paired bootstrap uses them), its changed pairs
  the sentences whose output changed.
Which interval a metric gets follows from its kind as pipeline/domain/sets/metric_registry.py declares it,
never from the values it takes (analysis.INTERVALS reads the table). Each interval is computed at any
confidence from what it keeps (`repeated`). None draws a bootstrap.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.domain.sets import metric_registry
from pipeline.scoring.estimators import paired_binary, paired_graded, strata


@dataclass(frozen=True)
class Interval:
    delta: float      # tier - baseline on the full sample
    lo: float
    hi: float
    n: int
    # a 0/100 metric's discordant pairs (baseline right and tier wrong, the other way): its interval is
    # the paired score interval of those counts at any confidence (paired_binary, repeated)
    discordant: tuple[int, int] | None = None
    # a graded or corpus metric's summary: its interval at any confidence (paired_graded)
    graded: paired_graded.Summary | None = None
    # stratified looks: the design's effective sample size, `discordant` then its effective counts
    # (scoring/estimators/strata.py); n stays the items read
    effective_n: float | None = None

    def as_dict(self) -> dict:
        out = {"delta": self.delta, "lo": self.lo, "hi": self.hi, "n": self.n}
        if self.graded is not None:
            out["changed"] = self.graded.changed
        if self.effective_n is not None:
            out["effective_n"] = self.effective_n
        return out if self.discordant is None else {**out, "discordant": list(self.discordant)}


BINARY = (0.0, 100.0)       # the two values of a binary metric's per-sample score (metric_registry: 0-100)


def binary(lost: float, gained: float, n: int, confidence: float, effective_n: float | None = None) -> Interval:
    """The paired score interval of a 0/100 metric, in points: `lost` samples the baseline got right
    and the tier wrong, `gained` the other way, of `n` (a stratified read: effective counts of
    `effective_n`, strata.effective)."""
    m = n if effective_n is None else effective_n
    lo, hi = paired_binary.interval(lost, gained, m, confidence)
    return Interval(100.0 * (gained - lost) / m, 100.0 * float(lo), 100.0 * float(hi), n, (lost, gained),
                    effective_n=effective_n)


def stratified_binary(diff: np.ndarray, labels: np.ndarray, pool: Sequence[int], confidence: float) -> Interval:
    """A 0/100 metric read in strata (`labels` per sample, `pool` the strata's sizes): the stratified
    estimate and its score interval (scoring/estimators/strata.py); the plain one when every stratum was read whole."""
    lost = [int(((diff < 0) & (labels == h)).sum()) for h in range(len(pool))]
    gained = [int(((diff > 0) & (labels == h)).sum()) for h in range(len(pool))]
    read = [int((labels == h).sum()) for h in range(len(pool))]
    b, c, m = (float(x) for x in strata.effective(lost, gained, read, pool))
    if read == list(pool):
        return binary(sum(lost), sum(gained), int(diff.size), confidence)
    return binary(b, c, int(diff.size), confidence, effective_n=m)


def graded(s: paired_graded.Summary, confidence: float) -> Interval:
    """The floored studentized interval of a graded or corpus metric's paired differences."""
    lo, hi = paired_graded.interval(s, confidence)
    return Interval(s.mean, lo, hi, s.n, graded=s)


def repeated(iv: Interval, confidence: float) -> Interval:
    """The look's repeated confidence interval (Jennison & Turnbull ch. 9): the interval's own test
    inverted at `confidence` (the look's nominal level), from the counts or summary it keeps."""
    if iv.discordant is not None:
        return binary(*iv.discordant, iv.n, confidence, iv.effective_n)
    if iv.graded is not None:
        return graded(iv.graded, confidence)
    raise ValueError("an interval without its discordant counts or graded summary cannot be re-read")


def paired_binary_mean(base: Sequence[float], tier: Sequence[float], confidence: float = 0.95,
                       strata_of: tuple[Sequence[int], Sequence[int]] | None = None) -> Interval:
    """A binary metric's paired score interval from its per-sample 0/100 scores; `strata_of`: (stratum
    per sample, the strata's sizes) of a stratified read. A score other than 0 or 100 is an error: the
    metric is declared binary (metric_registry) and computes something else."""
    b, t, diff = _paired(base, tier)
    off = [x for x in np.concatenate([b, t]) if x not in BINARY]
    if off:
        raise ValueError(f"a binary metric's per-sample score is 0 or 100, got {off[0]:g}")
    if strata_of is not None:
        return stratified_binary(diff, np.asarray(strata_of[0]), list(strata_of[1]), confidence)
    return binary(int((diff < 0).sum()), int((diff > 0).sum()), int(diff.size), confidence)


def paired_graded_mean(base: Sequence[float], tier: Sequence[float], confidence: float = 0.95) -> Interval:
    """A graded metric's floored studentized interval from its per-sample scores."""
    b, _, diff = _paired(base, tier)
    return graded(paired_graded.summary(diff, b), confidence)


def _paired(base: Sequence[float], tier: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b, t = np.asarray(base, dtype=float), np.asarray(tier, dtype=float)
    if b.shape != t.shape or b.size == 0:
        raise ValueError(f"paired samples must be non-empty and equal in length ({b.size} vs {t.size})")
    return b, t, t - b


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
                  confidence: float = 0.95) -> Interval:
    """A corpus metric's studentized interval on its jackknife pseudo-values (`metric`: its name in
    metric_registry, which names the sacrebleu metric whose per-sentence statistics it sums)."""
    if not (len(refs) == len(base_hyps) == len(tier_hyps)) or not refs:
        raise ValueError("refs and both systems' outputs must be non-empty and aligned")
    m = sentence_metric(metric)
    sb = segment_stats(m, base_hyps, refs)
    st = segment_stats(m, tier_hyps, refs)

    def score(stats: np.ndarray) -> float:
        return score_from_stats(m, stats.sum(0))

    delta = score(st) - score(sb)
    pseudo = pseudo_values(m, st) - pseudo_values(m, sb)
    changed = sum(1 for a, b in zip(base_hyps, tier_hyps) if a != b)
    s = paired_graded.summary(pseudo, changed=changed, reach=(paired_graded.SCALE, paired_graded.SCALE))
    s = dataclasses.replace(s, mean=float(delta))
    return graded(s, confidence)


def sentence_metric(name: str):
    """The sacrebleu metric a jackknife-interval metric sums per-sentence statistics of (metric_registry)."""
    found = metric_registry.get(name).sentence_stats
    if found is None:
        raise ValueError(f"metric {name!r} has no per-sentence statistics (pipeline/domain/sets/metric_registry.py)")
    return found()


def pseudo_values(metric, stats_rows: np.ndarray) -> np.ndarray:
    """Jackknife pseudo-values n x score - (n - 1) x score without sentence i (Efron & Tibshirani
    ch. 11): the per-sentence form of a corpus score, whose variance / n is its jackknife variance."""
    n = len(stats_rows)
    total = stats_rows.sum(0)
    full = score_from_stats(metric, total)
    loo = np.array([score_from_stats(metric, total - row) for row in stats_rows]) if n > 1 else np.array([full])
    return n * full - (n - 1) * loo


@dataclass(frozen=True)
class Flips:
    right_to_wrong: int
    wrong_to_right: int
    n: int
    share: float | None = None      # a stratified read: the pool's share flipped, estimated (else the counts')

    @property
    def rate(self) -> float:
        if self.share is not None:
            return self.share
        return (self.right_to_wrong + self.wrong_to_right) / self.n if self.n else 0.0


def flips(golds: Sequence[int], base_preds: Sequence[int], tier_preds: Sequence[int]) -> Flips:
    if not (len(golds) == len(base_preds) == len(tier_preds)):
        raise ValueError("golds and predictions must be aligned")
    r2w = sum(1 for g, b, t in zip(golds, base_preds, tier_preds) if b == g and t != g)
    w2r = sum(1 for g, b, t in zip(golds, base_preds, tier_preds) if b != g and t == g)
    return Flips(r2w, w2r, len(golds))
