"""Group-sequential non-inferiority: the critical values that let a verdict be read at several looks
with its error rate still alpha. Pure (numpy, stdlib).

A metric's verdict is a one-sided test at alpha = (1 - confidence) / 2 on each side of the margin -T:
pass when the lower bound of the tier-minus-baseline interval is >= -T, fail when the upper bound is
< -T. Read at K looks with the fixed-n critical value every time, each side's error rate grows with K
(about 0.06 instead of 0.025 at 4 looks: tests/test_sequential.py simulates it). This module spends
alpha over the looks instead, with the Lan-DeMets spending function of O'Brien-Fleming type
(Lan & DeMets, Biometrika 1983; Jennison & Turnbull, "Group Sequential Methods", 2000, ch. 7):

    alpha(t) = 2 - 2 * Phi(z_{1 - alpha/2} / sqrt(t)),   t = information fraction (samples / cap),

and finds each look's critical value c_k so that the probability, under a true difference exactly at
the margin, of first crossing at look k is alpha(t_k) - alpha(t_{k-1}). The crossing probabilities are
computed by numerical integration of the score process (a Brownian motion in t under the normal
approximation; Jennison & Turnbull ch. 19). Each side is computed on its own (the other side's
stopping is "non-binding"), which can only lower the real error rate.

At a look the repeated confidence interval is delta -/+ c_k * SE, i.e. a two-sided interval at
`nominal_confidence(c_k)`: that is the confidence at which the paired interval is read at that look.

    python -m pipeline.scoring.verdict.sequential 0.25 0.5 0.75 1     # the critical values of a schedule
"""
from __future__ import annotations

import functools
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_N = statistics.NormalDist()
_GRID = 1501          # points of the integration grid per look; boundaries are good to ~1e-4 at this size
_SPAN = 8.0           # the grid covers +-8 SD of the score process


def spent(t: float, alpha: float) -> float:
    """Alpha spent by information fraction t (Lan-DeMets, O'Brien-Fleming type), one side."""
    if t <= 0:
        return 0.0
    return 2.0 - 2.0 * _N.cdf(_N.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(min(t, 1.0)))


def _upper_tail(x: float, grid: np.ndarray, dens: np.ndarray, step: float, var: float) -> float:
    """P(B_k >= x, not stopped before) from the sub-density of B_{k-1} on `grid` and the increment's
    variance."""
    tail = 0.5 * _erfc((x - grid) / math.sqrt(2.0 * var))
    return float(np.trapezoid(dens * tail, dx=step))


def _erfc(x: np.ndarray) -> np.ndarray:
    """erfc, vectorised (numpy has none): Numerical Recipes' Chebyshev fit, fractional error < 1.2e-7
    everywhere, far below the grid's own error."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = t * np.exp(poly)
    return np.where(x >= 0, r, 2.0 - r)


def _trapezoid_weights(n: int) -> np.ndarray:
    w = np.ones(n)
    w[0] = w[-1] = 0.5
    return w


def _solve(f, lo: float, hi: float, target: float) -> float:
    """x in [lo, hi] with f(x) = target for f decreasing in x (bisection: f is smooth and monotone)."""
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@functools.lru_cache(maxsize=64)
def _critical(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    return tuple(_compute(fractions, alpha))


def critical_values(fractions: Sequence[float], alpha: float) -> list[float]:
    """One-sided critical z-values c_1..c_K for looks at information fractions `fractions` (increasing,
    last 1.0), spending `alpha` with the O'Brien-Fleming-type function."""
    return list(_critical(tuple(float(t) for t in fractions), float(alpha)))


