"""A variant's tasks evaluated look by look against the baseline's samples (eval.sequential), so the
compute goes where a verdict is still open:

- log-likelihood tasks first (cheap), then generation;
- a look evaluates the next share of the task's cap in the task's seeded order (pipeline/domain/looks.py)
  and reads every gated metric's paired interval at that look's group-sequential confidence
  (pipeline/scoring/sequential.py): pass when its lower bound clears -allowed drop, fail when its
  upper bound is below it;
- a settled metric stays settled; a task whose gated metrics are all settled stops; a failed gated
  metric stops the variant (the tasks after it are not run: the row says where it stopped);
- report-only tasks (no tolerance: the retrieval suite) run last, to their cap, and only on a variant
  that can still pass (eval.sequential.probes).

The baseline's own samples come from stage baseline@<model>, run to every cap in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection

from pipeline.backends.lm_eval_runner import run_tasks
from pipeline.domain import looks, task_rows, tasks
from pipeline.domain.metrics import metric_id
from pipeline import schema
from pipeline.schema import Bootstrap, Eval
from pipeline.scoring import analysis
from pipeline.scoring.sequential import Design, look_sizes, verdict
from pipeline.scoring.stats import engine_interval, repeated


@dataclass(frozen=True)
class Gate:
    margin: float                 # the allowed drop, in the metric's units
    higher_is_better: bool = True
    noise: float | None = None    # the engine's noise floor for the metric (scoring/noise.py), as decide folds it


@dataclass
class Looked:
    metrics: dict[str, task_rows.TaskResult] = field(default_factory=dict)
    samples: dict[str, list[dict]] = field(default_factory=dict)
    record: dict[str, dict[str, Any]] = field(default_factory=dict)     # task -> its looks (result.json "looks")
    stopped: str | None = None
    open_at_cap: list[str] = field(default_factory=list)    # gated metrics still unsettled at their cap
    skipped: list[str] = field(default_factory=list)        # report-only tasks not run (cannot_pass)

    def cannot_pass(self) -> str | None:
        """Why the variant can no longer pass (a gated metric failed, or is open at its cap); None if it can."""
        if self.stopped:
            return "it failed a gated metric"
        if self.open_at_cap:
            return f"{', '.join(self.open_at_cap)} inconclusive at the cap"
        return None


def settle(ivs: dict, gates: dict[str, Gate], confidence: float = 0.95) -> dict[str, str]:
    """metric -> pass | fail for each gated metric whose interval settles it. With a gate's noise floor the
    interval is widened by it exactly as decide widens it (stats.engine_interval, at the look's
    `confidence`): a look must not stop on a verdict that decide would call unstable. Pure."""
    out = {}
    for m, g in gates.items():
        iv = ivs.get(m)
        if iv is None:
            continue
        sign = 1.0 if g.higher_is_better else -1.0
        lo, hi = sorted((sign * iv.lo, sign * iv.hi))
        if g.noise is not None:
            lo, hi = engine_interval(sign * iv.delta, lo, hi, g.noise, confidence)
        found = verdict(lo, hi, g.margin)
        if found:
            out[m] = found
    return out


def gates_from(base_metrics: dict[str, float], higher_is_better: dict[str, bool],
               gate: Callable[[str], schema.Gate], noise: dict[str, float] | None = None) -> dict[str, Gate]:
    """metric id -> its gate, for the metrics the decision judges (a tolerance) and the baseline can do
    (min_baseline): a metric the baseline cannot do has nothing to settle. `noise`: metric id -> the
    engine's noise floor (NoiseFloor.widths), the same decide judges with. Pure."""
    out = {}
    for mid, value in base_metrics.items():
        g = gate(mid)
        if g.tolerance is None or (g.min_baseline is not None and value < g.min_baseline):
            continue
        out[mid] = Gate(g.tolerance.allowed_drop(value), higher_is_better.get(mid, True), (noise or {}).get(mid))
    return out


