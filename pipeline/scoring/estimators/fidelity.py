"""Fidelity of a variant to the baseline: KL(P||Q) of next-token distributions, teacher-forced.

P is the baseline's distribution at a scored position, stored as its top-K ids and natural-log
probabilities; Q is the variant's, known either at P's ids (reference backend, full logits) or only on
its own top-J ids (vLLM prompt_logprobs). With T the ids present in both lists, the rest of the mass
is one bucket r:

    kl_t = sum_{i in T} p_i (log p_i - log q_i) + p_r (log p_r - log q_r),
    p_r = 1 - sum_{i in T} p_i,  q_r = 1 - sum_{i in T} q_i.

Merging tokens into one bucket is a coarsening, so by the data-processing inequality kl_t is a lower
bound of the full-vocabulary KL, equal to it when T is the whole vocabulary. The summary reports what
llama.cpp's `llama-perplexity --kl-divergence` reports (mean KL, 99th percentile KL, "same top token"
rate), with bootstrap intervals over texts; `band` reads mean KL on the scale quoted for
llm-compressor's KL-divergence evaluator (<0.1 excellent, 0.1-1 moderate, >1 large).

Pure: no model; tests/test_fidelity.py
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pipeline.domain.result.facts import Fidelity

# A zero q where p > 0 would make KL infinite, and one such position would swamp every mean. Flooring
# q (bucket and shared tokens alike) only shrinks each term, so the result stays a lower bound.
Q_FLOOR = 1e-12


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


@dataclass(frozen=True)
class Summary:
    kl_mean: float            # nats/token, token-weighted over all positions of all texts
    kl_mean_ci: tuple[float, float]
    kl_p99: float             # 99th percentile of per-position KL, pooled
    kl_p99_ci: tuple[float, float]
    top1_agreement: float     # percent of positions where argmax P == argmax Q
    top1_agreement_ci: tuple[float, float]
    n_texts: int
    n_tokens: int

    def as_dict(self) -> dict:
        out: dict = {"n_texts": self.n_texts, "n_tokens": self.n_tokens}
        for name in ("kl_mean", "kl_p99", "top1_agreement"):
            out[name] = _sig(getattr(self, name))
            out[f"{name}_ci"] = [_sig(v) for v in getattr(self, f"{name}_ci")]
        return out


def position_kl(p_ids: np.ndarray, p_logprobs: np.ndarray, q_ids: np.ndarray,
                q_logprobs: np.ndarray) -> np.ndarray:
    """[T,K] int, [T,K] float, [T,J] int, [T,J] float -> [T] float64 KL(P||Q) on the shared support + one bucket.

    Ids < 0 are padding and ignored. Ids are assumed unique within a row.
    """
    p_ids, q_ids = np.asarray(p_ids, dtype=np.int64), np.asarray(q_ids, dtype=np.int64)
    p_lp, q_lp = np.asarray(p_logprobs, dtype=np.float64), np.asarray(q_logprobs, dtype=np.float64)
    if p_ids.ndim != 2 or p_ids.shape != p_lp.shape or q_ids.shape != q_lp.shape \
            or q_ids.ndim != 2 or q_ids.shape[0] != p_ids.shape[0]:
        raise ValueError(f"expected [T,K] and [T,J] arrays, got {p_ids.shape}/{p_lp.shape} "
                         f"and {q_ids.shape}/{q_lp.shape}")
    n_rows, k = p_ids.shape
    # Row-offset keys (id + 1, padding 0) sorted within each row form one globally sorted array, so all
    # T membership tests are one searchsorted: no Python loop over T and no [T,K,J] broadcast. P is
    # sorted too (KL is a sum, order is irrelevant) because sorted needles search much faster.
    stride = int(max(p_ids.max(initial=0), q_ids.max(initial=0))) + 2
    offset = np.arange(n_rows, dtype=np.int64)[:, None] * stride

    def sorted_keys(ids: np.ndarray, lp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        local = np.where(ids >= 0, ids + 1, 0)
        order = np.argsort(local, axis=1)
        return np.take_along_axis(local, order, 1) + offset, np.take_along_axis(lp, order, 1)

    p_key, p_lp = sorted_keys(p_ids, p_lp)
    q_key, q_lp = sorted_keys(q_ids, q_lp)
    q_key, q_lp = q_key.ravel(), q_lp.ravel()
    if q_key.size:
        pos = np.minimum(np.searchsorted(q_key, p_key.ravel()), q_key.size - 1).reshape(n_rows, k)
        shared = (q_key[pos] == p_key) & (p_key > offset)
        lq = q_lp[pos]
    else:
        shared = np.zeros((n_rows, k), dtype=bool)
        lq = np.zeros((n_rows, k))

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        p = np.where(shared, np.exp(p_lp), 0.0)
        q = np.where(shared, np.exp(lq), 0.0)
        terms = np.where(p > 0, p * (p_lp - np.maximum(lq, np.log(Q_FLOOR))), 0.0)
        # Rounding can push the leftover mass a hair below zero; it is a probability, so clip.
        p_r = np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)
        q_r = np.clip(1.0 - q.sum(axis=1), Q_FLOOR, 1.0)
        bucket = np.where(p_r > 0, p_r * (np.log(p_r) - np.log(q_r)), 0.0)
    # KL is non-negative; anything below zero here is rounding.
    return np.maximum(terms.sum(axis=1) + bucket, 0.0)


def top1_agreement(p_top1: np.ndarray, q_top1: np.ndarray) -> np.ndarray:
    """[T] ids, [T] ids -> [T] bool."""
    a, b = np.asarray(p_top1), np.asarray(q_top1)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"expected two [T] arrays, got {a.shape} and {b.shape}")
    return a == b


def summarize(kl_per_text: Sequence[np.ndarray], agree_per_text: Sequence[np.ndarray], resamples: int,
              seed: int, confidence: float = 0.95) -> Summary:
    """Percentile bootstrap over texts (resample whole texts with replacement, numpy default_rng(seed)),
    recomputing the token-weighted mean KL, the pooled p99 and the agreement rate per resample."""
    if not kl_per_text or len(kl_per_text) != len(agree_per_text):
        raise ValueError(f"need non-empty, aligned per-text lists ({len(kl_per_text)} vs {len(agree_per_text)})")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"bad resamples={resamples} or confidence={confidence}")
    kls = [np.asarray(x, dtype=np.float64).ravel() for x in kl_per_text]
    agrees = [np.asarray(x, dtype=bool).ravel() for x in agree_per_text]
    lengths = np.array([x.size for x in kls])
    # An empty text would let a resample hold no tokens at all, so the caller drops them.
    if (lengths == 0).any() or any(a.size != n for a, n in zip(agrees, lengths)):
        raise ValueError("every text needs at least one position, with as many agreement flags as KL values")
    flat_kl, flat_agree = np.concatenate(kls), np.concatenate(agrees)
    if not np.isfinite(flat_kl).all():
        raise ValueError("per-position KL contains NaN or inf")

    n = lengths.size
    owner = np.repeat(np.arange(n), lengths)
    kl_sum = np.bincount(owner, weights=flat_kl, minlength=n)
    agree_sum = np.bincount(owner, weights=flat_agree, minlength=n)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    boot = np.empty((resamples, 3))
    for r in range(resamples):
        counts = np.bincount(idx[r], minlength=n)
        tokens = counts @ lengths
        boot[r] = (counts @ kl_sum / tokens, np.quantile(np.repeat(flat_kl, counts[owner]), 0.99),
                   100.0 * (counts @ agree_sum) / tokens)
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha], axis=0)
    ci = [(float(a), float(b)) for a, b in zip(lo, hi)]
    return Summary(kl_mean=float(flat_kl.mean()), kl_mean_ci=ci[0],
                   kl_p99=float(np.quantile(flat_kl, 0.99)), kl_p99_ci=ci[1],
                   top1_agreement=float(100.0 * flat_agree.mean()), top1_agreement_ci=ci[2],
                   n_texts=int(n), n_tokens=int(flat_kl.size))


def band(kl_mean: float) -> str:
    """llm-compressor's reading: 'excellent' (<0.1), 'moderate' (0.1-1), 'large' (>1)."""
    if not np.isfinite(kl_mean) or kl_mean < 0:
        raise ValueError(f"mean KL must be finite and non-negative, got {kl_mean}")
    return "excellent" if kl_mean < 0.1 else "moderate" if kl_mean <= 1.0 else "large"


@dataclass(frozen=True)
class Read:
    """A variant's fidelity as decide reads it: evaluate's record (result.json), and where it was
    measured, its summary over texts (None otherwise: the record's status and why say what happened)."""
    record: Fidelity
    summary: Summary | None = None

    @property
    def band(self) -> str | None:
        return band(self.summary.kl_mean) if self.summary is not None else None

    def as_dict(self) -> dict:
        return {**asdict(self.record), **(self.summary.as_dict() if self.summary else {}), "band": self.band}
