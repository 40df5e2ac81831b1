"""What lm-eval's logged samples become: one compact row per document (sample_row, the JSONL evaluate
writes under samples/), its per-sample scores for paired comparisons, and a task's result.

A local task's scores come from its rows on every path (scores_from_rows: a task run whole, its looks,
its cached chunks), never from lm-eval's aggregate: one classification rule (metrics.choose, which the
YAML's hook uses too) and one tie rule. A registry task's are lm-eval's own (registry.scores keeps a
per-sample score only where its mean is lm-eval's aggregate).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline import paths
from pipeline.domain.sets import metric_registry, metrics, registry, sample_row as rows_io, tasks
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.domain.sets.tasks import TaskSpec


def read_samples(variant_dir: Path) -> dict[str, list[SampleRow]]:
    """task -> the per-sample rows an evaluate stage wrote under <variant_dir>/samples/ (see sample_row)."""
    folder = variant_dir / paths.SAMPLES
    return {f.stem: rows_io.read(f) for f in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


# a generated row's flag: its answer opened with a blank line and is the second request's
# (pipeline/evaluation/blank_answers.py)
REASKED = "reasked"


def sample_row(spec: TaskSpec, s: dict[str, Any]) -> SampleRow:
    """A compact per-sample log row from one lm-eval sample record."""
    doc = s["doc"]
    common = {"id": doc.get("id", ""), "doc_id": s["doc_id"], "target": s.get("target"), "scores": {},
              "input": {k: v for k, v in doc.items() if k not in ("id", "choices", "gold", tasks.POSITION)},
              "prompt_chars": len(str(s["arguments"][0][0])) if s.get("arguments") else None}
    if spec.kind == "classify":
        logliks = [float(r[0]) for r in s["filtered_resps"]]
        pred, tied = metrics.choose(logliks, int(s["doc_id"]))
        row = SampleRow(**common, choices=doc["choices"], gold=doc["gold"], logliks=logliks, pred=pred, tied=tied)
    else:
        resp = s["filtered_resps"][0]
        row = SampleRow(**common, output=resp if isinstance(resp, str) else resp[0], reasked=bool(s.get(REASKED)))
    return replace(row, scores=per_sample_scores(spec, row))


def per_sample_scores(spec: TaskSpec, row: SampleRow) -> dict[str, float]:
    """Per-sample scores for paired comparisons: the per-row score of each metric the task reports, as
    metric_registry declares it (corpus BLEU has no per-sample form: chrF stands in)."""
    return {s: metric_registry.get(s).score(row) for s in metric_registry.row_scores(spec.higher_is_better)}


@dataclass(frozen=True)
class TaskResult:
    """One task's outcome in a run: aggregate scores, per-sample rows and each metric's direction,
    all keyed by the task's own metric names (callers prefix `<task>/`)."""
    metrics: dict[str, float]
    rows: list[SampleRow]
    higher_is_better: dict[str, bool]


def task_result(spec: TaskSpec, results: dict, samples: list[dict]) -> TaskResult:
    """From lm-eval's results entry and logged samples of one task (simple_evaluate's output)."""
    samples = sorted(samples, key=lambda r: r["doc_id"])
    if spec.kind == "lm_eval":
        agg, per, hib = registry.scores(results, samples, spec.higher_is_better)
        seen: set[int] = set()
        rows = []
        for s in samples:
            if s["doc_id"] not in seen and s["doc_id"] in per:
                seen.add(s["doc_id"])
                rows.append(registry.sample_row(s, per[s["doc_id"]]))
        return TaskResult(agg, rows, hib)
    rows = [sample_row(spec, r) for r in samples]
    return TaskResult(scores_from_rows(spec, rows), rows, dict(spec.higher_is_better))


def scores_from_rows(spec: TaskSpec, rows: list[SampleRow]) -> dict[str, float]:
    """A local task's scores over `rows` (one lm-eval run, several looks' runs, or cached chunks), as
    metric_registry aggregates them: a corpus metric over the rows (BLEU, chrF over the cleaned outputs,
    macro-F1 over the predictions), every other metric the mean of its per-sample score."""
    out: dict[str, float] = {}
    for m in spec.higher_is_better:
        agg = metric_registry.get(m).aggregate
        if agg is not None:
            out[m] = agg(rows)
        elif rows and all(m in r.scores for r in rows):
            out[m] = _weighted_mean(rows, m)
    return out


def _weighted_mean(rows: list[SampleRow], m: str) -> float:
    """The mean of a per-sample score; over rows read in strata (tagged `stratum`, `strata`), each
    stratum's mean weighted by its share of the pool, as the stratified estimate is."""
    if not all(r.stratum is not None for r in rows):
        return metrics.mean([r.scores[m] for r in rows])
    pool = rows[0].strata
    total = 0.0
    for h, size in enumerate(pool):
        mine = [r.scores[m] for r in rows if r.stratum == h]
        total += size / sum(pool) * metrics.mean(mine) if mine else 0.0
    return total
