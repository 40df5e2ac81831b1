"""The non-inferiority rule, in one place. Pure: floats or numpy arrays.

An interval [lo, hi] of tier - baseline, oriented so that higher is better, against the allowed drop
T of the metric's tolerance (docs/decision-rule.md):

  pass          lo >= -T
  fail          hi <  -T
  inconclusive  otherwise (at a look: still open)

Each decision calls it once, in one place: evaluate's looks (evaluation/looks_runner.settle) settle a
task's metrics, and decide reads the verdict they recorded (result.json Settled.verdict) without
judging it again; decide judges an interval no look read (scoring/verdict/judge.judge_metric: a fixed-n
or whole read, the reference across models) and the KV cache by length (scoring/verdict/long_kv.py);
the error-rate replays (scoring/simulation/replay.py, replay_strata.py) call it too. So a change of the
rule moves every verdict on the page and the simulated rates with it (tests/test_margin.py changes it
and sees them all move). No caller adds a slack of its own.
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
