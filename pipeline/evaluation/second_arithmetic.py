"""The engine's second arithmetic for a variant's looks (looks_runner.Second; scoring/verdict/arith_check.py):
the variant's samples computed again in its session's `second_arithmetic` (the reference backend: the
variant loaded a second time in serving.reference.noise_arithmetic; vLLM: the same server, lm-eval's
requests in another batch composition), through the sample cache, opened the first time a verdict
needs checking and kept open until the looks are done; judged against the baseline's samples in that
arithmetic (stage noise's).

result.json "arithmetic_check": {status (contract.CHECK_STATES: checked | not needed | skipped |
impossible), why, arithmetic, metrics: {metric id: {first, second, status}}, sample_cache, seconds}; the
samples go to <variant dir>/second_arithmetic/samples/.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline import paths, schema
from pipeline.engines import Unsupported
from pipeline.evaluation import sample_cache
from pipeline.evaluation.lm_eval_runner import run_tasks
from pipeline.evaluation.looks_runner import Looked
from pipeline.domain.result import contract, records
from pipeline.domain.sets import looks, sample_row, task_rows, tasks
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.scoring.verdict import arith_check

DIR = "second_arithmetic"


class Checker:
    """looks_runner.Second over a served variant; `stack` closes the second session with the looks."""

    def __init__(self, served, params: schema.Params, specs: list[tasks.TaskSpec],
                 baseline: dict[str, list[SampleRow]], stack: ExitStack):
        self.served, self.params, self.specs, self.baseline, self.stack = served, params, specs, baseline, stack
        self.session = None
        self.record: dict[str, Any] = {"status": contract.CHECKED}
        self.seconds = 0.0

    def rows(self, spec: tasks.TaskSpec, start: int, stop: int | None) -> list[SampleRow] | None:
        if self.record["status"] != contract.CHECKED:
            return None
        t0 = time.perf_counter()
        if self.session is None:
            try:
                self.session = self.stack.enter_context(self.served.session.second_arithmetic(self.served.variant))
            except Unsupported as e:
                self.record.update(status=contract.IMPOSSIBLE, why=f"the engine refused it: {e}")
                return None
            info = self.session.info
            self.record["arithmetic"] = (info.get("arithmetic")
                                         or f"lm-eval requests {info.get('num_concurrent')} at a time")
            self.run = run_tasks
            if self.served.cache is not None:       # an endpoint's server may change: nothing kept
                cache = sample_cache.SampleCache(sample_cache.variant_key(self.params, self.served.variant,
                                                                          info["backend"], info))
                self.record["sample_cache"] = counts = {}
                self.run = sample_cache.cached(cache, sample_cache.task_keys(self.params, self.specs), run_tasks,
                                               counts)
        part = spec if stop is None else looks.chunk(spec, start, stop)
        rows = self.run(self.session, [part], self.params.eval)[1][spec.name]
        self.seconds += time.perf_counter() - t0
        return rows


@dataclass(frozen=True)
class NoCheck:
    """Why a variant's verdicts cannot be read in the second arithmetic: its result.json record."""
    status: str                      # contract.SKIPPED or IMPOSSIBLE
    why: str


def second(served, params: schema.Params, specs: list[tasks.TaskSpec], baseline: dict[str, list[SampleRow]] | NoCheck,
           stack: ExitStack, result: dict) -> Checker | None:
    """The looks' second arithmetic, or None (result["arithmetic_check"] says why: skipped or impossible,
    from `baseline_second`, or a backend without one)."""
    if isinstance(baseline, NoCheck):
        result["arithmetic_check"] = asdict(baseline)
        return None
    if not hasattr(served.session, "second_arithmetic") or served.variant is None:
        result["arithmetic_check"] = {"status": contract.IMPOSSIBLE, "why": "this backend has no second arithmetic"}
        return None
    return Checker(served, params, specs, baseline, stack)


def finish(checker: Checker | None, done: Looked, result: dict, out_dir: Path | None) -> None:
    """result["arithmetic_check"] from the looks' records; the second arithmetic's samples to out_dir."""
    if checker is None:
        return
    found = arith_check.metrics_record(done.record)
    if checker.record["status"] != contract.CHECKED:
        result["arithmetic_check"] = checker.record
        return
    if checker.session is None:
        why = "the variant cannot pass" if done.cannot_pass() else "no verdict settled"
        result["arithmetic_check"] = {"status": contract.NOT_NEEDED, "why": why}
        return
    result["arithmetic_check"] = {**checker.record, "metrics": records.plain(found),
                                  "seconds": round(checker.seconds, 1)}
    for name, rows in done.second_rows.items():
        # a task checked for none of its metrics (none settled) has no rows: no file (an empty JSONL is
        # what io.read_jsonl refuses as a truncated one)
        if out_dir is not None and rows:
            sample_row.write(out_dir / DIR / paths.SAMPLES / f"{name}.jsonl", rows)


def baseline_second(params: schema.Params, model: str) -> dict[str, list[SampleRow]] | NoCheck:
    """task -> the baseline's samples under the second arithmetic (stage noise), or, where there are none,
    a NoCheck saying why: skipped (the user's eval.noise_floor: false) or impossible
    (stage noise unsupported or failed)."""
    res = contract.load(paths.noise_dir(model) / paths.RESULT_FILE)
    if res.status == "off":
        return NoCheck(contract.SKIPPED, "eval.noise_floor is false")
    if res.status != "ok":
        return NoCheck(contract.IMPOSSIBLE, f"stage noise {res.status}" + (f" ({res.reason})" if res.reason else ""))
    return task_rows.read_samples(paths.noise_dir(model))
