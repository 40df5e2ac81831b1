"""Stratified looks for a choice task: read in full the items the baseline barely decides, a share of
the rest, and judge the paired accuracy delta with the stratified estimate (eval.sequential.strata;
docs/decisions/stratified-looks.md). Pure (numpy).

Why. A quantized tier flips the label of an item only where the baseline's two label log-likelihoods
are close: on the default run every flip of the close tiers sat below a baseline margin of 0.5 nats,
about half of the items. Reading the other half at a quarter costs little variance (they rarely move)
and a third of the items (Cochran, "Sampling Techniques", ch. 5; two-phase sampling, ch. 12.2).

The strata: the low one holds the items whose baseline margin |ll(label 1) - ll(label 2)| is below
`below` nats, the high one the rest. Look k reads a share t_k (eval.sequential.looks) of each stratum's
sample, the low stratum's sample being all of it and the high one's `share` of it, in the task's
seeded order: the information at look k stays t_k, so the looks' critical values are those of
sequential.py unchanged.

The estimate and its interval. With W_h = N_h / N the stratum's share of the pool, n_h items read in
it, b_h lost and c_h gained, the delta is d = sum_h W_h (c_h - b_h) / n_h, and its variance as a
two-phase sample (the pool is itself a sample of the task's population):

    V = sum_h W_h^2 S_h^2 / n_h + sum_h W_h (d_h - d)^2 / N,   S_h^2 = p10_h + p01_h - d_h^2

which is (p10 + p01 - d^2) / N, the unstratified score interval's, when every stratum is read in full.
A stratum read in part takes its discordances with half a pair added each way ((b_h + 0.5) /
(n_h + 1)): a high stratum that shows no flip at look 1 has a plug-in variance of zero, and a
floor is what keeps the interval honest there (the simulator shows the rate with and without it).
The interval is the paired score interval (paired_binary) of the effective counts that have this
variance: n_eff = (p10' + p01' - d^2) / V, the design's effective sample size (Kish), lost and
gained as n_eff (q -/+ d) / 2 with q the floored discordance. n_eff never exceeds the pool.

    from pipeline.scoring.estimators import strata
    strata.effective([40, 1], [35, 0], [640, 160], [640, 640])    # (lost, gained, n) for paired_binary
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

FLOOR = 0.5          # half a discordant pair each way in a stratum read in part


def label_margin(logliks: Sequence[float]) -> float:
    """The baseline's margin on an item: its best label's log-likelihood over the next best's, in nats
    (0 for an exact tie)."""
    top = sorted((float(x) for x in logliks), reverse=True)
    return top[0] - top[1] if len(top) > 1 else math.inf


def assign(margins: Sequence[float], below: float) -> np.ndarray:
    """Stratum per item: 0 where the baseline's margin is below `below` (read in full), else 1."""
    return (np.asarray(margins, dtype=float) >= below).astype(int)


def stratum_reads(sizes: Sequence[int], share: float, fractions: Sequence[float]) -> list[list[int]]:
    """Items read per stratum at each look: look k reads ceil(t_k x its sample) of each stratum, the
    sample being all of stratum 0 and `share` of stratum 1 (at least 1 item of a non-empty stratum)."""
    full = [sizes[0], min(sizes[1], max(1 if sizes[1] else 0, math.ceil(share * sizes[1] - 1e-9)))]
    out = []
    for t in fractions:
        out.append([min(s, max(1 if s else 0, math.ceil(t * s - 1e-9))) for s in full])
    return out


def look_reads(pool: Sequence[int], share: float, fractions: Sequence[float]) -> tuple[list[float], list[list[int]]]:
    """(the looks' fractions, items read per stratum by each look) of a stratified task whose strata hold
    `pool` items: stratum_reads, a look that reads no more than the one before dropped (a small pool
    can give two looks the same items: the later one stays, with its fraction)."""
    reads = stratum_reads(pool, share, fractions)
    kept: list[int] = []
    for k, r in enumerate(reads):
        if kept and sum(r) == sum(reads[kept[-1]]):
            kept[-1] = k
        else:
            kept.append(k)
    return [float(fractions[k]) for k in kept], [reads[k] for k in kept]


def look_order(order: Sequence[int], stratum_of: dict[int, int], reads: Sequence[Sequence[int]]) -> list[int]:
    """The documents in the order a stratified task reads them: look k's new items of stratum 0, then of
    stratum 1, each stratum in the task's seeded `order`, so every look's prefix is look k's sample."""
    by = [[d for d in order if stratum_of[d] == h] for h in (0, 1)]
    out: list[int] = []
    prev = [0, 0]
    for counts in reads:
        for h in (0, 1):
            out += by[h][prev[h]:counts[h]]
        prev = list(counts)
    return out


def effective(lost, gained, read, pool, floor: float = FLOOR):
    """(lost, gained, n) of the unstratified sample with the stratified estimate's delta and variance
    (module docstring). Arguments per stratum along the last axis (vectorised over leading axes):
    `lost`/`gained` the discordant items read, `read` the items read, `pool` the stratum's size."""
    b, c, n, big = (np.asarray(x, dtype=float) for x in (lost, gained, read, pool))
    total = big.sum(-1, keepdims=True)
    w = big / total
    n_safe = np.maximum(n, 1.0)
    d_h = (c - b) / n_safe
    d = (w * d_h).sum(-1)
    part = n < big                                       # read in part: floored
    bf = np.where(part, (b + floor) / (n + 2 * floor), b / n_safe)
    cf = np.where(part, (c + floor) / (n + 2 * floor), c / n_safe)
    s2 = np.maximum(bf + cf - d_h ** 2, 0.0)
    var = (w ** 2 * s2 / n_safe).sum(-1) + (w * (d_h - d[..., None]) ** 2).sum(-1) / total[..., 0]
    q = (w * (bf + cf)).sum(-1)
    spread = np.maximum(q - d ** 2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(var > 0, spread / var, total[..., 0])
    n_eff = np.clip(n_eff, 2.0, total[..., 0])
    return n_eff * (q - d) / 2.0, n_eff * (q + d) / 2.0, n_eff
