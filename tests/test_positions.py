"""Fidelity by position (pipeline/scoring/estimators/positions.py): edges, bucketing against a brute-force loop,
the t quantile against published values, and the interval's coverage by simulation."""
import math

import numpy as np
import pytest

from pipeline.scoring.estimators import positions


def test_default_edges_double_up_to_the_smaller_limit():
    assert positions.bucket_edges(8192, 4096) == [0, 512, 1024, 2048, 4096]
    assert positions.bucket_edges(8192, 8192) == [0, 512, 1024, 2048, 4096, 8192]
    assert positions.bucket_edges(2048, 32768) == [0, 512, 1024, 2048]
    assert positions.bucket_edges(3000, 4096) == [0, 512, 1024, 2048, 3000]
    assert positions.bucket_edges(300, 4096) == [0, 300]


def test_given_edges_are_clipped_to_the_limit():
    assert positions.bucket_edges(8192, 4096, edges=[0, 1000, 3000, 6000]) == [0, 1000, 3000, 4096]
    with pytest.raises(ValueError, match="start at 0"):
        positions.bucket_edges(8192, 4096, edges=[100, 1000])
    with pytest.raises(ValueError, match="strictly increasing"):
        positions.bucket_edges(8192, 4096, edges=[0, 1000, 1000])
    with pytest.raises(ValueError, match="must be positive"):
        positions.bucket_edges(0, 4096)


@pytest.mark.parametrize("p,df,expected", [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 3, 3.1824), (0.975, 5, 2.5706), (0.975, 7, 2.3646),
    (0.975, 29, 2.0452), (0.95, 5, 2.0150), (0.995, 10, 3.1693), (0.9, 60, 1.2958),
])
def test_t_quantile_matches_the_tables(p, df, expected):
    assert positions.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_interval_by_hand():
    x = [0.1, 0.3, 0.2, 0.6]
    m, lo, hi = positions.t_interval(x)
    half = 3.1824463 * np.std(x, ddof=1) / 2
    assert m == pytest.approx(0.3) and lo == pytest.approx(0.3 - half) and hi == pytest.approx(0.3 + half)
    assert positions.t_interval([0.4]) == (0.4, None, None)
    with pytest.raises(ValueError, match="finite"):
        positions.t_interval([0.1, float("nan")])


def brute_force(kls, agrees, edges):
    """Each position of each text put in its bucket one at a time; per-text means, then their mean."""
    rows = []
    for b in range(len(edges) - 1):
        per_kl, per_ag, n = [], [], 0
        for kl, ag in zip(kls, agrees):
            mine = [t for t in range(len(kl)) if edges[b] <= t < edges[b + 1]]
            if mine:
                per_kl.append(sum(kl[t] for t in mine) / len(mine))
                per_ag.append(100.0 * sum(bool(ag[t]) for t in mine) / len(mine))
                n += len(mine)
        rows.append((len(per_kl), n, per_kl, per_ag))
    return rows


def test_buckets_match_a_brute_force_computation():
    rng = np.random.default_rng(3)
    lengths = [1, 37, 511, 512, 513, 900, 2047, 2048, 2600, 5000]
    kls = [rng.gamma(0.5, 0.02, size=n) for n in lengths]
    agrees = [rng.random(n) < 0.9 for n in lengths]
    edges = positions.bucket_edges(8192, 4096)
    got = positions.by_position(kls, agrees, edges)
    assert [(b.lo, b.hi) for b in got] == list(zip(edges, edges[1:]))
    for b, (n_texts, n_pos, per_kl, per_ag) in zip(got, brute_force(kls, agrees, edges)):
        assert (b.n_texts, b.n_positions) == (n_texts, n_pos)
        assert b.kl_mean == pytest.approx(sum(per_kl) / len(per_kl), rel=1e-12)
        assert b.top1 == pytest.approx(sum(per_ag) / len(per_ag), rel=1e-12)
        q = positions.t_quantile(0.975, n_texts - 1)
        half_kl = q * np.std(per_kl, ddof=1) / math.sqrt(n_texts)
        half_ag = q * np.std(per_ag, ddof=1) / math.sqrt(n_texts)
        assert b.kl_ci == pytest.approx((max(0.0, b.kl_mean - half_kl), b.kl_mean + half_kl), rel=1e-9)
        assert b.top1_ci == pytest.approx((max(0.0, b.top1 - half_ag), min(100.0, b.top1 + half_ag)), rel=1e-9)
    # positions 4096.. of the 5,000-token text are past the limit: not counted anywhere
    assert sum(b.n_positions for b in got) == sum(min(n, 4096) for n in lengths)
    assert got[-1].reach == 4096 and got[-1].n_texts == 2


