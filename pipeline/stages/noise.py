"""Stage noise@<model>: the baseline evaluated again under a second, equally valid arithmetic of the same
engine, so decide can tell the engine's own noise from a tier's quantization error, and evaluate can
judge each variant's verdicts again in that arithmetic (scoring/verdict/arith_check.py).

    python -m pipeline.stages.noise <model>

The same gated tasks, samples and prompts as evaluate@<model>-<baseline> (not the report-only ones: no
verdict of theirs to check); the reference backend computes in
serving.reference.noise_arithmetic (auto: bf16-operands where the run computes in float32, float32
where it computes in bfloat16: pipeline/engines/reference/arithmetic.py), vLLM with another batch composition
(pipeline/engines/selection.py). Fidelity: the same KL and top-1 agreement as a variant's, against
the baseline in the run's own arithmetic. Writes results/noise/<model>/{result.json, samples/}; with
`eval.noise_floor: false` a result saying so, and the verdicts then rest on the run's arithmetic alone.
"""
from __future__ import annotations

import dataclasses
import sys
import time
import traceback

from pipeline import errors, io, paths, schema
from pipeline.engines import Unsupported
from pipeline.engines.base import baseline_variant
from pipeline.evaluation.fidelity_compare import measure_fidelity
from pipeline.evaluation import sample_cache
from pipeline.evaluation.lm_eval_runner import flat, run_tasks, run_within
from pipeline.engines.selection import select
from pipeline.domain.result import contract, provenance
from pipeline.domain.sets import fidelity_set, looks, sample_row, tasks
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.schema.params import without_wall_budget
from pipeline.stages import runner


def measured_tasks(params: schema.Params, model: str) -> list[tasks.TaskSpec]:
    """The tasks a tolerance gates, in the baseline's document order. A report-only task (the retrieval
    suite) has no verdict for the noise floor to widen; a tolerance change re-runs this stage, which
    reads every sample it already has from the cache."""
    specs = tasks.build_all(params.eval.tasks, model)
    shown_only = tasks.report_only(specs, params.tolerance)
    specs = [s for s in specs if s.name not in shown_only]
    if params.eval.sequential is not None:      # the baseline's own documents (stage baseline)
        specs = looks.in_look_order(specs, params.eval.seed, looks.data_keys(params.eval.tasks))
    return specs


def measure(params: schema.Params, model: str) -> tuple[dict, dict[str, list[SampleRow]], list[dict]]:
    """(result, task -> sample rows, fidelity rows) of the baseline in the second arithmetic."""
    b = params.decision.baseline
    specs = measured_tasks(params, model)
    base = fidelity_set.load(paths.fidelity_base(model)) if params.eval.fidelity is not None else None
    variant = baseline_variant(params, model, paths.noise_dir(model))
    backend = select(params, noise=True)
    result: dict = {"model": model, "tier": b.tier, "kv": b.kv, "backend": backend.name}
    with backend.session(variant) as session:
        result["serving"] = session.info
        result["arithmetic"] = session.info.get("arithmetic") or f"lm-eval requests {session.info.get('num_concurrent')} at a time"
        result["compute_dtype"] = session.info.get("compute_dtype")
        result["measured_on"] = provenance.of_session(backend.name, session.engine_version, session.info)
        # through the sample cache, keyed by this arithmetic: a raised cap computes only the new samples
        cache = sample_cache.SampleCache(sample_cache.variant_key(params, variant, backend.name, session.info))
        result["sample_cache"] = counts = {}
        run = sample_cache.cached(cache, sample_cache.task_keys(params, specs), run_tasks, counts)
        metrics, samples, cut = run_within(session, specs, params.eval, session.remaining_s(), run=run)
        if cut:
            result["cut"] = cut
        fidelity_rows: list[dict] = []
        if base is not None:
            spec = [dataclasses.asdict(params.eval.fidelity), sample_cache.files_hash([paths.fidelity_base(model)])]
            result["fidelity"], fidelity_rows = cache.measured("fidelity", spec, lambda: measure_fidelity(
                session, base, backend.name, lambda: baseline_variant(params, model), any_dtype=True), result)
    scores, hib = flat(metrics)
    result.update(status="ok", metrics=scores, higher_is_better=hib, versions=provenance.versions())
    return result, samples, fidelity_rows


@runner.stage_main("noise", ("model",))
def main(st: runner.Stage) -> None:
    model, params = st.args[0], without_wall_budget(st.params)    # the floor runs to every cap (issue 43)
    out = paths.noise_dir(model)
    t0 = time.perf_counter()
    samples: dict[str, list[SampleRow]] = {}
    fidelity_rows: list[dict] = []
    if not params.eval.noise_floor:
        result = {"model": model, "status": "off", "reason": "eval.noise_floor is false"}
    else:
        try:
            result, samples, fidelity_rows = measure(params, model)
        except (io.DataError, schema.ConfigError) as e:
            print(f"qtier: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        except Unsupported as e:
            result = {"model": model, "status": "unsupported", "reason": str(e)}
        except Exception as e:  # noqa: BLE001 - the decision goes on, on one arithmetic, and says so
            traceback.print_exc()
            result = {"model": model, "status": "failed", "reason": errors.one_line(e)}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    with io.AtomicDir(out) as tmp:
        for name, rows in samples.items():
            sample_row.write(tmp / paths.SAMPLES / f"{name}.jsonl", rows)
        if fidelity_rows:
            io.atomic_write_jsonl(tmp / paths.FIDELITY_ROWS, fidelity_rows)
        io.atomic_write_json(tmp / paths.RESULT_FILE, contract.stamp(result, "noise"))
    st.done("ok" if result["status"] in ("ok", "off") else result["status"],
            result.get("reason") or result.get("arithmetic"))


if __name__ == "__main__":
    main()
