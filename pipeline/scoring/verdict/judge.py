"""The decision rule: per-metric non-inferiority verdicts against the baseline, and the
recommended variant. Pure.

Metrics are `<task>/<metric>`; each task's metrics are judged on their own. Tolerances and
min_baseline come from the task's entry, else the per-metric defaults (schema.gate). Direction
(higher_is_better) comes from the task's YAML via result.json (Measured.higher_is_better).

For each metric with a tolerance T (absolute, or relative to the baseline score) and the paired
interval [lo, hi] of tier - baseline at decision.confidence (default 95%, the method metric_registry
declares for the metric's kind; sign
flipped for lower-is-better metrics):
  pass          lo >= -T   (the tier is, with that confidence, no worse than T)
  fail          hi <  -T   (with that confidence worse than T)
  inconclusive  otherwise, or when the baseline scores below `min_baseline` (the model cannot do
                the task, so a difference means nothing), or no comparable baseline exists.

A row's baseline is the baseline row of the same model, backend and compute dtype (the activation
dtype it ran at): a delta across backends or dtypes would mix the engine into the quantization.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.domain.result.contract import NOT_MEASURED as NOT_MEASURED_STATUS
from pipeline.domain.sets.metrics import split_id
from pipeline.schema import Decision, Task, Tolerance, gate
from pipeline.scoring.planning import power
from pipeline.scoring.verdict import margin
from pipeline.scoring.verdict.rows import NOT_RUN, Evidence, Judgement, Key, Measured, Row, Settle, Verdict
from pipeline.scoring.estimators.stats import Interval

PASS, FAIL, INCONCLUSIVE = margin.PASS, margin.FAIL, margin.OPEN
NOT_CAPABLE = "the baseline cannot do this task"
NO_BASELINE = "no comparable baseline"
NOT_MEASURED = "not measured on this variant"
# The rows the fixed sequence walks. A variant the time budget ended before its first look ("not
# measured") keeps its place and stops the sequence there, as one the budget ended at look 2 already does
# (inconclusive): both are servable here and unjudged, and skipping the earlier cut would let a slower
# machine claim variants past one it never judged. "unsupported" (the engine cannot serve it here) and
# "failed" (a broken run; decide exits non-zero) are not candidates. docs/decisions/fixed-sequence-pick.md
CANDIDATES = ("ok", NOT_MEASURED_STATUS)


def allowed_drop(tol: Tolerance, baseline: float) -> float:
    return tol.allowed_drop(baseline)


def not_capable(v: Verdict) -> bool:
    """The metric says nothing about the tier: the baseline scores below min_baseline."""
    return v.note is not None and v.note.startswith(NOT_CAPABLE)


def judge_metric(metric: str, base: float | None, interval: Interval | None, tol: Tolerance,
                 min_base: float | None, higher_is_better: bool = True, confidence: float = 0.95,
                 second: tuple[str, str] | None = None, check_expected: bool = False,
                 reach: tuple[int, int] | None = None, settled: str | None = None,
                 looked: bool = False) -> Verdict:
    """The verdict for one metric of one variant; `confidence`: the interval's (it only names it).
    `second`: (the metric's verdict under the engine's second arithmetic, its name), where evaluate
    checked it (scoring/verdict/arith_check.py); a settled verdict it does not give is `unstable`: inconclusive,
    never a pass. `check_expected`: the engine has a second arithmetic, so a settled verdict it did not
    check (evaluate skips the check once a variant cannot pass) is `unchecked`: inconclusive too.
    `settled`: the verdict evaluate settled the metric with at a look (result.json Settled.verdict), read
    as it is; `looked`: the task was read in looks and the metric settled at none (open at the last). The
    rule (margin.verdict) is applied here only to an interval no look read (a fixed-n or whole read, a
    reference across models): one call site per decision, so a change of the rule moves every verdict."""
    if base is None:
        return Verdict(INCONCLUSIVE, NO_BASELINE)
    if min_base is not None and base < min_base:
        return Verdict(INCONCLUSIVE, f"{NOT_CAPABLE} (baseline {base:.1f} < min_baseline {min_base:g})")
    if interval is None:
        return Verdict(INCONCLUSIVE, "no interval: the metric has no per-sample form here")
    sign = 1.0 if higher_is_better else -1.0
    lo, hi = sorted((sign * interval.lo, sign * interval.hi))
    limit = allowed_drop(tol, base)
    found = {"lo": lo, "hi": hi, "n": interval.n, "limit": limit, "confidence": confidence, "second": second}
    on_sampling = settled if settled is not None else INCONCLUSIVE if looked else margin.verdict(lo, hi, limit)
    if second is not None and on_sampling != INCONCLUSIVE and second[0] != on_sampling:
        return Verdict(INCONCLUSIVE, **found, unstable=on_sampling)
    if second is None and check_expected and on_sampling != INCONCLUSIVE:
        return Verdict(INCONCLUSIVE, **found, unchecked=on_sampling)
    if on_sampling != INCONCLUSIVE:
        return Verdict(on_sampling, **found)
    return Verdict(INCONCLUSIVE, **found, settle=samples_to_settle(sign * interval.delta, lo, hi, limit, interval.n,
                                                                   reach, confidence))


def samples_to_settle(delta: float, lo: float, hi: float, limit: float, n: int,
                      reach: tuple[int, int] | None = None, confidence: float = 0.95) -> Settle:
    """How many samples would settle an inconclusive verdict if the observed effect held: the interval's
    half-width shrinks as 1/sqrt(n), and it must shrink to the distance between delta and -limit
    (power.to_settle: the count every sample-size figure comes from). `reach`: (the most items the
    design reads, its pool); `confidence`: the interval's."""
    margin = abs(delta + limit)
    half = (hi - lo) / 2
    outcome = PASS if delta > -limit else FAIL
    readable, pool = reach if reach is not None else (None, None)
    if margin < 1e-9 or half <= 0:
        return Settle(None, outcome, readable, pool)
    return Settle(power.to_settle(lo, hi, n, confidence, margin), outcome, readable, pool)


