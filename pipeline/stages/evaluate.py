"""Stage evaluate@<model>-<tier>-<kv>: one variant evaluated in looks against the baseline's samples
(stage baseline), each settled verdict checked under the second arithmetic (stage noise), then its
long-context probe; the baseline's own row is copied from stage baseline.

    python -m pipeline.stages.evaluate <model> <tier> <kv>

Writes results/evals/<model>/<tier>-<kv>/{result.json, samples/<task>.jsonl}; what result.json holds:
pipeline/stages/evaluation.py.
"""
from __future__ import annotations

import dataclasses
import shutil
import traceback
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import errors, io, paths, schema
from pipeline.evaluation import longctx, sample_cache, second_arithmetic
from pipeline.evaluation.lm_eval_runner import WallBudgetExceeded, before_first_look, wall_limit
from pipeline.evaluation.looks_runner import Looked, gates_from, run_looks
from pipeline.domain.result import contract, kv_repaired, records, serving_record
from pipeline.domain.sets import fidelity_set, task_rows, tasks
from pipeline.engines.selection import select
from pipeline.stages import look_budget, runner
from pipeline.stages.evaluation import Served, evaluate, measured, reading_cache, run_stage
from pipeline.domain.sets.sample_row import SampleRow


def long_context(served: Served, params: schema.Params, model: str, result: dict) -> dict:
    """Fidelity by position against the baseline's long texts (eval.long_context), once per variant key,
    on every variant: how its KV cache holds with length is a question its task verdicts do not answer.
    With eval.sequential.probes `passable` not for a variant that failed a gated metric or can no longer
    pass: then nothing it could show would change a verdict or a recommendation."""
    seq = params.eval.sequential
    if seq is not None and seq.probes == "passable":
        if result.get("stopped"):
            return {"status": "skipped", "why": "the variant failed a gated metric first"}
        if result.get("cannot_pass"):
            return {"status": "skipped", "why": f"the variant cannot pass: {result['cannot_pass']}"}
    base = fidelity_set.load(paths.long_base(model))
    if base.meta.get("unavailable") or not base.seqs:
        return {"status": "unsupported", "why": base.meta.get("unavailable") or "no long texts"}
    model_ = getattr(served.session, "model", None)
    path, why_not = (None, None) if model_ is not None else \
        longctx.engine_path(result.get("backend", ""), (result.get("serving") or {}).get("device"))
    if why_not is not None:
        return {"status": "unsupported", "why": why_not}
    spec = [dataclasses.asdict(params.eval.long_context), sample_cache.files_hash([paths.long_base(model)])]
    try:
        if model_ is None:
            return measured(served, "long_context", spec,
                            lambda: longctx.measure_topk(served.session.token_dists, base, path), result)
        return measured(served, "long_context", spec, lambda: longctx.measure(model_, base), result)
    except Exception as e:  # noqa: BLE001 - the task metrics already measured are kept
        traceback.print_exc()
        return {"status": "failed", "why": errors.one_line(e)}


def copied_baseline(model: str, out_dir: Path) -> dict[str, Any]:
    """The baseline's result as stage baseline measured it, with its samples: nothing evaluated twice."""
    src = paths.baseline_dir(model)
    shutil.copytree(src, out_dir, dirs_exist_ok=True)
    contract.load(src / paths.RESULT_FILE)          # refused here when it is not this version's contract
    return {**io.read_json(src / paths.RESULT_FILE), "copied_from": str(src)}


@dataclass(frozen=True)
class Against:
    """What a variant's looks judge against: the baseline's samples (stage baseline), each gated
    metric's gate, and the baseline's samples under the second arithmetic (stage noise; a NoCheck: why
    there are none) for the check of each settled verdict."""
    samples: dict[str, list[SampleRow]]
    gates: dict
    second: dict[str, list[SampleRow]] | second_arithmetic.NoCheck


def baseline_samples(params: schema.Params, model: str) -> Against | None:
    """None without eval.sequential or when the baseline did not run (the variant then runs every task
    to its cap)."""
    res = contract.load(paths.baseline_dir(model) / paths.RESULT_FILE)
    if params.eval.sequential is None or res.status != "ok":
        return None
    gates = gates_from(res.metrics, res.higher_is_better, params.gate)
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
                run_looks(session, specs, params.eval, against.samples, against.gates, params.decision.confidence,
                          done=done, report_only=tasks.report_only(specs, params.tolerance),
                          chunk_run=reading_cache(served, params, specs, result), second=check,
                          interleave=session.remaining_s() is not None)
        except WallBudgetExceeded as e:
            if not done.metrics:
                raise before_first_look(e) from None
            done.out_of_time(specs)
            cut = done.budget or f"the time budget ended: lm-eval {e}"
    second_arithmetic.finish(check, done, result, out_dir)
    result["looks"] = {task: records.plain(lk) for task, lk in done.record.items()}
    if done.stopped:
        result["stopped"] = done.stopped
    elif done.cannot_pass():
        result["cannot_pass"] = done.cannot_pass()
    if done.not_run:
        result["not_run"] = done.not_run
    return done.metrics, done.samples, cut


@runner.stage_main("evaluate", ("model", "tier", "kv"))
def main(st: runner.Stage) -> None:
    (model, tier, kv), params = st.args, st.params
    out_dir, b = paths.eval_dir(model, tier, kv), params.decision.baseline
    if (tier, kv) == (b.tier, b.kv):
        run_stage(st, model, tier, kv, out_dir, lambda: copied_baseline(model, out_dir))
        return
    calibrated = params.kv_modes[kv].calibrated

    def work() -> dict:
        # on vLLM, the budget this machine's measured speed sizes; a total too small stops here, before
        # serving (the reference backend has no time budget: nothing to size, nothing read for it)
        params = (look_budget.fitted_params(st.params, model)
                  if select(st.params, tier=st.params.tiers[tier]).name == "vllm" else st.params)
        params = kv_repaired.params_for(params, model, tier, kv)   # a repaired mode: the layers kvrepair kept
        record = serving_record.read(paths.serving_record(model, tier, kv, calibrated))
        # a tier that has no checkpoint is a row at once: nothing to judge, so nothing else to read
        against = baseline_samples(params, model) if record.ok else None
        checkpoint = paths.serving_checkpoint(model, tier, kv, calibrated)
        quality = None if against is None else (
            lambda served, specs, result: in_looks(served, specs, params, against, result, out_dir))
        long = None if params.eval.long_context is None else (
            lambda served, result: long_context(served, params, model, result))
        result = evaluate(params, model, tier, kv, out_dir, checkpoint, record, quality, long)
        if params.eval.sequential is None and result.get("status") == "ok":
            # the check reads each look's settled verdicts again: a fixed-n read has none to read
            result["arithmetic_check"] = {"status": contract.SKIPPED,
                                          "why": "eval.sequential is null (the check runs in its looks)"}
        return result
    run_stage(st, model, tier, kv, out_dir, work)


if __name__ == "__main__":
    main()
