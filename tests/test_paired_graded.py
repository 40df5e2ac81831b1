"""The floored studentized interval of a graded metric (scoring/estimators/paired_graded.py): its bounds, and why
an all-zero or few-change sample never gets a narrow interval."""
import numpy as np
import pytest

from pipeline.scoring.estimators import paired_graded, stats
from pipeline.scoring.verdict.margin import OPEN, verdict


def test_identical_outputs_get_an_interval_as_wide_as_the_worst_tier_at_that_reach():
    base = [40.0, 12.5, 70.0, 77.0, 20.0] * 4          # 20 summaries, identical outputs
    iv = stats.paired_graded_mean(base, base)
    assert iv.delta == 0.0 and iv.lo < -3.0 and iv.hi > 3.0
    assert verdict(iv.lo, iv.hi, 3.0) == OPEN
    # with enough samples identical outputs are evidence: a tier at -3 must move >= 3/77 of them
    many = stats.paired_graded_mean(base * 30, base * 30)
    assert -3.0 < many.lo < 0.0


def test_few_large_moves_widen_the_interval_beyond_wald():
    rng = np.random.default_rng(3)
    base = rng.uniform(10, 60, 96)
    tier = base.copy()
    tier[:3] -= 40.0                                     # 3 of 96 changed: mean -1.25
    d = tier - base
    s = paired_graded.summary(d, base)
    lo, hi = paired_graded.interval(s, 0.95)
    wald = d.mean() - 1.96 * d.std(ddof=1) / np.sqrt(d.size)
    assert lo < wald - 1.0 and lo < -3.0 < hi          # the Wald interval would pass a 3-point margin
    assert wald > -3.0


def test_many_small_changes_meet_the_t_interval():
    rng = np.random.default_rng(4)
    base = rng.uniform(20, 60, 400)
    d = rng.normal(-1.0, 4.0, 400)
    lo, hi = paired_graded.interval(paired_graded.summary(d, base), 0.95)
    half = paired_graded.critical(400, 0.95) * d.std(ddof=1) / 20.0
    assert (lo, hi) == pytest.approx((d.mean() - half, d.mean() + half), abs=0.1)


def test_the_interval_holds_the_estimate_and_is_vectorised_alike():
    rng = np.random.default_rng(5)
    rows = []
    for k in range(6):
        base = rng.uniform(0, 80, 30)
        d = np.where(rng.random(30) < 0.2 * k, rng.normal(-5, 10, 30), 0.0)
        rows.append(paired_graded.summary(d, base))
    one = [paired_graded.interval(s, 0.99) for s in rows]
    fields = [np.array([s.as_list()[j] for s in rows]) for j in range(6)]
    lo, hi = paired_graded.intervals(*fields, np.stack([s.tail_array() for s in rows]), confidence=0.99)
    assert np.allclose(lo, [x[0] for x in one]) and np.allclose(hi, [x[1] for x in one])
    for s, (a, b) in zip(rows, one):
        assert a <= s.mean <= b


def test_repeated_reads_the_same_summary_at_another_confidence():
    base = list(np.linspace(5, 70, 48))
    tier = [b - (8.0 if i % 6 == 0 else 0.0) for i, b in enumerate(base)]
    iv = stats.paired_graded_mean(base, tier)
    wide = stats.repeated(iv, 0.999)
    assert wide.lo < iv.lo and wide.hi > iv.hi and wide.delta == iv.delta and wide.graded == iv.graded


def test_a_corpus_metric_is_read_on_its_jackknife_pseudo_values():
    refs = [f"Der Zug Nummer {i} fährt um {i % 12 + 1} Uhr ab." for i in range(30)]
    base = list(refs)
    tier = [r if i % 5 else r.replace("fährt", "geht") for i, r in enumerate(refs)]
    iv = stats.paired_corpus("chrf", refs, base, tier, 0.95)
    assert iv.graded.changed == 6 and iv.lo < iv.delta < 0 < iv.hi + 5
    same = stats.paired_corpus("bleu", refs, base, base, 0.95)
    assert same.delta == 0.0 and same.lo < -1.0 and same.hi > 1.0    # identical outputs: not a zero width