@dataclass(frozen=True)
class Pairing:
    """What a row and its baseline share: rows of different backends or compute dtypes are never compared."""
    model: str
    backend: str | None
    compute_dtype: str | None


def comparable(r: Measured) -> Pairing:
    return Pairing(r.model, r.backend, r.compute_dtype)


ENDPOINT = "endpoint"     # a server qtier does not run (pipeline/engines/endpoint/backend.py)


def baseline_for(r: Measured, base_rows: dict[Pairing, Measured]) -> Measured | None:
    """The baseline a row is judged against: the one of its backend and compute dtype; an endpoint's
    engine and dtype are its server's, so it is judged against the model's baseline as this run
    measured it (when there is exactly one): the deltas then include any engine difference."""
    if r.backend == ENDPOINT:
        mine = [b for k, b in base_rows.items() if k.model == r.model]
        return mine[0] if len(mine) == 1 else None
    return base_rows.get(comparable(r))


def baselines(rows: list[Measured], rule: Decision) -> dict[Pairing, Measured]:
    """The baseline row per (model, backend, compute dtype)."""
    return {comparable(r): r for r in rows
            if r.tier == rule.baseline.tier and r.kv == rule.baseline.kv and r.status == "ok"}


def missing_baseline(r: Measured, base_rows: dict[Pairing, Measured]) -> str:
    """Why a row has no baseline: one ran on this backend, but at another compute dtype; or none did."""
    others = sorted(str(k.compute_dtype) for k in base_rows if (k.model, k.backend) == (r.model, r.backend))
    if others:
        return (f"no baseline at this compute dtype ({r.compute_dtype}; the {r.backend} baseline ran in "
                f"{', '.join(others)})")
    return NO_BASELINE