def _compute(fractions: Sequence[float], alpha: float) -> list[float]:
    ts = [float(t) for t in fractions]
    if not ts or any(b <= a for a, b in zip(ts, ts[1:])) or ts[0] <= 0 or abs(ts[-1] - 1.0) > 1e-9:
        raise ValueError(f"look fractions must increase within (0, 1] and end at 1, got {list(fractions)}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    cs: list[float] = []
    grid = dens = None
    step = 0.0
    t_prev, spent_prev = 0.0, 0.0
    for t in ts:
        target = spent(t, alpha) - spent_prev
        if grid is None:
            c = _N.inv_cdf(1.0 - target)
        else:
            var = t - t_prev
            c = _solve(lambda z: _upper_tail(z * math.sqrt(t), grid, dens, step, var), -10.0, 40.0, target) \
                if target > 0 else math.inf
        cs.append(c)
        # the sub-density of B(t) on the continuation region B(t) < c * sqrt(t)
        bound = c * math.sqrt(t)
        new_grid = np.linspace(-_SPAN * math.sqrt(t), min(bound, _SPAN * math.sqrt(t)), _GRID)
        new_step = float(new_grid[1] - new_grid[0])
        if grid is None:
            dens = np.exp(-new_grid ** 2 / (2 * t)) / math.sqrt(2 * math.pi * t)
        else:
            var = t - t_prev
            kernel = np.exp(-(new_grid[:, None] - grid[None, :]) ** 2 / (2 * var)) / math.sqrt(2 * math.pi * var)
            dens = kernel @ (dens * _trapezoid_weights(grid.size)) * step
        grid, step = new_grid, new_step
        t_prev, spent_prev = t, spent(t, alpha)
    return cs


def nominal_confidence(c: float) -> float:
    """The two-sided confidence whose interval ends are delta -/+ c * SE."""
    return 1.0 - 2.0 * (1.0 - _N.cdf(c))


@dataclass(frozen=True)
class Design:
    """When a capped task is looked at, and the critical value at each look."""
    fractions: tuple[float, ...]
    alpha: float                  # one side
    critical: tuple[float, ...]

    @classmethod
    def of(cls, fractions: Sequence[float], confidence: float) -> Design:
        alpha = (1.0 - confidence) / 2.0
        return cls(tuple(fractions), alpha, tuple(critical_values(fractions, alpha)))

    def sizes(self, cap: int) -> list[int]:
        return look_sizes(self.fractions, cap)

    def confidence_at(self, look: int) -> float:
        return nominal_confidence(self.critical[look])


def look_sizes(fractions: Sequence[float], cap: int) -> list[int]:
    """Samples at each look for a task capped at `cap` (distinct, increasing, the last = cap; at least 2
    where the cap allows: a paired interval needs two)."""
    out: list[int] = []
    for f in fractions:
        n = min(max(2, math.ceil(f * cap - 1e-9)), cap)
        if not out or n > out[-1]:
            out.append(n)
    return out


def expected_samples(sizes: Sequence[int], critical: Sequence[float], theta: float, sims: int = 20000,
                     seed: int = 0) -> tuple[float, float]:
    """(expected samples read, probability of a pass) of one metric under the looks, simulated: the
    standardized statistic for non-inferiority Z_k = B(t_k) / sqrt(t_k), B a Brownian motion with drift
    theta = (true delta + margin) x sqrt(cap) / SD; a look stops on |Z_k| >= c_k (pass above, fail below)."""
    cap = sizes[-1]
    t = np.asarray(sizes, dtype=float) / cap
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((sims, len(t))) * np.sqrt(np.diff(t, prepend=0.0)) + theta * np.diff(t, prepend=0.0)
    z = np.cumsum(steps, axis=1) / np.sqrt(t)
    crossed = np.abs(z) >= np.asarray(critical)
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), len(t) - 1)
    n = np.asarray(sizes)[first]
    passed = crossed[np.arange(sims), first] & (z[np.arange(sims), first] > 0)
    return float(n.mean()), float(passed.mean())


def main() -> None:
    fractions = [float(a) for a in sys.argv[1:]] or [0.25, 0.5, 0.75, 1.0]
    d = Design.of(fractions, 0.95)
    for t, c in zip(d.fractions, d.critical):
        print(f"t={t:.3f}  z={c:.4f}  interval confidence {nominal_confidence(c):.5f}")


if __name__ == "__main__":
    main()
