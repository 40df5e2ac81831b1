"""Intervals for a paired difference of two proportions (accuracy, exact match: every sample 0 or 1),
the score interval with a continuity correction. Pure (numpy, stdlib); vectorised over arrays of counts.

Why not the bootstrap. Per sample, tier - baseline is -1, 0 or +1. When a tier loses only a few
samples and gains none, the bootstrap's spread (and any Wald interval's) is estimated from a handful of
discordant pairs and is far too narrow: with no discordant pair it is zero, so five identical answers
"pass" a 5-point margin. Simulated at the margin, with the looks of eval.sequential, the
bootstrap-SE rule passed a tier exactly at a 3-point margin 6.6% of the time at a cap of 640, 33% at
160, 87% at 20, where the procedure promises 2.5% (tests/test_paired_binary.py).

The score interval (Tango, Stat. Med. 1998; Newcombe, Stat. Med. 1998, method 10 compares it with the
alternatives) takes the variance under each hypothesised difference d from the restricted maximum
likelihood estimate of the cell probabilities, so a tier that lost 3 of 20 has the variance of a
tier that could have lost 3 in 20 at d, not of the 3 it lost. With b samples the baseline got right
and the tier wrong, c the other way, n in all:

    p10 = restricted MLE of P(baseline right, tier wrong) given p01 - p10 = d  (a quadratic, below)
    Z(d) = (c - b - n d -/+ 0.5) / (n sqrt((p10 + p01 - d^2) / n))

The 0.5 is a continuity correction of the lattice of c - b (steps of 1): without it the test on the
fail side is anti-conservative when discordances are one-sided (3.7% false fails at the margin, cap
640); with it both sides stay within alpha at every cap simulated (20-640), at about 3 points of
power at 640 for an unchanged tier. The interval {d : |Z(d)| < z} is found by bisection.

    from pipeline.scoring.estimators import paired_binary
    paired_binary.interval(b=4, c=1, n=160, confidence=0.95)    # (lo, hi) of c/n - b/n
"""
from __future__ import annotations

from statistics import NormalDist

import numpy as np

CONTINUITY = 0.5        # half a step of c - b
_STEPS = 40             # bisection steps: 2^-40 of the [-1, 1] range


def restricted_p10(b, c, n, d):
    """The MLE of p10 under p01 = p10 + d, from the multinomial likelihood p10^b p01^c (1-p10-p01)^m:
    the larger root of 2n p^2 - B p - b d (1 - d) = 0, B = (b + c)(1 - d) - 2d(b + m). Vectorised."""
    b, c, n, d = (np.asarray(x, dtype=float) for x in (b, c, n, d))
    return _p10(b, c, n, d)


def _p10(b, c, n, d):
    big_b = (b + c) * (1.0 - d) - 2.0 * d * (n - c)        # b + m = n - c
    disc = np.maximum(big_b * big_b + 8.0 * n * b * d * (1.0 - d), 0.0)
    return (big_b + np.sqrt(disc)) / (4.0 * n)


def _z(b, c, n, d, continuity):
    """The score statistic Z(d) of H0: p01 - p10 = d; large and positive when the data say the
    difference is above d."""
    var = np.maximum(2.0 * _p10(b, c, n, d) + d - d * d, 0.0) / n
    num = (c - b) - n * d
    num = np.sign(num) * np.maximum(np.abs(num) - continuity, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num == 0, 0.0, (num / n) / np.sqrt(var))


def interval(b, c, n, confidence: float, continuity: float = CONTINUITY):
    """(lo, hi) of p01 - p10 = (c - b)/n at `confidence` (two-sided), as fractions; vectorised over
    arrays of counts. Z(d) decreases in d, so each bound is one bisection, both run together: the
    lower bound searched in [-1, delta] for Z = z, the upper in [delta, 1] for Z = -z."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    b, c, n = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (b, c, n)))
    delta = (c - b) / n
    bb, cc, nn = (np.concatenate([x.ravel(), x.ravel()]) for x in (b, c, n))
    side = np.concatenate([np.ones(delta.size), -np.ones(delta.size)])
    inner = np.concatenate([delta.ravel(), delta.ravel()])      # plausible end (Z = 0 there)
    outer = -side                                               # implausible end: -1 or +1
    for _ in range(_STEPS):
        mid = (inner + outer) / 2.0
        plausible = side * _z(bb, cc, nn, mid, continuity) < z
        inner = np.where(plausible, mid, inner)
        outer = np.where(plausible, outer, mid)
    return inner[:delta.size].reshape(delta.shape), inner[delta.size:].reshape(delta.shape)
