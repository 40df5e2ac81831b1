"""The group-sequential design: published boundaries, and its error rates by simulation."""
import math

import numpy as np
import pytest

from pipeline.scoring.verdict import margin, sequential

# Lan-DeMets O'Brien-Fleming-type boundaries, one-sided alpha 0.025, equally spaced looks, as tabulated
# by gsDesign / ldbounds (e.g. Jennison & Turnbull 2000, table 7.6 analogues): K=5 and K=4.
PUBLISHED = {
    (0.2, 0.4, 0.6, 0.8, 1.0): (4.8769, 3.3569, 2.6803, 2.2898, 2.0310),
    (0.25, 0.5, 0.75, 1.0): (4.3326, 2.9631, 2.3590, 2.0141),
}


@pytest.mark.parametrize("fractions", list(PUBLISHED))
def test_critical_values_match_the_published_boundaries(fractions):
    got = sequential.critical_values(fractions, 0.025)
    assert got == pytest.approx(PUBLISHED[fractions], abs=2e-3)


def test_one_look_is_the_fixed_n_test():
    assert sequential.critical_values([1.0], 0.025) == pytest.approx([1.959964], abs=1e-5)
    assert sequential.nominal_confidence(1.959964) == pytest.approx(0.95, abs=1e-6)


@pytest.mark.parametrize("bad", [[0.5, 0.25, 1.0], [0.5], [0.0, 1.0], [0.5, 1.2]])
def test_a_bad_schedule_is_refused(bad):
    with pytest.raises(ValueError, match="look fractions"):
        sequential.critical_values(bad, 0.025)


def test_sizes_are_distinct_and_end_at_the_cap():
    d = sequential.Design.of([0.25, 0.5, 0.75, 1.0], 0.95)
    assert d.sizes(640) == [160, 320, 480, 640]
    assert d.sizes(5) == [2, 3, 4, 5]
    assert d.sizes(2) == [2]


def _simulate(critical, fractions, delta, sd, margin, cap, reps, seed):
    """Share of simulated variants that pass, and that fail, under the look-by-look rule with z-intervals."""
    rng = np.random.default_rng(seed)
    diffs = rng.normal(delta, sd, size=(reps, cap))
    sums, squares = np.cumsum(diffs, axis=1), np.cumsum(diffs ** 2, axis=1)
    state = np.zeros(reps, dtype=np.int8)          # 0 open, 1 pass, -1 fail
    for f, c in zip(fractions, critical):
        n = math.ceil(f * cap)
        mean = sums[:, n - 1] / n
        se = np.sqrt((squares[:, n - 1] - n * mean ** 2) / (n - 1) / n)
        lo, hi = mean - c * se, mean + c * se
        open_ = state == 0
        state[open_ & (lo >= -margin)] = 1
        state[open_ & (hi < -margin)] = -1
    return float(np.mean(state == 1)), float(np.mean(state == -1))


FRACTIONS = (0.25, 0.5, 0.75, 1.0)
REPS, CAP, SD, MARGIN = 10000, 320, 20.0, 3.0


def _mc_bound(p, reps=REPS):
    return p + 3 * math.sqrt(p * (1 - p) / reps)


def test_false_pass_rate_at_the_margin_is_at_most_alpha():
    d = sequential.Design.of(FRACTIONS, 0.95)
    false_pass, _ = _simulate(d.critical, FRACTIONS, -MARGIN, SD, MARGIN, CAP, REPS, 1)
    assert false_pass <= _mc_bound(d.alpha), false_pass


def test_false_fail_rate_at_the_margin_is_at_most_alpha():
    d = sequential.Design.of(FRACTIONS, 0.95)
    _, false_fail = _simulate(d.critical, FRACTIONS, -MARGIN - 1e-9, SD, MARGIN, CAP, REPS, 2)
    assert false_fail <= _mc_bound(d.alpha), false_fail


def test_unadjusted_peeking_inflates_the_false_pass_rate():
    """The same looks with the fixed-n 1.96 each time: the error rate this module exists to prevent."""
    naive = [1.959964] * len(FRACTIONS)
    false_pass, _ = _simulate(naive, FRACTIONS, -MARGIN, SD, MARGIN, CAP, REPS, 1)
    assert false_pass > _mc_bound(0.025), false_pass


def test_an_unchanged_tier_passes_with_about_the_planned_power():
    """n planned for 80% power at a fixed n; the sequential design loses a little of it (J&T ch. 7)."""
    from pipeline.scoring.planning import power

    cap = power.samples_for_power(SD, MARGIN)
    d = sequential.Design.of(FRACTIONS, 0.95)
    passed, failed = _simulate(d.critical, FRACTIONS, 0.0, SD, MARGIN, cap, 8000, 3)
    assert 0.74 <= passed <= 0.82 and failed < 0.001, (passed, failed)


def test_a_clearly_broken_tier_fails_at_the_first_look():
    d = sequential.Design.of(FRACTIONS, 0.95)
    rng = np.random.default_rng(4)
    x = rng.normal(-15.0, SD, size=d.sizes(CAP)[0])
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert margin.verdict(x.mean() - d.critical[0] * se, x.mean() + d.critical[0] * se, MARGIN) == "fail"


def test_expected_samples_stop_early_on_a_clear_answer_and_pass_at_alpha_on_the_margin():
    from pipeline.scoring.verdict.sequential import Design, expected_samples, look_sizes

    sizes = look_sizes([0.25, 0.5, 0.75, 1.0], 320)
    crit = Design.of([s / 320 for s in sizes], 0.95).critical
    n_clear, p_clear = expected_samples(sizes, crit, 12.0)       # far above the margin
    assert p_clear > 0.99 and n_clear < 170
    n_margin, p_margin = expected_samples(sizes, crit, 0.0)      # exactly at the margin
    assert p_margin <= 0.025 + 0.004 and n_margin > 300
    n_fail, p_fail = expected_samples(sizes, crit, -12.0)        # far below: fails early, never passes
    assert p_fail == 0.0 and n_fail < 170
