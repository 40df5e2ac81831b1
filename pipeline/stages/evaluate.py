"""Stage evaluate@<model>-<tier>-<kv>: serve one variant with the configured backend, run the
lm-eval tasks with per-sample logging, and measure generation throughput.

    python -m pipeline.stages.evaluate <model> <tier> <kv>

Writes results/evals/<model>/<tier>-<kv>/{result.json, samples/<task>.jsonl}. result.json names
every metric `<task>/<metric>` (`metrics`, `higher_is_better`, the latter from each task's YAML or
lm-eval task) and where it was measured (`measured_on`: CPU, accelerator, torch threads, the serving
engine and its version; pipeline/domain/provenance.py) and whether its prompts were wrapped in the
model's chat template (`chat_template`, prepare's record of models.<model>.apply_chat_template) and
whether they start with BOS (`add_bos_token`). A variant that cannot run here is recorded as status
"unsupported" (with the reason), one that breaks as "failed"; neither stops the pipeline.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
import time
import traceback
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipeline import errors, io, paths, schema
from pipeline.backends import Unsupported, Variant
from pipeline.backends.base import baseline_variant
from pipeline.backends.fidelity_compare import measure_fidelity
from pipeline.backends import longctx, sample_cache, second_arithmetic
from pipeline.backends.lm_eval_runner import (WallBudgetExceeded, flat, run_tasks, run_within, wall_limit,
                                              without_refused)
from pipeline.backends.looks_runner import Looked, gates_from, run_looks
from pipeline.domain import fidelity_set, looks, provenance, task_rows, tasks
from pipeline.domain.prompts import throughput_prompts
from pipeline.scoring.planner import roofline
from pipeline.stages import runner
from pipeline.backends.selection import select


@dataclass(frozen=True)
class Served:
    """A variant's started session, and the cache of what it already measured (None: an endpoint)."""
    session: Any
    cache: sample_cache.SampleCache | None
    variant: Variant | None = None


Quality = Callable[[Served, list, dict], tuple[dict, dict, "str | None"]]   # (served, specs, result) -> run_within's


def reading_cache(served: Served, params: schema.Params, specs: list[tasks.TaskSpec], result: dict):
    """run_tasks, reading and filling the served variant's sample cache; result gets its counts."""
    if served.cache is None:
        return run_tasks
    result["sample_cache"] = counts = {}
    return sample_cache.cached(served.cache, sample_cache.task_keys(params, specs), run_tasks, counts)


def to_the_caps(params: schema.Params) -> Quality:
    """Every task to its cap, read once (what the cache has is not computed again), within the
    session's time budget."""
    return lambda served, specs, result: run_within(served.session, specs, params.eval, served.session.remaining_s(),
                                                   run=reading_cache(served, params, specs, result))


def measured(served: Served, name: str, spec: Any, compute: Callable[[], Any], result: dict) -> Any:
    """compute() once per variant key (fidelity, the load test): a re-run of evaluate that changed
    nothing they depend on (a tolerance) reads them; result["reused"] says from when."""
    return compute() if served.cache is None else served.cache.measured(name, spec, compute, result)


class Phases:
    """result["phases"]: seconds per part of an evaluation (load: the model and its session; tasks;
    second_arithmetic: their check, with its own load; fidelity; long_context; throughput), so a run's cost can be read per part; the stage's `seconds`
    less their sum is the process's own start (imports) and the writing of its outputs."""

    def __init__(self, result: dict):
        self.phases, self.t = result.setdefault("phases", {}), time.perf_counter()

    def lap(self, name: str, within: tuple[str, float | None] = ("", None)) -> None:
        """`within`: (a part of this phase, its seconds), recorded apart from it."""
        now = time.perf_counter()
        part, spent = within
        self.phases[name] = round(now - self.t - (spent or 0.0), 1)
        if spent:
            self.phases[part] = spent
        self.t = now


