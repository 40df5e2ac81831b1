"""A variant's tasks evaluated look by look against the baseline's samples (eval.sequential), so the
compute goes where a verdict is still open:

- log-likelihood tasks first (cheap), then generation;
- a look evaluates the next share of the task's cap in the task's seeded order (pipeline/domain/sets/looks.py;
  a choice task with eval.sequential.strata: the same share of each stratum, evaluation/stratified.py)
  and reads every gated metric's paired interval at that look's group-sequential confidence
  (pipeline/scoring/verdict/sequential.py): pass when its lower bound clears -allowed drop, fail when below;
- a settled metric stays settled; a task whose gated metrics are all settled stops; a failed gated
  metric stops the variant's gated tasks (those after it are not run: the row says where it stopped);
- a metric settles when the engine's second arithmetic (evaluate's: evaluation/second_arithmetic.py)
  settles it alike at the same look; the two settling it differently, or only one by the cap, make it
  unstable (scoring/verdict/arith_check.py);
- report-only tasks (no tolerance: the retrieval suite) run last, to their cap, on every variant, a
  failed one included (eval.sequential.probes: all), or only on one that can still pass (passable);
- once the variant cannot pass, no verdict is checked in the second arithmetic.

The baseline's own samples come from stage baseline@<model>, run to every cap in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Collection, Protocol

from pipeline.evaluation import interleave_looks, stratified
from pipeline.evaluation.lm_eval_runner import WallBudgetExceeded, run_tasks
from pipeline.domain.sets import looks, task_rows, tasks
from pipeline.domain.result.contract import CANNOT_PASS, FAILED, TIME_BUDGET
from pipeline.domain.result.records import Settled, TaskLooks
from pipeline.domain.sets.metrics import metric_id
from pipeline.domain.sets.sample_row import SampleRow
from pipeline import schema
from pipeline.schema import Eval
from pipeline.scoring.estimators import analysis
from pipeline.scoring.verdict import arith_check
from pipeline.scoring.verdict import margin as rule
from pipeline.scoring.verdict.sequential import Design, look_sizes


@dataclass(frozen=True)
class Gate:
    margin: float                 # the allowed drop, in the metric's units
    higher_is_better: bool = True


@dataclass
class Looked:
    metrics: dict[str, task_rows.TaskResult] = field(default_factory=dict)
    samples: dict[str, list[SampleRow]] = field(default_factory=dict)
    record: dict[str, TaskLooks] = field(default_factory=dict)     # task -> its looks (result.json "looks")
    stopped: str | None = None
    open_at_cap: list[str] = field(default_factory=list)    # gated metrics still unsettled at their cap
    # task -> why it was not run (contract.NOT_RUN: the variant failed or cannot pass, the time budget)
    not_run: dict[str, str] = field(default_factory=dict)
    unstable: list[str] = field(default_factory=list)       # metrics the two arithmetics did not settle alike
    second_rows: dict[str, list[SampleRow]] = field(default_factory=dict)    # task -> its samples in the second
    budget: str | None = None         # where the time budget stopped the looks (the task kept at that look)

    def out_of_time(self, specs: list[tasks.TaskSpec]) -> list[str]:
        """The time budget ran out: the tasks that had not started are not run for it (those read keep
        their last completed look, _task). Returns them."""
        left = [s.name for s in specs if s.name not in self.record and s.name not in self.not_run]
        self.not_run.update(dict.fromkeys(left, TIME_BUDGET))
        return left

    def cannot_pass(self) -> str | None:
        """Why the variant can no longer pass (a gated metric failed, is open at its cap, or is unstable
        under the second arithmetic); None if it can."""
        if self.stopped:
            return "it failed a gated metric"
        if self.open_at_cap:
            return f"{', '.join(self.open_at_cap)} inconclusive at the cap"
        if self.unstable:
            return f"{', '.join(self.unstable)} unstable under the second arithmetic"
        return None


def settle(ivs: dict, gates: dict[str, Gate]) -> dict[str, str]:
    """metric -> pass | fail for each gated metric whose interval settles it. Pure."""
    out = {}
    for m, g in gates.items():
        iv = ivs.get(m)
        if iv is None:
            continue
        sign = 1.0 if g.higher_is_better else -1.0
        lo, hi = sorted((sign * iv.lo, sign * iv.hi))
        found = rule.verdict(lo, hi, g.margin)
        if found != rule.OPEN:
            out[m] = found
    return out


def gates_from(base_metrics: dict[str, float], higher_is_better: dict[str, bool],
               gate: Callable[[str], schema.Gate]) -> dict[str, Gate]:
    """metric id -> its gate, for the metrics the decision judges (a tolerance) and the baseline can do
    (min_baseline): a metric the baseline cannot do has nothing to settle. Pure."""
    out = {}
    for mid, value in base_metrics.items():
        g = gate(mid)
        if g.tolerance is None or (g.min_baseline is not None and value < g.min_baseline):
            continue
        out[mid] = Gate(g.tolerance.allowed_drop(value), higher_is_better.get(mid, True))
    return out


class Second(Protocol):
    """The engine's second arithmetic (evaluation/second_arithmetic.py) for each settled verdict's check."""
    baseline: dict[str, list[SampleRow]]       # task -> the baseline's samples under it (stage noise)

    def rows(self, spec: tasks.TaskSpec, start: int, stop: int | None) -> list[SampleRow] | None:
        """The variant's samples of rows [start, stop) of the task's order (stop None: the whole task, as
        a registry task runs), under the second arithmetic; None when it cannot run here (the looks then
        go on in the run's arithmetic alone)."""
        ...


def run_looks(session, specs: list[tasks.TaskSpec], ev: Eval, baseline: dict[str, list[SampleRow]],
              gates: dict[str, Gate], confidence: float, run=run_tasks, done: Looked | None = None,
              chunk_run=None, report_only: Collection[str] = (), second: Second | None = None,
              interleave: bool = False) -> Looked:
    """`baseline`: task -> the baseline's rows (every cap); `gates`: metric id -> its gate (gates_from).
    `done` fills as tasks finish, so what a time limit interrupts is kept. `chunk_run` runs one look's
    documents (default `run`; evaluate's reads what the sample cache has, evaluation/sample_cache.py).
    `report_only`: tasks with no tolerance on any metric, run to their cap in one look (the user asked
    for their numbers); a task whose gated metrics the baseline cannot do stops at the first look.
    `second`: each verdict settles only once the second arithmetic gives it at the same look too
    (scoring/verdict/arith_check.py); without it, on the run's arithmetic alone, and not once the variant cannot
    pass (`Looked.cannot_pass`). Report-only tasks run on a variant that failed or cannot pass unless
    eval.sequential.probes is `passable`. `interleave` (a time budget): the gated tasks take their looks
    in turn (interleave_looks.py), else one task after another."""
    chunk_run = chunk_run or run
    done = done if done is not None else Looked()
    # log-likelihood tasks first; stable: YAML order otherwise
    ordered = sorted(specs, key=lambda s: not tasks.is_loglik(s))
    passable = ev.sequential.probes == "passable"
    # a variant that can no longer pass (a gated metric open at its cap or unstable) stops too: no verdict
    # of its remaining tasks could change its verdict or the pick (eval.sequential.unpassable)
    halts = (lambda: done.cannot_pass() is not None) if ev.sequential.unpassable == "stop" else (lambda: False)
    gated = [_task(session, s, ev, baseline, gates, confidence, run, chunk_run, done, second)
             for s in ordered if s.name not in report_only]
    if interleave:
        interleave_looks.round_robin(gated, done, halts)
    else:
        for task in gated:
            for _ in task:          # every look of this task, then the next task's
                pass
            if done.stopped or halts():
                break
    if not done.stopped and halts():
        done.not_run.update(dict.fromkeys([s.name for s in ordered if s.name not in done.record
                                           and s.name not in report_only], CANNOT_PASS))
    if done.stopped:
        left = [s.name for s in ordered if s.name not in done.record and (passable or s.name not in report_only)]
        done.not_run.update(dict.fromkeys(left, FAILED))
        if passable:
            return done
    for spec in [s for s in ordered if s.name in report_only]:
        if passable and done.cannot_pass():
            done.not_run[spec.name] = CANNOT_PASS
            continue
        for _ in _task(session, spec, ev, baseline, gates, confidence, run, chunk_run, done, None, whole=True):
            pass
    return done


def _task(session, spec: tasks.TaskSpec, ev: Eval, baseline: dict[str, list[SampleRow]], gates: dict[str, Gate],
          confidence: float, run, chunk_run, done: Looked, second: Second | None, whole: bool = False):
    """One task in looks (`whole`: to its cap in one), its rows, record and verdicts into `done`. A
    generator: it pauses before each look after the first; sent False there it ends at the look it
    completed, and the budget's exception thrown there ends it so too."""
    mine = {m: g for m in spec.higher_is_better if (g := gates.get(metric_id(spec.name, m)))}
    # once the variant cannot pass, a verdict's check would change no recommendation
    checking = second is not None and bool(mine) and spec.name in second.baseline and not done.cannot_pass()
    if spec.docs is None or spec.name not in baseline:    # registry task, or no baseline: to the cap
        found, rows = run(session, [spec], ev)
        done.metrics.update(found)
        done.samples.update(rows)
        done.record[spec.name] = TaskLooks(cap=spec.num_docs, looks=1, n=spec.num_docs, whole=True)
        if checking and spec.name in baseline:
            _check_whole(spec, mine, baseline, rows[spec.name], confidence, second, done)
        return
    plan, cap = None if whole else stratified.plan(spec, baseline.get(spec.name), ev), spec.num_docs
    sizes = plan.sizes if plan else [cap] if whole else look_sizes(ev.sequential.looks, cap)
    spec, tag = (plan.spec, plan.tag) if plan else (spec, list)
    design = Design.of(plan.fractions if plan else [n / cap for n in sizes], confidence)
    rows: list[SampleRow] = []
    rows2: list[SampleRow] = []
    first: dict[str, Settled] = {}       # settled in the run's arithmetic (a settled metric stays settled)
    other: dict[str, Settled] = {}       # settled in the second arithmetic
    cut: WallBudgetExceeded | None = None
    k = 0
    halted = False
    for look, n in enumerate(sizes):
        kept = (list(rows), list(rows2), dict(first), dict(other), checking)
        try:
            if look and (yield) is False:      # halted: the variant failed on another task
                halted = True
                break
            rows += tag(chunk_run(session, [looks.chunk(spec, len(rows), n)], ev)[1][spec.name])
            conf = design.confidence_at(look)
            first.update(_settled({m: g for m, g in mine.items() if m not in first}, baseline[spec.name], rows,
                                  conf, look, n))
            if checking and any(m not in other for m in first):
                more = second.rows(spec, len(rows2), n)
                checking = more is not None        # None: it could not start here (its record says why)
            if checking and any(m not in other for m in first):
                rows2 += tag(more)
                other.update(_settled({m: g for m, g in mine.items() if m in first and m not in other},
                                      second.baseline[spec.name], rows2, conf, look, n))
        except WallBudgetExceeded as e:
            if look == 0:               # no look completed: the task is not measured
                raise
            # the time budget ends the task at its last completed look: its repeated intervals are valid
            # under any stopping, so its verdicts are read there (issue 43), never left blank
            rows, rows2, first, other, checking = kept
            cut = e
            break
        k = look
        state = arith_check.state(first, other if checking else first, list(mine))
        if len(state.settled) + len(state.unstable) == len(mine) or state.failed():
            break
    state = arith_check.state(first, other if checking else first, list(mine),
                              at_cap=cut is None and not halted and k == len(sizes) - 1)
    rows.sort(key=lambda r: r.doc_id)
    done.metrics[spec.name] = task_rows.TaskResult(task_rows.scores_from_rows(spec, rows), rows,
                                               dict(spec.higher_is_better))
    done.samples[spec.name] = rows
    # order: the documents read, in look order, so that decide reads the flips, ties, regressions and
    # by-length deltas beside a verdict from the pairs it settled on (TaskLooks.read), not from every look
    checked = dict(first=first, second=other, unstable=state.unstable) if checking else {}
    done.record[spec.name] = TaskLooks(
        cap=cap, sizes=sizes, looks=k + 1, of=len(sizes), n=len(rows), confidence=design.confidence_at(k),
        settled=state.settled, order=list(spec.doc_ids[:len(rows)]),
        strata=plan.record(ev.sequential.strata, cap) if plan else None, budget=cut is not None, halted=halted,
        **checked)
    if checking:
        done.second_rows[spec.name] = sorted(rows2, key=lambda r: r.doc_id)
    done.unstable += [metric_id(spec.name, m) for m in state.unstable]
    open_ = [metric_id(spec.name, m) for m in mine if m not in state.settled and m not in state.unstable]
    if cut is not None:
        where = (f"look {k + 1} of {len(sizes)} of {spec.name} ({len(rows)} of {cap} samples; "
                 "serving.vllm.budget.max_wall_s)")
        done.budget = f"{done.budget}; {where}" if done.budget else f"stopped by the time budget at {where}"
        raise cut
    if halted:
        return
    done.open_at_cap += open_
    failed = [m for m, s in state.settled.items() if s.verdict == "fail"]
    if failed:
        done.stopped = (f"stopped at look {k + 1} of {len(sizes)} of {spec.name} ({len(rows)} of "
                        f"{cap} samples): {', '.join(metric_id(spec.name, m) for m in failed)} failed")


def _check_whole(spec: tasks.TaskSpec, mine: dict[str, Gate], baseline: dict[str, list[SampleRow]], rows: list[SampleRow],
                 confidence: float, second: Second, done: Looked) -> None:
    """A task read in one look (an lm-eval registry task) checked like a look: the verdicts its interval
    settles in the run's arithmetic, read again on the second arithmetic's samples of the whole task."""
    first = _settled(mine, baseline[spec.name], rows, confidence, 0, len(rows))
    rows2 = second.rows(spec, 0, None) if first else None
    if rows2 is None:           # nothing settled (nothing to check), or no second arithmetic here
        return
    # as at a look: only what the run's arithmetic settled is read again
    other = _settled({m: g for m, g in mine.items() if m in first}, second.baseline[spec.name], rows2,
                     confidence, 0, len(rows2))
    state = arith_check.state(first, other, list(mine), at_cap=True)
    done.record[spec.name] = replace(done.record[spec.name], first=first, second=other, unstable=state.unstable)
    done.second_rows[spec.name] = sorted(rows2, key=lambda r: r.doc_id)
    done.unstable += [metric_id(spec.name, m) for m in state.unstable]


def _settled(open_: dict[str, Gate], base: list[SampleRow], rows: list[SampleRow], conf: float, k: int,
             n: int) -> dict[str, Settled]:
    """metric -> where it settled (verdict, look, n, the repeated interval, its confidence) for the open
    metrics this look's repeated interval settles: the interval is recorded with the verdict, and decide
    reads the verdict from it, never from a second computation at another look."""
    pairs = analysis.align(base, rows, subset=True)
    ivs = analysis.intervals(list(open_), pairs, conf)     # the look's repeated interval, read at its level
    return {m: Settled(v, k + 1, n, ivs[m].delta, ivs[m].lo, ivs[m].hi, conf) for m, v in settle(ivs, open_).items()}
