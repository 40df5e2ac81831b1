"""Every variant of every model against one reference row, and paired differences between any two rows,
on the items both read. Pure: rows and their per-sample logs in, Rows with judgements out.

The reference is decision.baseline.model's baseline (decision.baseline.tier, .kv). Every model reads the
same items (eval.tasks, one order): two rows pair by doc_id over the documents both scored, whatever
each model's prompt format (its chat template, a BOS token), so a difference is the models' and their
tiers' on the same questions. Each metric's verdict is judge.judge_metric's, against the reference's
score and the metric's tolerance (params.gate), as within a model.

Confidence: a task a row read in looks (eval.sequential) stopped at a look whose repeated confidence
interval (Jennison & Turnbull ch. 9) covers, jointly over all looks, whatever the stopping rule; so the
interval against another row read over the same prefix, at that look's confidence, keeps its coverage
although evaluate stopped for a verdict against the row's own baseline. Over the fewer documents of two
rows stopped at different looks, the confidence is that of the earlier look (read_confidence). A task
read in full is read at decision.confidence. Hence a change of the reference re-runs decide
only (docs/across-models.md).

What is not carried over: the engine's second-arithmetic check (evaluate checked each verdict against
the row's own baseline, not this reference), so these verdicts rest on the run's arithmetic alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pipeline.domain.sets import sample_row
from pipeline.domain.sets.metrics import split_id
from pipeline.schema import Decision, Task, gate
from pipeline.scoring.estimators import analysis, stats
from pipeline.scoring.estimators.stats import Interval
from pipeline.scoring.verdict import judge
from pipeline.scoring.verdict.rows import Evidence, Judgement, Key, Measured, Row, Verdict
from pipeline.domain.sets.sample_row import SampleRow

Samples = dict[Key, dict[str, list[SampleRow]]]     # row key -> task -> per-sample rows
OTHER_BACKEND = "another backend than the reference's: a difference would mix the engines in"


def reference_of(rows: list[Measured], rule: Decision) -> Measured | None:
    """decision.baseline.model's baseline row, None when no model is named or its baseline did not run."""
    b = rule.baseline
    return next((r for r in rows if b.model is not None and r.key == (b.model, b.tier, b.kv) and r.status == "ok"),
                None)


def read_confidence(a: Measured, b: Measured, task: str, rule: Decision) -> tuple[float, str | None]:
    """The confidence two rows' task is compared at, and the look it is read at: the earlier look of the
    two (fewer documents) where either stopped at one, else the run's."""
    looks = [(r.looks[task].n, r.look_confidence(task), r.look_text(task))
             for r in (a, b) if r.look_confidence(task) is not None]
    if not looks:
        return rule.confidence, None
    _, conf, text = min(looks, key=lambda x: x[0])
    return conf, text


def paired(a: Measured, b: Measured, samples: Samples, rule: Decision) -> dict[str, Interval]:
    """`<task>/<metric>` -> the paired interval of b - a over the documents both read, each task at
    read_confidence. Two rows read in strata of different models' baselines are paired plainly over the
    items both read (their strata differ, so neither's weights hold for the other's items)."""
    out: dict[str, Interval] = {}
    sa, sb = samples.get(a.key, {}), samples.get(b.key, {})
    for task in [t for t in sb if t in sa]:
        first, second = analysis.common(sa[task], sb[task])
        pairs = analysis.align(first, second)
        if not pairs:
            continue
        if a.model != b.model and any(x.stratum is not None for x, _ in pairs):
            pairs = [(x, sample_row.untagged(y)) for x, y in pairs]
        reported = analysis.metrics_of(b.metrics, task)
        conf, look = read_confidence(a, b, task, rule)
        ivs = analysis.intervals(list(reported), pairs, rule.confidence)
        out.update({reported[m]: stats.repeated(iv, conf) if look is not None else iv for m, iv in ivs.items()})
    return out


def judge_against(r: Measured, ref: Measured, samples: Samples, rule: Decision, tasks: dict[str, Task]) -> Row:
    """One row judged against the reference: its Evidence (deltas, intervals, scores on the reference's
    scale) and per-metric verdicts (judge.judge_metric), overall by judge.overall."""
    if r.status != "ok":
        return Row(r, Evidence(), Judgement(r.status))
    if r is ref:
        return Row(r, Evidence(), Judgement("baseline"))
    intervals = paired(ref, r, samples, rule) if r.backend == ref.backend else {}
    verdicts: dict[str, Verdict] = {}
    for metric in judge.unmeasured(r, ref):
        if gate(rule, tasks, metric).tolerance is not None:
            verdicts[metric] = judge.unmeasured_verdict(r, metric)
    for metric in r.metrics:
        g = gate(rule, tasks, metric)
        if g.tolerance is None:
            continue
        if r.backend != ref.backend:
            verdicts[metric] = Verdict(judge.INCONCLUSIVE, OTHER_BACKEND)
            continue
        conf, look = read_confidence(ref, r, split_id(metric)[0], rule)
        found = judge.judge_metric(metric, ref.metrics.get(metric), intervals.get(metric), g.tolerance,
                                   g.min_baseline, r.higher_is_better.get(metric, True), conf)
        verdicts[metric] = dataclasses.replace(found, look=look) if found.lo is not None else found
    deltas = {m: iv.delta for m, iv in intervals.items()}
    scores = {m: ref.metrics[m] + d for m, d in deltas.items() if m in ref.metrics}
    return Row(r, Evidence(deltas, intervals, {}, scores), Judgement(judge.overall(verdicts), verdicts))


@dataclass(frozen=True)
class Across:
    """Every row of every model judged against the reference (None: no model named, or its baseline
    did not run; then `rows` is empty)."""
    reference: Measured | None
    rows: list[Row] = field(default_factory=list)


def judge_all(rows: list[Measured], samples: Samples, rule: Decision, tasks: dict[str, Task]) -> Across:
    ref = reference_of(rows, rule)
    if ref is None:
        return Across(None)
    return Across(ref, [judge_against(r, ref, samples, rule, tasks) for r in rows])
