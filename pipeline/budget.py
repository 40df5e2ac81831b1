"""How long each evaluation takes on the selected backend at the caps, from a short probe of the
baseline, and which budget or cap to change before the variants run.

    python -m pipeline.budget [model] [--samples 4]

Needs the baseline's checkpoint and the model's probe sets: `dvc repro quantize@<model>-<baseline tier>
probes@<model>` (prepare, the baseline tier and the sets; about two minutes for the default model on 2
cores). Serves the baseline through the backend the run will use (`serving.backend`), times `--samples`
documents of every task through lm-eval as evaluate runs them, and prints the seconds per sample, then
per stage the predicted seconds at the caps and, on vLLM, where `serving.vllm.budget.max_wall_s` (on a
GPU `gpu_max_wall_s`) would end a variant's looks (pipeline/scoring/planning/time_budget.py). Each task's
reads at each look are evaluate's (stages/look_budget.py look_reads): a choice task is read in strata of
the baseline's margins once stage baseline has run (before, its looks are planned unstratified, which
the line says). The baseline and the noise floor run without the budget. Every variant is taken as fast
as the baseline (a quantized tier on a CPU is often slower: docs/performance.md), the report-only tasks
as read with the looks, and the fidelity, long-context and load-test probes are not timed: a prediction
to size a budget, not a bound.
"""
from __future__ import annotations

import argparse
import sys
import time

from pipeline import config, paths, schema
from pipeline.domain.hardware import machine
from pipeline.domain.sets import looks, task_rows, tasks
from pipeline.engines import Unsupported
from pipeline.engines.base import baseline_variant
from pipeline.engines.selection import select
from pipeline.evaluation.lm_eval_runner import run_tasks
from pipeline.scoring.planning import time_budget
from pipeline.stages.look_budget import Rows, look_reads

BUDGET_KEY = {"cpu": "serving.vllm.budget.max_wall_s", "gpu": "serving.vllm.budget.gpu_max_wall_s"}


def measure(session, specs: list[tasks.TaskSpec], ev: schema.Eval, samples: int, run=run_tasks) -> dict[str, float]:
    """task -> seconds per sample over its first `samples` documents in look order, one task at a time."""
    per = {}
    for spec in specs:
        part = looks.chunk(spec, 0, min(samples, spec.num_docs))
        t0 = time.perf_counter()
        run(session, [part], ev)
        per[spec.name] = (time.perf_counter() - t0) / max(part.num_docs, 1)
    return per


def report(params: schema.Params, model: str, backend: str, device: str, load_s: float, per: dict[str, float],
           caps: dict[str, int], rows: Rows) -> list[str]:
    """The probe's lines; `rows`: the baseline's samples where stage baseline has run (the strata of a
    stratified task's looks), else empty."""
    free = time_budget.predict(per, {t: [n] for t, n in caps.items()}, load_s, None)
    lines = [f"{model} on {backend} ({device}): load {load_s:.0f} s; seconds per sample: "
             + ", ".join(f"{t} {s:.2f}" for t, s in per.items()),
             f"  baseline@{model}, noise@{model} (no per-variant budget): about {free.total_s:,.0f} s of tasks each"]
    wall = params.serving.vllm.for_device(device).budget.max_wall_s if backend == "vllm" else None
    found = time_budget.predict(per, look_reads(params, caps, rows), load_s, wall)
    seq = params.eval.sequential
    unknown = "" if rows or seq is None or seq.strata is None else (
        " (looks planned unstratified: the strata come from stage baseline's samples, not run yet)")
    lines.append(f"  evaluate@{model}-<tier>-<kv>, each at the baseline's speed: "
                 + time_budget.advice(found, BUDGET_KEY[device]) + unknown)
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="a key of models (default: the first)")
    ap.add_argument("--samples", type=int, default=4, help="documents timed per task")
    a = ap.parse_args(argv)
    params = config.load_or_exit()
    model = a.model or next(iter(params.models))
    base = params.decision.baseline
    missing = [p for p in (paths.quantize_record(model, base.tier), paths.probes_dir(model)) if not p.exists()]
    if model not in params.models or missing:
        raise SystemExit(f"qtier: {model}: " + (f"not a key of models ({', '.join(params.models)})"
                         if model not in params.models else
                         f"{missing[0]} is missing: run `dvc repro quantize@{model}-{base.tier} probes@{model}` first"))
    specs = looks.in_look_order(tasks.build_all(params.eval.tasks, model), params.eval.seed,
                                looks.data_keys(params.eval.tasks))
    backend = select(params, tier=params.tiers[base.tier])
    device = "gpu" if machine.accelerator_available() else "cpu"
    t0 = time.perf_counter()
    try:
        with backend.session(baseline_variant(params, model)) as session:
            load_s = time.perf_counter() - t0
            per = measure(session, specs, params.eval, a.samples)
    except Unsupported as e:
        raise SystemExit(f"qtier: {model}: the baseline cannot be served here: {e}") from None
    print("\n".join(report(params, model, backend.name, device, load_s, per, {s.name: s.num_docs for s in specs},
                            task_rows.read_samples(paths.baseline_dir(model)))))


if __name__ == "__main__":
    sys.exit(main())
