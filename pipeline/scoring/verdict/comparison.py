"""Every ok row against its baseline, sample by sample: each row's Evidence (deltas, intervals,
power), and the classification flips, exact ties, largest regressions and KV sensitivity by input length
that the report shows beside them. Pure: rows and their per-sample logs in, numbers out.

The numbers beside a verdict come from the pairs it was read on: a task's flips, ties, regressions and
deltas by length from the documents read by the look evaluate settled the task's ranking metric at
(`read_of`; result.json looks.<task>.order), not from every look the task went on to read (its second
arithmetic, or another metric, still open). Comparison.reads says how many pairs each task's come from.

Samples are the JSONL records evaluate writes per task (task_rows.sample_row), keyed by the row's Key.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.schema import Decision, Report, Tolerance
from pipeline.scoring.estimators import analysis
from pipeline.scoring.planning import power
from pipeline.scoring.verdict import judge
from pipeline.domain.sets.metrics import metric_id
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.estimators.analysis import KvLength, Read, Regression, Samples, metrics_of, paired_tasks
from pipeline.scoring.verdict.rows import Evidence, Key, Measured
from pipeline.scoring.estimators import stats
from pipeline.scoring.estimators.stats import Flips



@dataclass
class Comparison:
    evidence: dict[Key, Evidence] = field(default_factory=dict)
    flips: dict[str, dict[str, dict[str, Flips]]] = field(default_factory=dict)        # model -> variant -> task
    regressions: dict[str, dict[str, dict[str, list[Regression]]]] = field(default_factory=dict)  # same keys
    kv_length: list[KvLength] = field(default_factory=list)
    # model -> variant -> task -> (items whose best choices tied exactly, items scored): every ok row's, over
    # the documents its verdict was read on (read_of)
    ties: dict[str, dict[str, dict[str, tuple[int, int]]]] = field(default_factory=dict)
    reads: dict[str, dict[str, dict[str, Read]]] = field(default_factory=dict)         # model -> variant -> task


def task_metrics(r: Measured, task: str) -> dict[str, str]:
    """The task's own metric name -> its id `<task>/<metric>`, for the metrics the row reports."""
    return metrics_of(r.metrics, task)


def compare(rows: list[Measured], samples: dict[Key, Samples], rule: Decision, report: Report,
            tolerance: Callable[[str], Tolerance | None]) -> Comparison:
    """`samples`: every ok row's; `tolerance`: a metric id's tolerance (params.gate), None if not gated."""
    bases = judge.baselines(rows, rule)
    by_backend = {(r.model, r.tier, r.kv, r.backend): r for r in rows}
    found = Comparison()
    for r in rows:
        if r.status == "ok" and r.key in samples:
            tied = ties(read_samples(r, samples[r.key]))
            if tied:
                found.ties.setdefault(r.model, {})[r.variant] = tied
        base = judge.baseline_for(r, bases)
        if r.status != "ok" or base is None or base is r:
            continue
        mine, theirs = samples[r.key], samples[base.key]
        intervals, planned, regress = {}, {}, {}
        for task, pairs in paired_tasks(theirs, mine, r.looks):
            at = r.settled_at(metric_id(task, analysis.sample_score_key(mine[task]))) if pairs else None
            shown = analysis.within(pairs, read_of(r, task, mine[task]), lambda p: p[1].doc_id)
            found.reads.setdefault(r.model, {}).setdefault(r.variant, {})[task] = Read(
                len(shown), at.n if at is not None else len(pairs))
            conf = r.look_confidence(task)
            reported = task_metrics(r, task)
            limits = {m: judge.allowed_drop(tol, base.metrics[mid]) for m, mid in reported.items()
                      if (tol := tolerance(mid)) is not None and mid in base.metrics}
            ivs = analysis.intervals(list(reported), pairs, rule.confidence)
            if conf is not None:        # a task read in looks: the repeated interval of its last look
                ivs = {m: stats.repeated(iv, conf) for m, iv in ivs.items()}
            confs = {m: conf if conf is not None else rule.confidence for m in ivs}
            # a metric evaluate settled at an earlier look: the interval it was settled on, as recorded
            for m, mid in reported.items():
                if (at := r.settled_at(mid)) is not None:
                    ivs[m], confs[m] = stats.Interval(at.delta, at.lo, at.hi, at.n), at.confidence
            intervals.update({reported[m]: iv for m, iv in ivs.items()})
            pws = power.powers(list(reported), limits, rule.confidence, ivs, confs)
            planned.update({reported[m]: p for m, p in pws.items()})
            if mine[task][0].logliks is not None:
                found.flips.setdefault(r.model, {}).setdefault(r.variant, {})[task] = analysis.flips(shown)
            regress[task] = analysis.largest_regressions(shown, report.regressions_per_task)
        # the delta is its interval's wherever there is one (a task stopped at a look: over the documents
        # both read; stratified: the weighted estimate), so the page has one number for it
        deltas = {**judge.deltas(r, base), **{m: iv.delta for m, iv in intervals.items()}}
        scores = {m: base.metrics[m] + d for m, d in deltas.items() if m in base.metrics}
        found.evidence[r.key] = Evidence(deltas, intervals, planned, scores)
        found.regressions.setdefault(r.model, {})[r.variant] = regress
        ref = by_backend.get((r.model, r.tier, rule.baseline.kv, r.backend))
        if r.kv != rule.baseline.kv and ref is not None and ref.status == "ok" and ref.compute_dtype == r.compute_dtype:
            found.kv_length += kv_length(r, ref, read_samples(r, mine), samples[ref.key], report.length_buckets)
    return found


def read_of(r: Measured, task: str, rows: list[SampleRow]) -> frozenset[int] | None:
    """The documents the verdict beside a task's per-sample numbers was read on: those read by the look
    evaluate settled the metric that ranks the task's samples at (analysis.sample_score_key: acc, rougeL,
    chrF, as metric_registry ranks them), in the run's arithmetic. None: every row (open at the last look,
    a fixed-n or whole read, or a result without the look order)."""
    lk = r.looks.get(task)
    if lk is None or not rows:
        return None
    return lk.read(r.settled_at(metric_id(task, analysis.sample_score_key(rows))))


def read_samples(r: Measured, mine: Samples) -> Samples:
    """The row's samples of each task restricted to the documents its verdict was read on (read_of)."""
    return {task: analysis.within(rows, read_of(r, task, rows)) for task, rows in mine.items()}


def ties(mine: Samples) -> dict[str, tuple[int, int]]:
    """task -> (items with an exact tie for the best choice, items scored) for its choice tasks."""
    return {task: (sum(1 for x in rows if x.tied), len(rows)) for task, rows in mine.items()
            if rows and rows[0].logliks is not None}


def kv_length(r: Measured, ref: Measured, mine: Samples, ref_samples: Samples, edges: list[int]) -> list[KvLength]:
    """Score delta by prompt length of a KV-quantized row against the same tier with the baseline's KV."""
    return [KvLength(r.model, r.variant, ref.variant, task, analysis.by_length(analysis.align(*analysis.common(ref_samples[task], rows)),
                                                                              edges))
            for task, rows in mine.items() if task in ref_samples]
