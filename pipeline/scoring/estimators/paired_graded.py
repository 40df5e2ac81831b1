"""Intervals for a paired difference of a graded metric (ROUGE, per-sentence chrF; BLEU and chrF as
corpus scores through their jackknife pseudo-values: stats.paired_corpus), valid when most
differences are exact zeros. Pure (numpy, scipy).

Why not delta -/+ c x bootstrap SE. Greedy outputs of a close tier are often byte-identical to the
baseline's, so tier - baseline is mostly exact zeros and a few large moves. A sample that happened to
catch fewer of the moves has both a smaller drop and a smaller SE, so the Wald interval passes a
tier exactly at the margin far more often than promised (0.21 at cap 96 with 10% of outputs moved by
30 points; with every output identical the SE is 0 and anything passes).

The test of H0: mean difference = d uses the variance that d itself requires. If only a fraction q
of samples differ, a mean difference d needs changes of size about d / q, so (Cauchy-Schwarz,
E[D^2] >= E[D]^2 / P(D != 0)) any distribution with mean d and change rate q has variance at least

    floor(d) = d^2 (1 - q) / q,   q = max(observed change rate, |d| / reach)

where `reach` is the largest move one sample can make in d's direction (a 0-100 score: a drop can be
at most the baseline's own score, a gain at most 100 minus it), so q can never be below |d| / reach.
The statistic is studentized at d with that variance, the larger of it and the sample variance:

    Z(d) = (mean - d) / sqrt(max(s^2, floor(d)) / n),

and read against Student's t with n - 1 degrees of freedom at the look's level (the normal quantile
is too small for the first looks' few samples). The interval is {d : |Z(d)| < t}. A few observed
changes make the floor large, so a sample that missed the moves cannot pass on a small SE; with no
change at all the interval is as wide as a tier at the margin that moves |d| / reach of its samples
by `reach` would allow. This is the variance-at-the-null idea of score intervals (Tango 1998, the
binary case in paired_binary.py) carried to graded scores with the variance bound in place of the
binomial one. Its error rates on zero-inflated, heavy-tailed, tied and Gaussian differences, and on
a run's own differences, are simulated by `python -m pipeline.scoring.simulation.simulate`
(tests/test_simulate.py; docs/decisions/graded-interval.md).

    from pipeline.scoring.estimators import paired_graded
    s = paired_graded.summary(diffs, base_scores)
    paired_graded.interval(s, confidence=0.99)      # (lo, hi) of the mean difference
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SCALE = 100.0          # per-sample metrics are 0-100 (pipeline/domain/sets/metrics.py)
# where a move counts as large, in metric points: the floors are taken at each (data-independent)
THRESHOLDS = (0.0, 2.0, 5.0, 10.0, 20.0, 40.0)
TAIL_FIELDS = 5
_GRID = 401
_STEPS = 40


@dataclass(frozen=True)
class Summary:
    """What the interval needs of a set of paired differences."""
    n: int
    mean: float
    var: float            # sample variance (ddof 1)
    changed: int          # pairs whose difference is not exactly 0
    reach_down: float     # the largest drop one sample can make (> 0)
    reach_up: float       # the largest gain one sample can make (> 0)
    # per side (drops, gains) and threshold u: tail_stats, flattened
    tails: tuple[float, ...] = ()

    def as_list(self) -> list:
        return [self.n, self.mean, self.var, self.changed, self.reach_down, self.reach_up, self.tail_array()]

    def tail_array(self) -> np.ndarray:
        return np.asarray(self.tails, dtype=float).reshape(2, len(THRESHOLDS), TAIL_FIELDS)


def tail_stats(d: np.ndarray) -> np.ndarray:
    """[..., side, threshold, 5] over the last axis of `d`: side 0 the drops below -u, side 1 the gains
    above u; the 5: share of moves beyond u, mean of D and of D^2 over the other pairs (0 on the
    moves), mean of D and of D^2 over the moves (0 elsewhere)."""
    out = []
    x = d[..., None, :]
    for beyond in (x < -np.asarray(THRESHOLDS)[:, None], x > np.asarray(THRESHOLDS)[:, None]):
        rest, tail = np.where(beyond, 0.0, x), np.where(beyond, x, 0.0)
        out.append(np.stack([beyond.mean(-1), rest.mean(-1), (rest * rest).mean(-1), tail.mean(-1),
                             (tail * tail).mean(-1)], axis=-1))
    return np.stack(out, axis=-3)


def summary(diffs: Sequence[float], base: Sequence[float] | None = None, changed: int | None = None,
            reach: tuple[float, float] | None = None) -> Summary:
    """The summary of tier - baseline differences. `base`: the baseline's per-sample scores on a 0-100
    scale (the reach: a drop of at most max(base), a gain of at most 100 - min(base)); else `reach`.
    `changed`: the pairs that differ, when not the non-zero differences (a corpus metric's
    pseudo-values are rarely exactly 0: its changed pairs are the changed outputs)."""
    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        raise ValueError(f"a paired interval needs at least 2 samples, got {d.size}")
    if reach is None:
        b = np.asarray(base, dtype=float) if base is not None else np.array([0.0, SCALE])
        reach = (float(b.max()), float(SCALE - b.min()))
    down, up = (max(float(r), 1e-9) for r in reach)
    n_changed = int(np.count_nonzero(d)) if changed is None else int(changed)
    return Summary(int(d.size), float(d.mean()), float(d.var(ddof=1)), n_changed, down, up,
                   tuple(float(x) for x in tail_stats(d).ravel()))


def null_variance(n, mean, var, changed, down, up, tails, d):
    """The least variance a distribution with mean d can have and still look like the sample: the
    sample variance, and the Cauchy-Schwarz floors. Broadcast: summary fields [k, 1] (tails
    [k, 2, U, 3]), d [k, G]."""
    below = d < mean
    reach = np.where(d < 0, down, up)
    q = np.clip(np.maximum(changed / n, np.abs(d) / reach), 1e-12, 1.0)
    v = np.maximum(var, d * d * (1.0 - q) / q)                      # every move alike
    lower = below[..., None]                                          # [k, G, 1]: the drops' side
    share, rest1, rest2, tail1, tail2 = (np.where(lower, tails[:, None, 0, :, j], tails[:, None, 1, :, j])
                                         for j in range(TAIL_FIELDS))
    # "more of the same": the null reached by more (or fewer) moves beyond u, shaped as those seen,
    # the other pairs scaled alike: mean(w) = rest1 (1 - w) / (1 - share) + tail1 w / share = d
    dd = d[..., None]
    keep = np.maximum(1.0 - share, 1e-12)
    seen = share > 0
    shr = np.where(seen, share, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = (dd - rest1 / keep) / (tail1 / shr - rest1 / keep)
        var_w = rest2 * (1.0 - w) / keep + tail2 * w / shr - dd * dd
    floors = np.where(seen & (w > share) & (w <= 1.0), np.nan_to_num(var_w, nan=0.0), 0.0)
    return np.maximum(v, floors.max(-1))


def _z(n, mean, var, changed, down, up, tails, d):
    """Z(d): the studentized difference at the null variance of d."""
    v = null_variance(n, mean, var, changed, down, up, tails, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mean - d) / np.sqrt(v / n)
    return np.where(mean == d, 0.0, np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf))


def critical(n, confidence: float):
    """Student's t quantile, n - 1 degrees of freedom, of a two-sided interval at `confidence`."""
    from scipy.stats import t       # lazy: scipy takes a second to import

    return t.ppf(0.5 + confidence / 2.0, np.maximum(np.asarray(n) - 1, 1))


