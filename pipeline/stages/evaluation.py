"""One variant's evaluation, shared by stages baseline and evaluate: serve it with the configured
backend, run the lm-eval tasks with per-sample logging, measure fidelity and generation throughput.
Not a stage of its own: `python -m pipeline.stages.evaluate <model> <tier> <kv>` or
`python -m pipeline.stages.baseline <model>` run it.

result.json names every metric `<task>/<metric>` (`metrics`, `higher_is_better`, the latter from each
task's YAML or lm-eval task) and where it was measured (`measured_on`: CPU, accelerator, torch threads,
the serving engine and its version; pipeline/domain/result/provenance.py) and whether its prompts were wrapped
in the model's chat template (`chat_template`, prepare's record of models.<model>.apply_chat_template)
and whether they start with BOS (`add_bos_token`). A variant that cannot run here is recorded as status
"unsupported" (with the reason), one the time budget ended before its first look as "not measured",
one that breaks as "failed"; none stops the pipeline.
"""
from __future__ import annotations

import dataclasses
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipeline import errors, io, paths, schema
from pipeline.engines import Unsupported, Variant
from pipeline.evaluation import sample_cache
from pipeline.engines.base import baseline_variant
from pipeline.evaluation.fidelity_compare import measure_fidelity
from pipeline.evaluation.lm_eval_runner import NotMeasured, flat, run_tasks, run_within, without_refused
from pipeline.engines.selection import select
from pipeline.domain.result import contract, provenance
from pipeline.domain.sets import fidelity_set, looks, sample_row, tasks
from pipeline.domain.sets.prompts import throughput_prompts
from pipeline.scoring.planning.planner import roofline
from pipeline.domain.model import tokenizer_check
from pipeline.domain.result import records, source_record
from pipeline.domain.result.facts import Throughput
from pipeline.domain.result.serving_record import ServingRecord
from pipeline.stages import runner

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


def evaluate(params: schema.Params, model: str, tier: str, kv: str, out_dir: Path, checkpoint: Path, record: ServingRecord,
             quality: Quality | None = None, long: Callable[[Served, dict], dict] | None = None) -> dict[str, Any]:
    """One variant's result (its samples and fidelity rows written to out_dir), from its serving
    checkpoint and record; `quality` runs the tasks (default: to_the_caps; a variant's: in looks);
    `long` measures fidelity by position (a variant's: long_context; the baseline is its reference)."""
    quality = quality or to_the_caps(params)
    calibrated = params.kv_modes[kv].calibrated
    result: dict[str, Any] = {"model": model, "tier": tier, "kv": kv}
    if not record.ok:
        stage = "kvscales" if calibrated else "quantize"
        status = "unsupported" if record.status == "unsupported" else "failed"
        result.update(status=status, reason=f"{stage}: {record.reason or 'no checkpoint'}")
        return result
    specs = tasks.build_all(params.eval.tasks, model)
    if params.eval.sequential is not None:
        specs = looks.in_look_order(specs, params.eval.seed, looks.data_keys(params.eval.tasks))
    # read before any model work: a missing file stops the stage, not an hour of evaluation
    base = fidelity_set.load(paths.fidelity_base(model)) if params.eval.fidelity is not None else None
    variant = Variant.of(params, model, tier, kv, checkpoint, record, out_dir)
    backend = select(params, tier=params.tiers[tier])
    result["backend"] = backend.name
    result["chat_template"] = variant.chat      # the prompts' format, as prepare resolved it for the model
    result["add_bos_token"] = variant.add_bos
    # prepare's tokenizer check, overridden or clean (models.<name>.check_tokenizer): decision.md's page 1
    result["tokenizer_check"] = source_record.read(model).get(tokenizer_check.RECORD_KEY)
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
            # failed a gated metric skips its fidelity and load test: its KL and speed would change no
            # verdict and it is recommended nowhere. Its long-context probe still runs (eval.sequential.probes)
            failed = "the variant failed a gated metric first" if result.get("stopped") else None
            skip = failed or ("the time budget ran out in its tasks (serving.vllm.budget.max_wall_s)" if cut else None)
            if skip:
                result["fidelity"], result["throughput"] = {"status": "skipped", "why": skip}, {"skipped": skip}
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
                result["long_context"] = {"status": "skipped", "why": skip} if cut else long(served, result)
                clock.lap("long_context")
            if not skip:
                tp = params.eval.throughput
                prompts = throughput_prompts(specs, tp.batch_size, variant.chat)
                result["throughput"] = measured(served, "throughput", [dataclasses.asdict(tp), prompts],
                                                lambda: session.throughput(prompts, tp.new_tokens, tp.repeats), result)
                clock.lap("throughput")
                if backend.name == "vllm":
                    found = records.parse(Throughput, result["throughput"], "throughput")
                    result["throughput"]["roofline"] = dataclasses.asdict(
                        roofline(found, record.weight_bytes, params.serving.bandwidth_gbps))
    except Unsupported as e:
        # a session that started recorded where; one that did not: "unsupported here" is this machine
        result.setdefault("measured_on", provenance.of_machine(backend.name))
        result.update(status="unsupported", reason=str(e))
        return result
    except NotMeasured as e:
        result.update(status=contract.NOT_MEASURED, reason=str(e))
        return result
    for name, rows in samples.items():
        sample_row.write(out_dir / paths.SAMPLES / f"{name}.jsonl", rows)
    if fidelity_rows:
        io.atomic_write_jsonl(out_dir / paths.FIDELITY_ROWS, fidelity_rows)
    scores, hib = flat(metrics)
    result.update(status="ok", metrics=scores, higher_is_better=hib,
                  num_samples={name: len(rows) for name, rows in samples.items()}, versions=provenance.versions())
    return result


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
    io.atomic_write_json(out_dir / paths.RESULT_FILE, contract.stamp(result, "variant"))
    st.done(result["status"], result.get("reason") or left_after(result.get("stopped") or result.get("cut"), result)
            or cannot_pass(result))


def left_after(where: str | None, result: dict) -> str | None:
    """The console's word on where a variant's looks stopped (a failed metric, a time budget), with the
    tasks it then did not run."""
    if not where:
        return None
    left = [t for t, why in (result.get("not_run") or {}).items() if why != contract.CANNOT_PASS]
    return where + (f"; not run: {', '.join(left)}" if left else "")


def cannot_pass(result: dict) -> str | None:
    """The console's word on a variant that can no longer pass, and what it therefore did not run."""
    if not result.get("cannot_pass"):
        return None
    skipped = [t for t, why in (result.get("not_run") or {}).items() if why == contract.CANNOT_PASS]
    if (result.get("long_context") or {}).get("status") == "skipped":
        skipped.append("long context")
    return f"cannot pass: {result['cannot_pass']}" + (f"; not run: {', '.join(skipped)}" if skipped else "")
