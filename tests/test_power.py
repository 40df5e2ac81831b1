"""pipeline/scoring/planning/power.py against hand-computed values and a simulation of the verdict it plans for.

    python -m pytest -q tests/test_power.py
"""
import math

import numpy as np
import pytest

from pipeline.scoring.planning import power

Z = 1.959964 + 0.841621          # z_{0.975} + z_{0.80}


def test_z_sum_matches_the_tables():
    assert power.z_sum(0.95, 0.8) == pytest.approx(Z, abs=1e-5)
    assert power.z_sum(0.90, 0.8) == pytest.approx(1.644854 + 0.841621, abs=1e-5)


def test_hand_computed_values():
    # s = 10, T = 3: (2.8016 * 10 / 3)^2 = 87.2 -> 88
    assert power.samples_for_power(10, 3) == 88
    # s = 10, n = 24: 2.8016 * 10 / sqrt(24) = 5.72
    assert power.min_detectable_drop(10, 24) == pytest.approx(5.7187, abs=1e-3)
    # the MDD at the required n is at most the tolerance
    assert power.min_detectable_drop(10, 88) <= 3
    assert power.samples_for_power(10, 0) is None
    assert power.samples_for_power(0, 3) == 2


def test_from_the_interval_the_verdict_was_read_on():
    # [-2, +2] at 95% over 100 samples: s = 2 x 10 / 1.96 = 10.2
    p = power.from_interval(-2.0, 2.0, 100, 0.95, margin=3.0)
    sd = 2.0 * 10 / 1.959964
    assert p.sd == pytest.approx(sd, abs=1e-4) and p.n == 100
    assert p.mdd == pytest.approx(Z * sd / 10, abs=1e-3)
    assert p.n_for_80pct_power == math.ceil((Z * sd / 3) ** 2) == 91
    assert p.compact() == "SD 10.2, n=100, MDD 2.9, n80 91"
    assert p.as_dict() == {"sd": p.sd, "n": 100, "mdd": p.mdd, "n_for_80pct_power": 91}
    # a look's repeated interval (wider, at its own level) implies the same spread
    wide = 1.959964 * 10.2 / 10 * (2.807034 / 1.959964)
    assert power.from_interval(-wide, wide, 100, 0.995, 3.0).sd == pytest.approx(10.2, abs=1e-3)
    assert power.from_interval(-1.0, 1.0, 1, 0.95, 3.0) is None


def test_identical_outputs_do_not_plan_a_sample_size_the_verdict_cannot_pass_at():
    """24 identical 0/100 outputs: the sample SD is 0, which planned "n80 2"; the verdict's interval
    keeps a floor, and the plan from it is a size at which identical outputs do pass."""
    from pipeline.scoring.estimators import stats

    same = [100.0] * 20 + [0.0] * 4
    iv = stats.paired_binary_mean(same, same)
    assert float(np.std(np.subtract(same, same))) == 0.0 and iv.lo < -3.0     # cannot pass at 24
    p = power.from_interval(iv.lo, iv.hi, iv.n, 0.95, 3.0)
    assert p.n_for_80pct_power > 24
    at = stats.binary(0, 0, p.n_for_80pct_power, 0.95)
    assert at.lo >= -3.0                                   # identical outputs pass at the planned size


def pass_rate(n: int, sd: float, margin: float, runs: int = 4000, seed: int = 7) -> float:
    """How often the verdict's rule (lower end of the 95% interval >= -margin) passes an unchanged tier."""
    diffs = np.random.default_rng(seed).normal(0.0, sd, size=(runs, n))
    lo = diffs.mean(1) - 1.959964 * diffs.std(1, ddof=1) / math.sqrt(n)
    return float((lo >= -margin).mean())


def test_simulation_gives_80_percent_power():
    n = power.samples_for_power(10, 3)
    assert 0.77 < pass_rate(n, 10, 3) < 0.84
    assert 0.74 < pass_rate(24, 10, power.min_detectable_drop(10, 24)) < 0.84
    assert pass_rate(n // 4, 10, 3) < 0.5          # a quarter of the samples is badly underpowered


def pairs(base: list[float], tier: list[float], key: str) -> list[tuple[dict, dict]]:
    return [({"scores": {key: b}}, {"scores": {key: t}}) for b, t in zip(base, tier)]


def test_powers_plan_every_gated_metric_from_its_own_interval():
    """BLEU and chrF each from their own interval; a metric without one, or without a tolerance, gets none."""
    from pipeline.scoring.estimators.stats import Interval

    ivs = {"bleu": Interval(-1.0, -3.0, 1.0, 4), "chrf": Interval(-0.5, -2.0, 1.0, 4)}
    out = power.powers(["bleu", "chrf", "acc"], {"bleu": 1.0, "chrf": 2.0, "acc": 3.0}, 0.95, ivs, {"bleu": 0.95, "chrf": 0.95})
    assert set(out) == {"bleu", "chrf"}
    assert out["bleu"].sd == pytest.approx(2.0 * 2 / 1.959964, abs=1e-4)
    assert out["chrf"].sd == pytest.approx(1.5 * 2 / 1.959964, abs=1e-4)
    assert power.powers(["bleu"], {}, 0.95, ivs, {"bleu": 0.95}) == {}


def test_the_samples_to_settle_are_the_same_count_at_the_observed_effect():
    # [-4, 0] over 100 samples, 1 point from the margin: the half-width 2 must shrink to 1 -> 100 x (2/1)^2,
    # which is samples_for_power at the interval's own confidence and power 0.5 (judge.samples_to_settle)
    for c in (0.95, 0.956, 0.99999):
        assert power.to_settle(-4.0, 0.0, 100, c, 1.0) == 400
        assert power.to_settle(-4.0, 0.0, 100, c, 1.0) == power.samples_for_power(
            power.spread(-4.0, 0.0, 100, c), 1.0, c, 0.5)
    assert power.to_settle(-4.0, 0.0, 100, 0.95, 0.0) is None
    # the page's close call (fp8-auto, classification): [-3.34, -0.16] at 95.6% over 955, 1.28 from -3
    assert power.to_settle(-3.3399356945929535, -0.15669975019946542, 955, 0.9559997485404885,
                           abs(-1.7187500000000004 + 3.0)) == 1474