def test_unreached_and_single_text_buckets():
    got = positions.by_position([np.full(600, 0.01)], [np.ones(600, bool)], [0, 512, 1024, 2048])
    assert got[0].kl_mean == pytest.approx(0.01) and got[0].kl_ci is None and got[0].top1 == 100.0
    assert (got[1].n_texts, got[1].n_positions, got[1].reach) == (1, 88, 600)
    assert got[2].kl_mean is None and got[2].n_texts == 0
    assert got[2].as_dict()["kl_ci"] is None


def test_bad_inputs():
    with pytest.raises(ValueError, match="aligned"):
        positions.by_position([np.zeros(3)], [], [0, 2])
    with pytest.raises(ValueError, match="finite: False"):
        positions.by_position([np.array([0.1, np.inf])], [np.ones(2, bool)], [0, 2])
    with pytest.raises(ValueError, match="3 KL values .* and 2 agreement"):
        positions.by_position([np.zeros(3)], [np.ones(2, bool)], [0, 2])


# --- coverage ---------------------------------------------------------------------------------------
# Texts differ: text i's KL at position t is m_i * (1 + t / 300) * e_it, m_i ~ Gamma(4, mu / 4) (per-text
# means with a coefficient of variation of 0.5, skewed like KL), e_it ~ Exponential(1), independent.
# The estimand of a bucket is the expected per-text mean there, mu * mean of (1 + t / 300) over the
# bucket's positions. 6 texts, the size a long-context run affords.
MU, TEXTS, LENGTH, EDGES = 0.05, 6, 300, [0, 100, 200, 300]


def _simulated(reps, seed):
    rng = np.random.default_rng(seed)
    m = rng.gamma(4.0, MU / 4.0, size=(reps, TEXTS, 1))
    growth = 1.0 + np.arange(LENGTH) / 300.0
    kl = m * growth * rng.exponential(1.0, size=(reps, TEXTS, LENGTH))
    truth = [MU * growth[lo:hi].mean() for lo, hi in zip(EDGES, EDGES[1:])]
    return kl, truth


def test_kl_interval_covers_at_its_level():
    reps = 800
    kl, truth = _simulated(reps, seed=11)
    agree = np.ones(LENGTH, bool)
    hits = np.zeros(len(truth))
    for r in range(reps):
        for i, b in enumerate(positions.by_position(list(kl[r]), [agree] * TEXTS, EDGES)):
            hits[i] += b.kl_ci[0] <= truth[i] <= b.kl_ci[1]
    coverage = hits / reps
    # 0.93 at 4,000 reps (skewed per-text means cost t two points); sd of one estimate here ~0.009
    assert ((coverage >= 0.90) & (coverage <= 0.97)).all(), coverage


def test_the_coverage_check_catches_weaker_intervals():
    """The same check fails two intervals it is meant to rule out: one over positions (each position an
    independent sample: far too narrow) and the percentile bootstrap over texts (too narrow at 6 texts)."""
    reps = 800
    kl, truth = _simulated(reps, seed=12)
    first = kl[:, :, :100]
    pooled_m, pooled_se = first.mean(axis=(1, 2)), first.reshape(reps, -1).std(axis=1, ddof=1) / np.sqrt(600)
    over_positions = np.mean(np.abs(pooled_m - truth[0]) <= 1.96 * pooled_se)
    per_text = first.mean(axis=2)                                                   # [reps, texts]
    rng = np.random.default_rng(0)
    boot = np.take_along_axis(per_text[:, None, :], rng.integers(0, TEXTS, (reps, 400, TEXTS)), 2).mean(2)
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=1)
    bootstrap = np.mean((lo <= truth[0]) & (truth[0] <= hi))
    assert over_positions < 0.6 and bootstrap < 0.90, (over_positions, bootstrap)


def test_top1_interval_covers_at_its_level():
    """Agreement: text i agrees at each position with probability p_i ~ Beta(18, 2) (mean 90%)."""
    reps, rng = 800, np.random.default_rng(13)
    p = rng.beta(18.0, 2.0, size=(reps, TEXTS, 1))
    agree = rng.random((reps, TEXTS, 200)) < p
    kl = [np.zeros(200)] * TEXTS
    hits = sum(lo <= 90.0 <= hi for lo, hi in
               (positions.by_position(kl, list(agree[r]), [0, 200])[0].top1_ci for r in range(reps)))
    assert 0.90 <= hits / reps <= 0.97, hits / reps     # 0.92 at 4,000 reps
