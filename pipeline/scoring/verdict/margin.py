"""The non-inferiority rule, in one place. Pure: floats or numpy arrays.

An interval [lo, hi] of tier - baseline, oriented so that higher is better, against the allowed drop
T of the metric's tolerance (docs/decision-rule.md):

  pass          lo >= -T
  fail          hi <  -T
  inconclusive  otherwise (at a look: still open)

evaluate's looks (evaluation/looks_runner.settle), decide (scoring/decision.judge_metric) and the
error-rate replays (scoring/simulation/replay.py, scoring/simulation/replay_strata.py) all call these functions, so a change
of the rule changes the simulated rates with it (tests/test_margin.py changes it and sees both move).
No caller adds a slack of its own.
"""
from __future__ import annotations

PASS, FAIL, OPEN = "pass", "fail", "inconclusive"


def passes(lo, margin):
    """The interval's lower bound is within the allowed drop (a float, or an array of booleans)."""
    return lo >= -margin


def fails(hi, margin):
    """The interval's upper bound is beyond the allowed drop."""
    return hi < -margin


def verdict(lo: float, hi: float, margin: float) -> str:
    """pass, fail or inconclusive for one oriented interval."""
    if passes(lo, margin):
        return PASS
    if fails(hi, margin):
        return FAIL
    return OPEN


def settle_open(state, lo, hi, margin):
    """Arrays: mark the still-open runs of `state` that this look settles (in place); the masks
    (passed, failed) of the runs it settled. The replays' per-look step."""
    open_ = state == "open"
    passed, failed = open_ & passes(lo, margin), open_ & fails(hi, margin)
    state[passed], state[failed] = PASS, FAIL
    return passed, failed
