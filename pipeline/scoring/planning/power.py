"""Statistical power of the non-inferiority verdicts: what this sample size can show, and the sample
size that would show it. Pure, stdlib only (so `python -m pipeline.config` stays fast).

The verdict (pipeline/scoring/verdict/judge.py) passes a metric when the two-sided `confidence` interval of
tier - baseline lies above -T, i.e. a one-sided test at alpha = (1 - confidence) / 2 with margin T.
With paired per-sample differences of standard deviation s over n samples, the usual normal
approximation for a paired non-inferiority test with a true difference of 0 (e.g. Chow, Shao & Wang,
"Sample Size Calculations in Clinical Research", ch. 3):
  minimum detectable drop  MDD = (z_{1-alpha} + z_{power}) * s / sqrt(n)
      the smallest margin this n shows non-inferiority for, with the given power, when the tier is
      truly unchanged;
  required sample size     n   = ceil(((z_{1-alpha} + z_{power}) * s / T)^2)
      the n that gives that power at the configured margin T.
At confidence 0.95 and power 0.8: z sum = 1.960 + 0.842 = 2.802; s = 10, T = 3 gives n = 88.

decide plans from the interval the verdict was read on (`from_interval`), never from the raw sample SD:
s is the spread that interval implies, half-width x sqrt(n) / z at its confidence. Where most outputs
equal the baseline's, the sample SD is near 0 and would plan "n80 2", while the verdict's interval
(paired_graded, paired_binary) keeps a floor no fixed n removes that fast: the floor narrows at least as
fast as 1/sqrt(n), so the plan is conservative there. A stratified read's interval is the weighted one,
so its plan is in items read by that design.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

POWER = 0.8


@dataclass(frozen=True)
class Power:
    sd: float                     # the spread the verdict's interval implies (from_interval)
    n: int                        # samples the run compared
    mdd: float                    # minimum detectable drop at n (metric points)
    n_for_80pct_power: int | None  # samples for 80% power at the tolerance; None when the tolerance is 0

    def as_dict(self) -> dict:
        return {"sd": self.sd, "n": self.n, "mdd": self.mdd, "n_for_80pct_power": self.n_for_80pct_power}

    def compact(self) -> str:
        """One line for the report, e.g. `SD 10.0, n=24, MDD 5.7, n80 88`."""
        n80 = "–" if self.n_for_80pct_power is None else f"{self.n_for_80pct_power:,}"
        return f"SD {self.sd:.1f}, n={self.n}, MDD {self.mdd:.1f}, n80 {n80}"


def z_sum(confidence: float = 0.95, power: float = POWER) -> float:
    """z_{1-alpha} + z_{power}, alpha = (1 - confidence) / 2 (one side of the verdict's interval)."""
    alpha = (1.0 - confidence) / 2
    z = statistics.NormalDist().inv_cdf
    return z(1.0 - alpha) + z(power)


def min_detectable_drop(sd: float, n: int, confidence: float = 0.95, power: float = POWER) -> float:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return z_sum(confidence, power) * sd / math.sqrt(n)


def samples_for_power(sd: float, margin: float, confidence: float = 0.95, power: float = POWER) -> int | None:
    """Samples for `power` at `margin`, the distance between the true difference and the verdict's
    margin (the tolerance itself for an unchanged tier); None for a zero distance (no n settles a
    difference exactly on the margin). At least 2, since a paired SD needs two samples. Every count
    of samples a verdict needs is this one: n for 80% power here and in `python -m pipeline.config`,
    and the samples to settle an inconclusive verdict at its observed effect (`to_settle`)."""
    if margin <= 0:
        return None
    # less 1e-9 before rounding up: an n that is whole on paper (to_settle's 50 x (2/1)^2 = 200, through
    # an SD and a z that cancel) lands a rounding error above it, and must not read one more
    return max(2, math.ceil((z_sum(confidence, power) * sd / margin) ** 2 - 1e-9))


def spread(lo: float, hi: float, n: int, interval_confidence: float) -> float:
    """The SD of paired differences that an interval of n samples, two-sided at `interval_confidence`,
    implies: half-width x sqrt(n) / z."""
    return (hi - lo) / 2 * math.sqrt(n) / statistics.NormalDist().inv_cdf(0.5 + interval_confidence / 2)


def to_settle(lo: float, hi: float, n: int, interval_confidence: float, distance: float) -> int | None:
    """Samples at which an interval like [lo, hi] (n samples, at `interval_confidence`), its half-width
    shrinking as 1/sqrt(n), would just exclude the margin `distance` from its centre: samples_for_power
    at the interval's own confidence and power 0.5 (the observed effect taken as true), i.e.
    n x (half-width / distance)^2. None for a zero distance."""
    return samples_for_power(spread(lo, hi, n, interval_confidence), distance, interval_confidence, 0.5)


def from_interval(lo: float, hi: float, n: int, interval_confidence: float, margin: float,
                  confidence: float = 0.95) -> Power | None:
    """Power figures from the interval a verdict was read on (two-sided at `interval_confidence`, a
    look's repeated level where it was read in looks): s = `spread`, planned at the verdict's
    `confidence`. None with fewer than two samples."""
    if n < 2:
        return None
    sd = spread(lo, hi, n, interval_confidence)
    return Power(sd, n, min_detectable_drop(sd, n, confidence), samples_for_power(sd, margin, confidence))


def powers(task_metrics: list[str], limits: dict[str, float], confidence: float,
           intervals: dict, interval_confidence: dict[str, float]) -> dict[str, Power]:
    """Power figures for each gated metric a task reports, planned from the interval its verdict was
    read on (`intervals`, each at its `interval_confidence`; power.from_interval); `limits`: metric ->
    allowed drop (the task's own metric names)."""
    out = {}
    for m in task_metrics:
        iv = intervals.get(m)
        if m in limits and iv is not None:
            found = from_interval(iv.lo, iv.hi, iv.n, interval_confidence[m], limits[m], confidence)
            if found is not None:
                out[m] = found
    return out


@dataclass(frozen=True)
class LastRun:
    """What a previous decision.json says about the spread of paired differences."""
    generated: str                  # its time stamp
    sd: dict[str, float]            # `<task>/<metric>` -> median observed SD over the variants
    baseline: dict[str, float]      # `<task>/<metric>` -> the baseline's score (for relative tolerances)
    # task -> (below, pool): the strata its looks read in (the looks record's `strata`; the same for every
    # variant of a model: the baseline's margins), for the tasks it read stratified
    strata: dict[str, tuple[float, list[int]]] = field(default_factory=dict)


def last_run(decision: dict) -> LastRun:
    """Read a decision.json (pipeline/report/exports.py: decision_json). Runs older than the power
    figures give no SDs. The median SD over variants: a badly damaged tier has a large SD and fails
    at any n; the verdicts that need samples are those of tiers close to the baseline."""
    seen: dict[str, list[float]] = {}
    base: dict[str, float] = {}
    pools: dict[str, tuple[float, list[int]]] = {}
    b = decision.get("baseline", {})
    for row in decision.get("rows", []):
        for task, looked in (row.get("looks") or {}).items():
            if looked.get("strata"):
                pools.setdefault(task, (looked["strata"]["below"], list(looked["strata"]["pool"])))
        for metric, p in (row.get("power") or {}).items():
            seen.setdefault(metric, []).append(p["sd"])
        if (row.get("tier"), row.get("kv")) == (b.get("tier"), b.get("kv")) and row.get("status") == "ok":
            for metric, value in row.get("metrics", {}).items():
                base.setdefault(metric, value)
    sd = {metric: statistics.median(values) for metric, values in seen.items()}
    return LastRun(decision.get("generated", "unknown date"), sd, base, pools)