def evaluate(params: schema.Params, model: str, tier: str, kv: str, out_dir: Path, checkpoint: Path, record: dict,
             quality: Quality | None = None, long: Callable[[Served, dict], dict] | None = None) -> dict[str, Any]:
    """One variant's result (its samples and fidelity rows written to out_dir), from its serving
    checkpoint and record; `quality` runs the tasks (default: to_the_caps; a variant's: in looks);
    `long` measures fidelity by position (a variant's: long_context; the baseline is its reference)."""
    quality = quality or to_the_caps(params)
    calibrated = params.kv_modes[kv].calibrated
    result: dict[str, Any] = {"model": model, "tier": tier, "kv": kv}
    if record.get("status") != "ok":
        stage = "kvscales" if calibrated else "quantize"
        status = "unsupported" if record.get("status") == "unsupported" else "failed"
        result.update(status=status, reason=f"{stage}: {record.get('reason', 'no checkpoint')}")
        return result
    specs = tasks.build_all(params.eval.tasks)
    if params.eval.sequential is not None:
        specs = looks.in_look_order(specs, params.eval.seed, looks.data_keys(params.eval.tasks))
    # read before any model work: a missing file stops the stage, not an hour of evaluation
    base = fidelity_set.load(paths.fidelity_base(model)) if params.eval.fidelity is not None else None
    variant = Variant.of(params, model, tier, kv, checkpoint, record, out_dir)
    backend = select(params, tier=params.tiers[tier])
    result["backend"] = backend.name
    result["chat_template"] = variant.chat      # the prompts' format, as prepare resolved it for the model
    result["add_bos_token"] = variant.add_bos
    fidelity_rows: list[dict] = []
    clock = Phases(result)
    try:
        with backend.session(variant) as session:
            clock.lap("load")
            result["serving"] = session.info
            result["compute_dtype"] = session.info.get("compute_dtype")   # decide compares only equal ones
            result["measured_on"] = provenance.of_session(backend.name, session.engine_version, session.info)
            specs = without_refused(specs, getattr(session, "loglik_refusal", None), result)
            cache = None if backend.name == "endpoint" else sample_cache.SampleCache(
                sample_cache.variant_key(params, variant, backend.name, session.info))
            served = Served(session, cache, variant)
            metrics, samples, cut = quality(served, specs, result)
            clock.lap("tasks", ("second_arithmetic", (result.get("arithmetic_check") or {}).get("seconds")))
            if cut:
                result["cut"] = cut
            # quality before load: under a wall budget the load test is what gets cut. A variant that
            # failed a gated metric stops everything (issue 20): its KL and speed would change no verdict
            # and it is recommended nowhere
            failed = "the variant failed a gated metric first" if result.get("stopped") else None
            if failed:
                result["fidelity"], result["throughput"] = {"status": "skipped", "why": failed}, {"skipped": failed}
            elif base is not None:
                try:
                    result["fidelity"], fidelity_rows = measured(
                        served, "fidelity", [dataclasses.asdict(params.eval.fidelity),
                                             sample_cache.files_hash([paths.fidelity_base(model)])],
                        lambda: measure_fidelity(session, base, backend.name, lambda: baseline_variant(params, model),
                                                 any_engine=backend.name == "endpoint"), result)
                except Exception as e:  # noqa: BLE001 - the task metrics already measured are kept
                    traceback.print_exc()
                    result["fidelity"] = {"status": "failed", "why": errors.one_line(e)}
                clock.lap("fidelity")
            if long is not None:
                result["long_context"] = long(served, result)
                clock.lap("long_context")
            if not failed:
                tp = params.eval.throughput
                prompts = throughput_prompts(specs, tp.batch_size)
                result["throughput"] = measured(served, "throughput", [dataclasses.asdict(tp), prompts],
                                                lambda: session.throughput(prompts, tp.new_tokens, tp.repeats), result)
                clock.lap("throughput")
                if backend.name == "vllm":
                    result["throughput"]["roofline"] = roofline(result["throughput"], record.get("weight_bytes"),
                                                                params.serving.bandwidth_gbps)
    except Unsupported as e:
        # a session that started recorded where; one that did not: "unsupported here" is this machine
        result.setdefault("measured_on", provenance.of_machine(backend.name))
        result.update(status="unsupported", reason=str(e))
        return result
    for name, rows in samples.items():
        io.atomic_write_jsonl(out_dir / paths.SAMPLES / f"{name}.jsonl", rows)
    if fidelity_rows:
        io.atomic_write_jsonl(out_dir / paths.FIDELITY_ROWS, fidelity_rows)
    scores, hib = flat(metrics)
    result.update(status="ok", metrics=scores, higher_is_better=hib,
                  num_samples={name: len(rows) for name, rows in samples.items()}, versions=provenance.versions())
    return result


def long_context(served: Served, params: schema.Params, model: str, result: dict) -> dict:
    """Fidelity by position against the baseline's long texts (eval.long_context), once per variant key;
    not for a variant that already failed a gated metric, nor (eval.sequential.probes: passable) for one
    that can no longer pass: nothing it could show would change a verdict or a recommendation."""
    if result.get("stopped"):
        return {"status": "skipped", "why": "the variant failed a gated metric first"}
    seq = params.eval.sequential
    if result.get("cannot_pass") and seq is not None and seq.probes == "passable":
        return {"status": "skipped", "why": f"the variant cannot pass: {result['cannot_pass']}"}
    base = fidelity_set.load(paths.long_base(model))
    if base.meta.get("unavailable") or not base.seqs:
        return {"status": "unsupported", "why": base.meta.get("unavailable") or "no long texts"}
    model_ = getattr(served.session, "model", None)
    if model_ is None:
        return {"status": "unsupported", "why": longctx.NOT_ON_THIS_BACKEND}
    spec = [dataclasses.asdict(params.eval.long_context), sample_cache.files_hash([paths.long_base(model)])]
    try:
        return measured(served, "long_context", spec, lambda: longctx.measure(model_, base), result)
    except Exception as e:  # noqa: BLE001 - the task metrics already measured are kept
        traceback.print_exc()
        return {"status": "failed", "why": errors.one_line(e)}


def copied_baseline(model: str, out_dir: Path) -> dict[str, Any]:
    """The baseline's result as stage baseline measured it, with its samples: nothing evaluated twice."""
    src = paths.baseline_dir(model)
    shutil.copytree(src, out_dir, dirs_exist_ok=True)
    return {**io.read_json(src / paths.RESULT_FILE), "copied_from": str(src)}