def run_looks(session, specs: list[tasks.TaskSpec], ev: Eval, baseline: dict[str, list[dict]],
              gates: dict[str, Gate], boot: Bootstrap, run=run_tasks, done: Looked | None = None,
              chunk_run=None, report_only: Collection[str] = ()) -> Looked:
    """`baseline`: task -> the baseline's rows (every cap); `gates`: metric id -> its gate (gates_from).
    `done` fills as tasks finish, so what a time limit interrupts is kept. `chunk_run` runs one look's
    documents (default `run`; evaluate's reads what the sample cache has, backends/sample_cache.py).
    `report_only`: tasks with no tolerance on any metric, run to their cap in one look (the user asked
    for their numbers, and nothing settles them early); a task whose gated metrics the baseline cannot
    do has nothing to show and stops at the first look. With eval.sequential.probes `passable` a
    report-only task is not run once the variant cannot pass (`Looked.cannot_pass`): it would change no
    verdict and no recommendation (docs/decision-rule.md "Looks")."""
    chunk_run = chunk_run or run
    done = done if done is not None else Looked()
    fractions = ev.sequential.looks
    # report-only tasks last, log-likelihood tasks first; stable: YAML order otherwise
    for spec in sorted(specs, key=lambda s: (s.name in report_only, not tasks.is_loglik(s))):
        mine = {m: g for m in spec.higher_is_better if (g := gates.get(metric_id(spec.name, m)))}
        if spec.name in report_only and ev.sequential.probes == "passable" and done.cannot_pass():
            done.skipped.append(spec.name)
            continue
        if spec.docs is None or spec.name not in baseline:    # registry task, or no baseline: to the cap
            found, rows = run(session, [spec], ev)
            done.metrics.update(found)
            done.samples.update(rows)
            done.record[spec.name] = {"cap": spec.num_docs, "looks": 1, "n": spec.num_docs, "whole": True}
            continue
        sizes = [spec.num_docs] if spec.name in report_only else look_sizes(fractions, spec.num_docs)
        design = Design.of([n / spec.num_docs for n in sizes], boot.confidence)
        rows: list[dict] = []
        settled: dict[str, dict] = {}
        for k, n in enumerate(sizes):
            rows += chunk_run(session, [looks.chunk(spec, len(rows), n)], ev)[1][spec.name]
            open_ = {m: g for m, g in mine.items() if m not in settled}
            pairs = analysis.align(baseline[spec.name], rows, subset=True)
            conf = design.confidence_at(k)
            ivs = {m: repeated(iv, conf) for m, iv in analysis.intervals(list(open_), pairs, boot).items()}
            for m, v in settle(ivs, open_, conf).items():
                settled[m] = {"verdict": v, "look": k + 1, "n": n}
            if len(settled) == len(mine) or any(s["verdict"] == "fail" for s in settled.values()):
                break
        rows.sort(key=lambda r: r["doc_id"])
        done.metrics[spec.name] = task_rows.TaskResult(looks.scores_from_rows(spec, rows), rows,
                                                   dict(spec.higher_is_better))
        done.samples[spec.name] = rows
        done.record[spec.name] = {"cap": spec.num_docs, "sizes": sizes, "looks": k + 1, "of": len(sizes),
                                  "n": len(rows), "confidence": design.confidence_at(k), "settled": settled}
        done.open_at_cap += [metric_id(spec.name, m) for m in mine if m not in settled]
        failed = [m for m, s in settled.items() if s["verdict"] == "fail"]
        if failed:
            left = [s.name for s in specs if s.name not in done.record]
            done.stopped = (f"stopped at look {k + 1} of {len(sizes)} of {spec.name} ({len(rows)} of "
                            f"{spec.num_docs} samples): {', '.join(metric_id(spec.name, m) for m in failed)} failed"
                            + (f"; not run: {', '.join(left)}" if left else ""))
            break
    return done