def interval(s: Summary, confidence: float) -> tuple[float, float]:
    """(lo, hi): the hypothesised differences d the data do not reject at `confidence` two-sided,
    i.e. |Z(d)| < t (`intervals`, for one summary)."""
    fields = [np.array([x], dtype=float) for x in s.as_list()[:6]]
    lo, hi = intervals(*fields, s.tail_array()[None], confidence=confidence)
    return float(lo[0]), float(hi[0])


def intervals(n, mean, var, changed, down, up, tails, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised over k summaries (fields as Summary.as_list orders them, `tails` [k, 2, U, 3]). Z is
    not monotone in d (the floors grow with |d|), so each end is the outermost d still plausible on
    a grid over [-reach_down, reach_up], refined by bisection against its rejected outer neighbour:
    the interval is the hull of the plausible set, never narrower than it."""
    n, mean, var, changed, down, up = (np.asarray(x, dtype=float)[:, None] for x in (n, mean, var, changed, down, up))
    fields = (n, mean, var, changed, down, up, np.asarray(tails, dtype=float))
    c = critical(n, confidence)
    u = np.linspace(0.0, 1.0, _GRID)[None, :]
    lo_grid = -down + u * (np.minimum(mean, up) + down)           # from -reach_down in to the estimate
    hi_grid = up - u * (up - np.maximum(mean, -down))             # from reach_up in to the estimate
    return _end(fields, c, lo_grid, 1.0), _end(fields, c, hi_grid, -1.0)


def _end(fields, c, grid: np.ndarray, side: float) -> np.ndarray:
    """Per row, the first plausible point of `grid` (ordered from the outside in), refined between it
    and the rejected point before it. `side`: +1 for the lower end (Z(d) >= c rejects), -1 the upper."""
    plausible = side * _z(*fields, grid) < c
    i = np.argmax(plausible, axis=1)                  # the estimate (last point) is always plausible
    rows = np.arange(grid.shape[0])
    inner = grid[rows, i]
    outer = grid[rows, np.maximum(i - 1, 0)]
    for _ in range(_STEPS):
        mid = 0.5 * (outer + inner)
        ok = side * _z(*fields, mid[:, None])[:, 0] < c[:, 0]
        inner = np.where(ok, mid, inner)
        outer = np.where(ok, outer, mid)
    return inner
