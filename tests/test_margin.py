"""The non-inferiority rule has one home (scoring/verdict/margin.py): evaluate's looks, decide's verdicts and
both error-rate replays call it, so changing it moves all of them (a second copy anywhere would not)."""
import numpy as np
import pytest

from pipeline.evaluation import looks_runner
from pipeline.schema import Tolerance
from pipeline.scoring.verdict import judge, margin
from pipeline.scoring.simulation import replay, replay_strata
from pipeline.scoring.estimators.stats import Interval


def test_the_rule():
    assert margin.verdict(-2.9, 1.0, 3.0) == margin.PASS
    assert margin.verdict(-3.0, 1.0, 3.0) == margin.PASS          # at the margin: within it, no slack either way
    assert margin.verdict(-5.0, -3.1, 3.0) == margin.FAIL
    assert margin.verdict(-3.5, 0.5, 3.0) == margin.OPEN
    assert margin.verdict(-3.0 - 1e-12, 1.0, 3.0) == margin.OPEN   # no private slack


def _stricter(lo, m):
    """A rule that passes nothing: every caller must see it."""
    return lo >= np.inf


def _everyone(monkeypatch=None):
    iv = Interval(-0.5, -1.0, 0.0, 400)
    looked = looks_runner.settle({"acc": iv}, {"acc": looks_runner.Gate(3.0, True)})
    judged = judge.judge_metric("acc", 90.0, iv, Tolerance(abs=3.0), None).verdict
    rng = np.random.default_rng(0)
    base = rng.choice([0.0, 100.0], 400, p=[0.2, 0.8])
    tier = np.where(rng.random(400) < 0.05, 100.0 - base, base)
    sim = {r.name: r.value for r in replay.rates(replay.Population.of(base, tier), [0.5, 1.0], 400, 0.95, 3.0,
                                                 sims=200)}
    items = replay_strata.Items.of(rng.integers(0, 2, 400), base, tier)
    strat = {r.name: r.value for r in replay_strata.rates(items, [0.5, 1.0], 400, 0.95, 3.0, 0.5, sims=200)
             ["unstratified"]}
    return looked.get("acc"), judged, sim["power"], strat["power"]


def test_changing_the_rule_moves_evaluate_decide_and_both_simulators(monkeypatch):
    looked, judged, power, strat_power = _everyone()
    assert (looked, judged) == (margin.PASS, margin.PASS) and power > 0.5 and strat_power > 0.5
    monkeypatch.setattr(margin, "passes", _stricter)
    looked, judged, power, strat_power = _everyone()
    assert looked is None and judged == margin.OPEN and power == 0.0 and strat_power == 0.0