def judge(rows: list[Measured], evidence: dict[Key, Evidence], rule: Decision,
          tasks: dict[str, Task] | None = None) -> list[Row]:
    """Every row with its evidence (decide: comparison.compare; none for rows not compared) and its
    judgement. `tasks`: eval.tasks, for per-task tolerances and min_baseline."""
    base_rows = baselines(rows, rule)
    return [Row(r, evidence.get(r.key, Evidence()), judgement(r, evidence.get(r.key, Evidence()), base_rows,
                                                              rule, tasks or {}))
            for r in rows]


def judgement(r: Measured, ev: Evidence, base_rows: dict[Pairing, Measured], rule: Decision,
              tasks: dict[str, Task]) -> Judgement:
    if r.status != "ok":
        return Judgement(r.status)      # not measured: no verdict, so it passes nothing (recommend)
    base = baseline_for(r, base_rows)
    if base is r:
        return Judgement("baseline")
    verdicts: dict[str, Verdict] = {}
    for metric in unmeasured(r, base):
        if gate(rule, tasks, metric).tolerance is not None:
            verdicts[metric] = unmeasured_verdict(r, metric)
    for metric in r.metrics:
        g = gate(rule, tasks, metric)
        tol, floor = g.tolerance, g.min_baseline
        if tol is None:
            continue
        if base is None:
            verdicts[metric] = Verdict(INCONCLUSIVE, missing_baseline(r, base_rows))
            continue
        task = split_id(metric)[0]
        at = r.settled_at(metric)          # the look evaluate settled it at, its verdict and interval
        lk = r.looks.get(task)
        found = judge_metric(metric, base.metrics.get(metric), ev.intervals.get(metric), tol, floor,
                             r.higher_is_better.get(metric, True),
                             (at.confidence if at else r.look_confidence(task)) or rule.confidence,
                             r.second(metric), r.check_expected(), r.reach(task),
                             at.verdict if at else None, lk is not None and not lk.whole)
        verdicts[metric] = dataclasses.replace(found, look=r.look_text(task, at)) if found.lo is not None else found
    return Judgement(overall(verdicts), verdicts)


def deltas(r: Measured, base: Measured) -> dict[str, float]:
    """tier - baseline for every metric both report."""
    return {m: v - base.metrics[m] for m, v in r.metrics.items() if m in base.metrics}


def unmeasured(r: Measured, base: Measured | None) -> list[str]:
    """The baseline's metrics this row has no score for (evaluate stopped before their task)."""
    return [m for m in (base.metrics if base else {}) if m not in r.metrics]


def unmeasured_verdict(r: Measured, metric: str) -> Verdict:
    """A gated metric the variant has no score for: not run where the run says its task was never run
    (Measured.not_run_why), else inconclusive, not measured (a task that ran and did not report it)."""
    why = r.not_run_why(split_id(metric)[0])
    return Verdict.not_run(why) if why else Verdict(INCONCLUSIVE, f"{NOT_MEASURED}: no score in its result")


def task_verdicts(verdicts: dict[str, Verdict]) -> dict[str, str]:
    """task -> its overall verdict over its own metrics (the same rule as `overall`)."""
    by_task: dict[str, dict[str, Verdict]] = {}
    for mid, v in verdicts.items():
        task, _ = split_id(mid)
        by_task.setdefault(task, {})[mid] = v
    return {t: overall(v) for t, v in by_task.items()}


def overall(verdicts: dict[str, Verdict]) -> str:
    """fail if any metric fails; pass if every metric the model can do passes; not run if none of them
    was run (a task's, in task_verdicts); else inconclusive. Not run passes nothing."""
    relevant = [v.verdict for v in verdicts.values() if not not_capable(v)]
    if FAIL in relevant:
        return FAIL
    if relevant and all(v == NOT_RUN for v in relevant):
        return NOT_RUN
    if relevant and all(v == PASS for v in relevant):
        return PASS
    return INCONCLUSIVE
