"""pipeline/scoring/power.py against hand-computed values and a simulation of the verdict it plans for.

    python -m pytest -q tests/test_power.py
"""
import math

import numpy as np
import pytest

from pipeline.scoring import analysis, power

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


def test_observed_from_paired_differences():
    # one right->wrong flip in four: mean -25, sample SD sqrt((75^2 + 3 * 25^2) / 3) = 50
    p = power.observed([-100.0, 0.0, 0.0, 0.0], margin=3.0)
    assert p.sd == pytest.approx(50.0) and p.n == 4
    assert p.mdd == pytest.approx(Z * 50 / 2, abs=1e-3)
    assert p.n_for_80pct_power == math.ceil((Z * 50 / 3) ** 2) == 2181
    assert p.compact() == "SD 50.0, n=4, MDD 70.0, n80 2,181"
    assert p.as_dict() == {"sd": p.sd, "n": 4, "mdd": p.mdd, "n_for_80pct_power": 2181}
    assert power.observed([1.0], margin=3.0) is None


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


def test_sample_diffs_flip_lower_is_better_and_give_corpus_metrics_none():
    p = pairs([50.0, 60.0], [40.0, 70.0], "chrf")
    assert analysis.sample_diffs("bleu", p) is None and analysis.sample_diffs("chrf", p) is None
    assert analysis.sample_diffs("acc", p) is None
    # the direction is the task's (its YAML's higher_is_better), passed in
    assert analysis.sample_diffs("loss", pairs([1.0, 1.0], [2.0, 1.0], "loss"), higher_is_better=False) == [-1.0, 0.0]


def test_corpus_metrics_plan_from_their_own_bootstrap_standard_error():
    """BLEU and chrF get their own SD (bootstrap SE x sqrt(n)); before, both took sentence chrF's."""
    from pipeline.scoring.stats import Interval

    p = pairs([50.0, 60.0, 55.0, 52.0], [40.0, 70.0, 50.0, 58.0], "chrf")
    ivs = {"bleu": Interval(-1.0, -3.0, 1.0, 4, se=1.5), "chrf": Interval(-0.5, -2.0, 1.0, 4, se=0.5)}
    out = analysis.powers(["bleu", "chrf"], p, {"bleu": 1.0, "chrf": 2.0}, 0.95, None, ivs)
    assert out["bleu"].sd == pytest.approx(3.0) and out["chrf"].sd == pytest.approx(1.0)
    assert out["bleu"].n_for_80pct_power == power.samples_for_power(3.0, 1.0)
    assert analysis.powers(["bleu"], p, {"bleu": 1.0}, 0.95) == {}      # no interval: no power line


def test_the_bootstrap_standard_error_is_the_spread_of_the_resampled_deltas():
    from pipeline.scoring import stats

    rng = np.random.default_rng(0)
    base, tier = rng.normal(0, 1, 400), rng.normal(0, 1, 400)
    iv = stats.paired_mean(base, tier, 2000, 1)
    assert iv.se == pytest.approx(np.std(tier - base, ddof=1) / np.sqrt(400), rel=0.08)


def test_powers_take_the_direction_per_metric():
    p = pairs([1.0, 1.0, 3.0], [2.0, 1.0, 1.0], "loss")
    out = analysis.powers(["loss"], p, {"loss": 1.0}, 0.95, {"loss": False})
    assert out["loss"].n == 3


def test_powers_only_for_gated_metrics():
    p = pairs([100.0, 100.0, 0.0, 100.0], [0.0, 100.0, 0.0, 100.0], "acc")
    out = analysis.powers(["acc", "macro_f1"], p, {"acc": 3.0}, 0.95)
    assert list(out) == ["acc"] and out["acc"].n == 4 and out["acc"].sd == pytest.approx(50.0)
    assert analysis.powers(["acc"], p, {}, 0.95) == {}
