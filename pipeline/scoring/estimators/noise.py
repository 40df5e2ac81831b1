"""The engine's own noise: the baseline under a second arithmetic (stage noise) against the baseline as
run, sample by sample. Pure.

Its paired interval per metric says how far the arithmetic alone moves the baseline's score (decide
reports it; the verdicts are checked under the same arithmetic by evaluate, scoring/verdict/arith_check.py).
On choice tasks, `margin` is the largest log-likelihood margin (top choice minus runner-up, of the
baseline) among the samples the arithmetic flipped: a variant's flip inside that margin is one the
engine alone can make (docs/decision-rule.md "Engine noise").
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.domain.result.contract import Result
from pipeline.scoring.estimators import analysis
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.estimators.analysis import Pair, Samples, metrics_of, paired_tasks
from pipeline.scoring.estimators.fidelity import Read
from pipeline.scoring.estimators.stats import Flips, Interval


@dataclass(frozen=True)
class NoiseFloor:
    status: str                                   # ok | off | unsupported | failed | missing
    why: str | None = None
    arithmetic: str | None = None                 # what the second run computed in
    intervals: dict[str, Interval] = field(default_factory=dict)     # metric id -> second run - baseline
    flips: dict[str, Flips] = field(default_factory=dict)            # choice task -> flips
    margin: dict[str, float] = field(default_factory=dict)           # choice task -> largest flipped margin
    fidelity: Read | None = None     # KL and top-1 of the second arithmetic against the baseline as run


def margin(row: SampleRow) -> float | None:
    """The top choice's log-likelihood minus the runner-up's; None for a row without choices."""
    ll = sorted(row.logliks or [], reverse=True)
    return ll[0] - ll[1] if len(ll) >= 2 else None


def floor(result: Result, base_metrics: Iterable[str], base_samples: Samples, noise_samples: Samples,
          confidence: float) -> NoiseFloor:
    """The noise floor from the noise stage's result.json and samples against the baseline's; `base_metrics`:
    the metric ids the baseline reports."""
    if result.status != "ok":
        return NoiseFloor(result.status, result.reason)
    intervals, flips, margins = {}, {}, {}
    for task, pairs in paired_tasks(base_samples, noise_samples):
        reported = metrics_of(base_metrics, task)
        ivs = analysis.intervals(list(reported), pairs, confidence)
        intervals.update({reported[m]: iv for m, iv in ivs.items()})
        if pairs and pairs[0][1].logliks is not None:
            flips[task] = analysis.flips(pairs)
            flipped = [margin(b) for b, t in pairs if b.pred != t.pred]
            margins[task] = max((m for m in flipped if m is not None), default=0.0)
    return NoiseFloor("ok", arithmetic=result.arithmetic, intervals=intervals, flips=flips, margin=margins)


def inside(pairs: list[Pair], noise_margin: float) -> tuple[int, int]:
    """(flips of a variant against the baseline, those whose baseline margin is within the noise's)."""
    flipped = [margin(b) for b, t in pairs if b.pred != t.pred]
    return len(flipped), sum(1 for m in flipped if m is not None and m <= noise_margin)