@dataclass(frozen=True)
class Against:
    """What a variant's looks judge against: the baseline's samples (stage baseline), each gated
    metric's gate, and the baseline's samples under the second arithmetic (stage noise; a string: why
    there are none) for the check of each settled verdict."""
    samples: dict[str, list[dict]]
    gates: dict
    second: dict[str, list[dict]] | str


def baseline_samples(params: schema.Params, model: str) -> Against | None:
    """None without eval.sequential or when the baseline did not run (the variant then runs every task
    to its cap)."""
    res = io.read_json(paths.baseline_dir(model) / paths.RESULT_FILE)
    if params.eval.sequential is None or res.get("status") != "ok":
        return None
    gates = gates_from(res["metrics"], res.get("higher_is_better", {}), params.gate)
    return Against(task_rows.read_samples(paths.baseline_dir(model)), gates,
                   second_arithmetic.baseline_second(params, model))


def in_looks(served: Served, specs: list[tasks.TaskSpec], params: schema.Params, against: Against,
             result: dict, out_dir: Path | None = None) -> tuple[dict, dict, str | None]:
    """run_looks within the session's time budget, reading what the sample cache has (not for an
    endpoint: its server may change), each verdict settled in both arithmetics; result gets the looks,
    the check, the cache's counts and where it stopped."""
    done, cut = Looked(), None
    session = served.session
    with ExitStack() as stack:
        check = second_arithmetic.second(served, params, specs, against.second, stack, result)
        try:
            with wall_limit(session.remaining_s()):
                run_looks(session, specs, params.eval, against.samples, against.gates, params.decision.bootstrap,
                          done=done, report_only=tasks.report_only(specs, params.tolerance),
                          chunk_run=reading_cache(served, params, specs, result), second=check)
        except WallBudgetExceeded as e:
            if not done.metrics:
                raise Unsupported(f"too slow here: lm-eval {e}") from None
            cut = f"too slow here: lm-eval {e}; not measured: " + ", ".join(s.name for s in specs if s.name not in done.record)
    second_arithmetic.finish(check, done, result, out_dir)
    result["looks"] = done.record
    if done.stopped:
        result["stopped"] = done.stopped
    elif done.cannot_pass():
        result["cannot_pass"] = done.cannot_pass()
    if done.skipped:
        result["not_run"] = {"tasks": done.skipped, "why": f"the variant cannot pass: {done.cannot_pass()}"}
    return done.metrics, done.samples, cut


def run_stage(st: runner.Stage, model: str, tier: str, kv: str, out_dir: Path, work: Callable[[], dict]) -> None:
    """work() (an evaluate) with a stage's outcome: bad input stops it (exit 2), any other failure is the row's."""
    t0 = time.perf_counter()
    try:
        result = work()
    except (io.DataError, schema.ConfigError) as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:  # noqa: BLE001 - one broken variant must not lose the others
        traceback.print_exc()
        result = {"model": model, "tier": tier, "kv": kv, "status": "failed",
                  "reason": errors.one_line(e)}
    # a copied baseline keeps the seconds of the stage that measured it
    result.setdefault("seconds", round(time.perf_counter() - t0, 1))
    io.atomic_write_json(out_dir / paths.RESULT_FILE, result)
    st.done(result["status"], result.get("reason") or result.get("stopped") or result.get("cut") or cannot_pass(result))


def cannot_pass(result: dict) -> str | None:
    """The console's word on a variant that can no longer pass, and what it therefore did not run."""
    if not result.get("cannot_pass"):
        return None
    skipped = list((result.get("not_run") or {}).get("tasks", []))
    if (result.get("long_context") or {}).get("status") == "skipped":
        skipped.append("long context")
    return f"cannot pass: {result['cannot_pass']}" + (f"; not run: {', '.join(skipped)}" if skipped else "")


@runner.stage_main("evaluate", ("model", "tier", "kv"))
def main(st: runner.Stage) -> None:
    (model, tier, kv), params = st.args, st.params
    out_dir, b = paths.eval_dir(model, tier, kv), params.decision.baseline
    if (tier, kv) == (b.tier, b.kv):
        run_stage(st, model, tier, kv, out_dir, lambda: copied_baseline(model, out_dir))
        return
    calibrated = params.kv_modes[kv].calibrated

    def work() -> dict:
        record = io.read_json(paths.serving_record(model, tier, kv, calibrated))
        # a tier that has no checkpoint is a row at once: nothing to judge, so nothing else to read
        against = baseline_samples(params, model) if record.get("status") == "ok" else None
        checkpoint = paths.serving_checkpoint(model, tier, kv, calibrated)
        quality = None if against is None else (
            lambda served, specs, result: in_looks(served, specs, params, against, result, out_dir))
        long = None if params.eval.long_context is None else (
            lambda served, result: long_context(served, params, model, result))
        return evaluate(params, model, tier, kv, out_dir, checkpoint, record, quality, long)
    run_stage(st, model, tier, kv, out_dir, work)


if __name__ == "__main__":
    main()
