"""The paired score interval of a 0/100 metric: its restricted MLE, its bounds, and the error rates of the
look-by-look verdicts that use it, by simulation (and the bootstrap-SE rule it replaced, which fails them)."""
import math

from statistics import NormalDist

import numpy as np
import pytest

from pipeline.scoring.estimators import paired_binary, stats
from pipeline.scoring.verdict.margin import OPEN, verdict
from pipeline.scoring.verdict.sequential import Design, look_sizes

LOOKS = (0.25, 0.5, 0.75, 1.0)
REPS = 6000


def _mc_bound(p, reps=REPS):
    return p + 3 * math.sqrt(p * (1 - p) / reps)


@pytest.mark.parametrize("b,c,n,d", [(3, 1, 50, -0.05), (0, 0, 20, -0.05), (5, 0, 160, -0.03),
                                     (10, 12, 160, -0.03), (2, 7, 40, 0.1), (0, 4, 30, 0.05)])
def test_the_restricted_mle_maximises_the_likelihood_under_the_constraint(b, c, n, d):
    m = n - b - c
    grid = np.linspace(max(0.0, -d), (1 - d) / 2, 200001)[1:-1]
    loglik = b * np.log(grid) + c * np.log(np.maximum(grid + d, 1e-300)) + m * np.log(1 - 2 * grid - d)
    assert paired_binary.restricted_p10(b, c, n, d) == pytest.approx(grid[np.argmax(loglik)], abs=2e-5)


def test_the_interval_holds_the_estimate_and_narrows_with_n():
    lo, hi = paired_binary.interval(4, 1, 160, 0.95)
    assert lo < -3 / 160 < hi
    lo2, hi2 = paired_binary.interval(40, 10, 1600, 0.95)
    assert hi2 - lo2 < (hi - lo) / 2.5
    # at large counts it meets the Wald interval of the same data
    b, c, n = 400, 300, 10000
    se = math.sqrt(((b + c) / n - ((c - b) / n) ** 2) / n)
    lo, hi = paired_binary.interval(b, c, n, 0.95)
    assert (lo, hi) == pytest.approx(((c - b) / n - 1.96 * se, (c - b) / n + 1.96 * se), abs=3e-4)


def test_no_discordant_pair_is_not_evidence_of_no_difference():
    """Five identical answers: a bootstrap's interval is [0, 0]; the score interval is wide."""
    iv = stats.paired_binary_mean([100.0] * 5, [100.0] * 5)
    assert iv.discordant == (0, 0) and iv.lo < -30 and iv.hi > 30
    assert verdict(iv.lo, iv.hi, 5.0) == OPEN


def test_a_graded_metric_has_no_discordant_counts():
    iv = stats.paired_graded_mean([40.0, 55.5, 12.0, 80.0], [41.0, 50.0, 12.0, 82.5])
    assert iv.discordant is None and iv.graded is not None


def _counts(rng, cap, lost, gained, reps):
    """Cumulative (lost, gained) at each sample of `reps` simulated variants: per sample the tier loses a
    sample the baseline had with probability `lost`, gains one with `gained`."""
    u = rng.random((reps, cap))
    return np.cumsum(u < lost, axis=1), np.cumsum((u >= lost) & (u < lost + gained), axis=1)


def _rates(cap, margin, lost, gained, rule, seed):
    """Share of simulated variants that pass, and that fail, read at the looks with `rule`'s interval."""
    rng = np.random.default_rng(seed)
    b, c = _counts(rng, cap, lost, gained, REPS)
    sizes = look_sizes(LOOKS, cap)
    design = Design.of([n / cap for n in sizes], 0.95)
    state = np.zeros(REPS, dtype=np.int8)
    for k, n in enumerate(sizes):
        lo, hi = rule(b[:, n - 1], c[:, n - 1], n, design.confidence_at(k))
        open_ = state == 0
        state[open_ & (lo >= -margin)] = 1
        state[open_ & (hi < -margin)] = -1
    return float(np.mean(state == 1)), float(np.mean(state == -1))


def score_rule(b, c, n, conf):
    return paired_binary.interval(b, c, n, conf)


def bootstrap_se_rule(b, c, n, conf):
    """delta -/+ z x SE with the sample SD of the -1/0/+1 differences: what the bootstrap SE estimates."""
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    d = (c - b) / n
    se = np.sqrt(np.maximum((b + c) / n - d * d, 0) / n)
    return d - z * se, d + z * se


# (cap, per-sample loss, gain) with loss - gain exactly the margin: one-sided losses are the hard case
AT_MARGIN = [(20, 0.05, 0.0), (160, 0.03, 0.0), (160, 0.06, 0.03), (640, 0.03, 0.0), (640, 0.04, 0.01)]


@pytest.mark.parametrize("cap,lost,gained", AT_MARGIN)
def test_false_pass_and_false_fail_at_the_margin_are_at_most_alpha(cap, lost, gained):
    margin = lost - gained
    false_pass, _ = _rates(cap, margin, lost, gained, score_rule, 1)
    _, false_fail = _rates(cap, margin + 1e-9, lost, gained, score_rule, 2)
    assert false_pass <= _mc_bound(0.025), false_pass
    assert false_fail <= _mc_bound(0.025), false_fail


@pytest.mark.parametrize("cap,lost,gained", [(20, 0.05, 0.0), (160, 0.03, 0.0), (640, 0.03, 0.0)])
def test_the_bootstrap_se_rule_passes_tiers_at_the_margin_too_often(cap, lost, gained):
    false_pass, _ = _rates(cap, lost - gained, lost, gained, bootstrap_se_rule, 1)
    assert false_pass > _mc_bound(0.025), false_pass


def test_an_unchanged_tier_still_passes_with_high_power():
    """2% of samples flip each way (the default tiers' order), 3-point margin, cap 640."""
    passed, failed = _rates(640, 0.03, 0.02, 0.02, score_rule, 3)
    assert passed >= 0.88 and failed < 0.001, (passed, failed)
