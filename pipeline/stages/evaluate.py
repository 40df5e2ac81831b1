"""Stage evaluate@<model>-<tier>-<kv>: serve one variant with the configured backend, run the
lm-eval tasks with per-sample logging, and measure generation throughput.

    python -m pipeline.stages.evaluate <model> <tier> <kv>

Writes results/evals/<model>/<tier>-<kv>/{result.json, samples/<task>.jsonl}. result.json names
every metric `<task>/<metric>` (`metrics`, `higher_is_better`, the latter from each task's YAML or
lm-eval task) and where it was measured (`measured_on`: CPU, accelerator, torch threads, the serving
engine and its version; pipeline/domain/provenance.py) and whether its prompts were wrapped in the
model's chat template (`chat_template`, prepare's record of models.<model>.apply_chat_template). A
variant that cannot run here is recorded as status "unsupported" (with the reason), one that breaks
as "failed"; neither stops the pipeline.
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pipeline import errors, io, paths, schema
from pipeline.backends import Unsupported, Variant
from pipeline.backends.base import baseline_variant
from pipeline.backends.fidelity_compare import measure_fidelity
from pipeline.backends.lm_eval_runner import flat, run_within, without_refused
from pipeline.domain import fidelity_set, provenance, tasks
from pipeline.domain.prompts import throughput_prompts
from pipeline.scoring.planner import roofline
from pipeline.stages import runner
from pipeline.backends.selection import select


def evaluate(params: schema.Params, model: str, tier: str, kv: str, out_dir: Path) -> dict[str, Any]:
    calibrated = params.kv_modes[kv].calibrated
    checkpoint = paths.serving_checkpoint(model, tier, kv, calibrated)
    record = io.read_json(paths.serving_record(model, tier, kv, calibrated))
    result: dict[str, Any] = {"model": model, "tier": tier, "kv": kv}
    if record.get("status") != "ok":
        stage = "kvscales" if calibrated else "quantize"
        status = "unsupported" if record.get("status") == "unsupported" else "failed"
        result.update(status=status, reason=f"{stage}: {record.get('reason', 'no checkpoint')}")
        return result
    specs = tasks.build_all(params.eval.tasks)
    # read before any model work: a missing file stops the stage, not an hour of evaluation
    base = fidelity_set.load(paths.fidelity_base(model)) if params.eval.fidelity is not None else None
    variant = Variant.of(params, model, tier, kv, checkpoint, record, out_dir)
    backend = select(params, tier=params.tiers[tier])
    result["backend"] = backend.name
    result["chat_template"] = variant.chat      # the prompts' format, as prepare resolved it for the model
    fidelity_rows: list[dict] = []
    try:
        with backend.session(variant) as session:
            result["serving"] = session.info
            result["compute_dtype"] = session.info.get("compute_dtype")   # decide compares only equal ones
            result["measured_on"] = provenance.of_session(backend.name, session.engine_version, session.info)
            specs = without_refused(specs, getattr(session, "loglik_refusal", None), result)
            metrics, samples, cut = run_within(session, specs, params.eval, session.remaining_s())
            if cut:
                result["cut"] = cut
            # quality before load: under a wall budget the load test is what gets cut
            if base is not None:
                try:
                    result["fidelity"], fidelity_rows = measure_fidelity(
                        session, base, backend.name, lambda: baseline_variant(params, model),
                        any_engine=backend.name == "endpoint")
                except Exception as e:  # noqa: BLE001 - the task metrics already measured are kept
                    traceback.print_exc()
                    result["fidelity"] = {"status": "failed", "why": errors.one_line(e)}
            tp = params.eval.throughput
            result["throughput"] = session.throughput(throughput_prompts(specs, tp.batch_size), tp.new_tokens,
                                                      tp.repeats)
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
                  num_samples={s.name: s.num_docs for s in specs if s.name in metrics}, versions=provenance.versions())
    return result


@runner.stage_main("evaluate", ("model", "tier", "kv"))
def main(st: runner.Stage) -> None:
    (model, tier, kv), params = st.args, st.params
    out_dir = paths.eval_dir(model, tier, kv)
    t0 = time.perf_counter()
    try:
        result = evaluate(params, model, tier, kv, out_dir)
    except (io.DataError, schema.ConfigError) as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:  # noqa: BLE001 - one broken variant must not lose the others
        traceback.print_exc()
        result = {"model": model, "tier": tier, "kv": kv, "status": "failed",
                  "reason": errors.one_line(e)}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    io.atomic_write_json(out_dir / paths.RESULT_FILE, result)
    st.done(result["status"], result.get("reason") or result.get("cut"))


if __name__ == "__main__":
    main()
