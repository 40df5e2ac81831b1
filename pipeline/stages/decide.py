"""Stage decide: every variant's results -> results/decision.md, decision.json, metrics.json,
regressions/, plots/.

    python -m pipeline.stages.decide

Exits 1 (after writing everything) when any variant failed, so `dvc repro` reports it.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import sys

from pipeline import io, paths, schema
from pipeline.domain.hardware import gpus
from pipeline.domain.result import contract
from pipeline.domain.sets import task_rows
from pipeline.quant import repair
from pipeline.report import across_page, across_plot, exports, markdown, plots, regressions, speed
from pipeline.report.document import AcrossReport, Header, KvPair, ModelReport, PlotSpec
from pipeline.scoring.estimators import analysis, noise, sanity
from pipeline.scoring.verdict import comparison, judge, long_kv, retrieval_length
from pipeline.scoring.planning import planner
from pipeline.scoring.verdict.comparison import Comparison
from pipeline.scoring.verdict.rows import Measured, Row
from pipeline.stages import decide_across, runner
from pipeline.stages.decide_picks import gpu_recommendations, kv_barred, overall_recommendation
from pipeline.stages.decide_inputs import Samples, baseline_of, build_row, fidelity_summary, read_all_samples

MODEL_DTYPE_CACHE = "auto"     # kv_modes.<mode>.cache_dtype of a cache kept in the model's dtype (vLLM's name)


def compare(params: schema.Params, rows: list[Measured], samples: Samples) -> Comparison:
    """Every ok row against its baseline, from the per-sample logs evaluate wrote."""
    return comparison.compare(rows, samples, params.decision, params.report, lambda mid: params.gate(mid).tolerance)


def plan_rows(params: schema.Params, rows: list[Row]) -> planner.Planned:
    mem, v = params.memory, params.serving.vllm
    plans = {(r.facts.model, r.variant): {n: planner.plan(n, g, mem, r.facts.weight_bytes, r.facts.kv_bytes_per_token,
                                                          v.tensor_parallel_size, v.pipeline_parallel_size)
                                          for n, g in mem.target_gpus.items()}
             for r in rows if r.facts.weight_bytes and r.facts.kv_bytes_per_token}
    return planner.Planned(mem, plans)


def regression_links(model: str, found: Comparison) -> dict[str, str]:
    """variant -> its regressions page under results/, for each compared variant."""
    return {variant: paths.regressions_page(model, variant) for variant in found.regressions.get(model, {})}


def plot_spec(params: schema.Params, model: str, mine: list[Row]) -> PlotSpec:
    """results/plots/<model>-quality_vs_memory.png, tolerance lines at the baseline's allowed drop."""
    base = baseline_of(params, [r.facts for r in mine], model)
    # a panel per gated metric the model can do: not capable is the baseline's, so one row says it for all
    gated = [mid for mid in dict.fromkeys(m for r in mine for m in r.facts.metrics)
             if params.gate(mid).tolerance is not None
             and not any(judge.not_capable(v) for r in mine if (v := r.judgement.verdicts.get(mid)))]
    limits = {mid: judge.allowed_drop(params.gate(mid).tolerance, base.metrics.get(mid, 0.0))
              for mid in gated if base is not None}
    side = (1 - params.decision.confidence) / 2
    return PlotSpec(paths.plot_file(model),
                    f"{model}: quality delta vs weight memory; each interval the one its verdict was read on "
                    f"(a look's repeated interval: {side:.1%} a side over all looks)", gated, limits,
                    [k for k, mode in params.kv_modes.items() if mode.cache_dtype == MODEL_DTYPE_CACHE])


def model_report(params: schema.Params, rows: list[Row], model: str, found: Comparison,
                 planned: planner.Planned, samples: Samples, floor: noise.NoiseFloor | None = None) -> ModelReport:
    """One model's section of the report. Pure: write() writes it."""
    mine = [r for r in rows if r.facts.model == model]
    base = baseline_of(params, [r.facts for r in mine], model)
    # evaluate records long_context on every variant when eval.long_context is set (its status says why not)
    configured = any(r.facts.long_context is not None for r in mine)
    by_length = None if not configured else long_kv.judge(
        [r.facts for r in mine], params.decision.baseline.kv, params.decision.baseline.tier,
        params.decision.kv_kl_tolerance, params.decision.confidence)
    barred = kv_barred(params, rows, model, by_length)
    rec = overall_recommendation(params, rows, model, barred)
    return ModelReport(
        name=model, source=params.models[model].source, rows=mine, recommendation=rec,
        num_samples=base.num_samples if base else next((r.facts.num_samples for r in mine if r.facts.num_samples), {}),
        flips=found.flips.get(model, {}), ties=found.ties.get(model, {}), regressions=found.regressions.get(model, {}),
        reads=found.reads.get(model, {}),
        regression_links=regression_links(model, found),
        kv_length=[k for k in found.kv_length if k.model == model], plans=planned.for_model(model),
        gpu_recs=gpu_recommendations(params, rows, model, planned, barred), plot=plot_spec(params, model, mine),
        kv_pairs=kv_scale_pairs(params.kv_modes), min_speed_vs_baseline=params.report.min_speed_vs_baseline,
        sanity=sanity.findings(samples[base.key]) if base else [], noise=floor,
        noise_flips=noise_flips(mine, base, samples, floor) if floor is not None and base else {},
        long_kv=by_length or [], long_tolerance=params.decision.kv_kl_tolerance if configured else None,
        retrieval=retrieval_length.table(mine, retrieval_length.lengths(samples[base.key]) if base else []),
        repaired=repair.uniform_of(params.tiers), kv_barred=barred)


def noise_floor(params: schema.Params, measured: list[Measured], model: str, samples: Samples) -> noise.NoiseFloor:
    """The baseline in the engine's second arithmetic (stage noise) against the baseline as run."""
    result_file = paths.noise_dir(model) / paths.RESULT_FILE
    if not result_file.is_file():
        return noise.NoiseFloor("missing", f"no noise result: {result_file} is missing")
    base = baseline_of(params, measured, model)
    if base is None:
        return noise.NoiseFloor("missing", "the baseline did not run")
    res = contract.load(result_file)
    found = noise.floor(res, base.metrics, samples[base.key], task_rows.read_samples(paths.noise_dir(model)),
                        params.decision.confidence)
    kl = fidelity_summary(res.fidelity, paths.noise_dir(model), params)
    return dataclasses.replace(found, fidelity=kl) if found.status == "ok" else found


def noise_flips(mine: list[Row], base: Measured, samples: Samples, floor: noise.NoiseFloor
                ) -> dict[str, dict[str, tuple[int, int]]]:
    """variant -> choice task -> (its flips against the baseline, those inside the noise floor's margin),
    over the pairs its verdict was read on (comparison.read_samples), as the flips beside the verdict."""
    if not floor.margin:
        return {}
    theirs = samples[base.key]
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for r in mine:
        if r.facts.status != "ok" or r.facts is base:
            continue
        own = comparison.read_samples(r.facts, samples[r.key])
        for task, limit in floor.margin.items():
            if task in own and task in theirs:
                out.setdefault(r.variant, {})[task] = noise.inside(
                    analysis.align(theirs[task], own[task], subset=task in r.facts.looks), limit)
    return out


def kv_scale_pairs(modes: dict[str, schema.KvMode]) -> list[KvPair]:
    """Uncalibrated and calibrated KV modes of one cache dtype, for the side-by-side table. Pure."""
    return [KvPair(u, float(um.scale), c) for c, cm in modes.items() if cm.calibrated
            for u, um in modes.items() if not um.calibrated and um.cache_dtype == cm.cache_dtype]


def kv_scales(modes: dict[str, schema.KvMode]) -> dict[str, str]:
    """Each KV mode with a quantized cache -> its k/v scale, as the report names it."""
    return {name: "calibrated" if mode.calibrated else str(float(mode.scale))
            for name, mode in modes.items() if mode.cache_dtype != MODEL_DTYPE_CACHE}


def header(params: schema.Params, rows: list[Row], planned: planner.Planned) -> Header:
    return Header(
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), kv_scales=kv_scales(params.kv_modes),
        baseline=params.decision.baseline, confidence=params.decision.confidence,
        fidelity_bootstrap=params.report.fidelity_bootstrap,
        budget=planned.budget, gpus=planned.gpus, hardware_docs=gpus.table().vllm_docs_version,
        versions=next((r.facts.versions for r in rows if r.facts.versions), {}), commit=commit(), lock=lock_digest())


def commit() -> str:
    """The git commit this run's code came from, "+ changes" when tracked files differ from it."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "pipeline", "params.yaml",
                                "eval_sets", "recipes"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def lock_digest() -> str:
    """sha256 (12 hex digits) of what dvc.lock says the run was made from: each stage's command, params
    and the deps no stage writes (code, params, data). Outputs are left out: they hold timings, so the
    digest is the same for two runs of one commit and data, and decision.md with it. decide's own entry
    is left out too: under `dvc repro` it is written after decide runs (absent on a first run, the last
    run's otherwise), so it would make the digest depend on what ran before, not on the sources."""
    import hashlib
    import json

    import yaml

    lock = paths.DVC_LOCK
    if not lock.is_file():
        return "no dvc.lock"
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages") or {}
    stages.pop("decide", None)
    written = {o["path"] for st in stages.values() for o in st.get("outs") or []}
    sources = {name: {"cmd": st.get("cmd"), "params": st.get("params"),
                      "deps": [d for d in st.get("deps") or [] if d["path"] not in written]}
               for name, st in stages.items()}
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:12]


def write(models: dict[str, ModelReport], head: Header, across: AcrossReport | None = None) -> None:
    """decision.md, speed.md, decision.json, the DVC metrics file, and each model's regressions pages and plot;
    with a reference across models, its section, decision.json's "across" and its plot."""
    for m in models.values():
        for variant, link in m.regression_links.items():
            io.atomic_write_text(paths.RESULTS / link,
                                 regressions.regressions_md(m.name, variant, head.baseline, m.regressions[variant],
                                                            m.reads.get(variant, {})))
        if m.plot is not None:
            plots.quality_vs_memory(m.rows, m.plot.metrics, paths.RESULTS / m.plot.path, m.plot.title, m.plot.limits,
                                    m.plot.model_dtype_kv)
        if m.long_tolerance is not None:
            plots.kl_by_position(m.rows, paths.RESULTS / paths.position_plot(m.name),
                                 f"{m.name}: next-token KL to the baseline by position", head.baseline.kv)
        if m.retrieval:
            plots.retrieval_by_length(m.retrieval, paths.RESULTS / paths.retrieval_plot(m.name),
                                      f"{m.name}: retrieval accuracy by prompt length", head.baseline.kv)
    if across is not None and across.plot is not None:
        across_plot.quality_vs_memory(across, head.gpus, paths.RESULTS / across.plot)
    io.atomic_write_text(paths.DECISION_MD, markdown.render(models, head, across_page.lines(across) if across else []))
    io.atomic_write_text(paths.RESULTS / speed.FILE, speed.render(models, head))
    data = exports.decision_json(models, head)
    if across is not None:
        data["across"] = across_page.as_json(across)
    io.atomic_write_json(paths.DECISION_JSON, data)
    io.atomic_write_json(paths.DVC_METRICS, {n: exports.dvc_metrics(m.rows) for n, m in models.items()})


def summary(models: dict[str, ModelReport]) -> list[str]:
    """The console summary: each model's recommendation, verdict counts and per-GPU picks."""
    lines = ["", f"qtier: decision written to {paths.DECISION_MD} (details: {paths.DECISION_JSON})"]
    for name, m in models.items():
        rec = m.recommendation
        counts = {k: sum(1 for r in m.rows if r.judgement.overall == k)
                  for k in ("pass", "fail", "inconclusive", "not run", "not measured", "unsupported", "failed")}
        lines.append(f"  {name}: recommended " + (f"{rec.row.facts.tier} + KV {rec.row.facts.kv}" if rec.row
                                                  else f"none ({rec.why})"))
        lines.append("    variants: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
        for gpu, g in m.gpu_recs.items():
            lines.append(f"    {gpu}: " + (f"{g.row.facts.tier} + KV {g.row.facts.kv}" if g.row
                                           else "nothing passes and fits"))
    return lines


def exit_if_failed(rows: list[Row]) -> None:
    failed = [r.facts for r in rows if r.facts.status == "failed"]
    if failed:
        print(f"qtier: {len(failed)} variant(s) failed: "
              + ", ".join(f"{r.model}/{r.variant} ({r.reason})" for r in failed), file=sys.stderr)
        raise SystemExit(1)


@runner.stage_main("decide")
def main(st: runner.Stage) -> None:
    params = st.params
    measured = [build_row(params, *v) for v in params.variants()]
    samples = read_all_samples(measured)
    found = compare(params, measured, samples)
    floors = {m: noise_floor(params, measured, m, samples) for m in params.models}
    rows = judge.judge(measured, found.evidence, params.decision, params.eval.tasks)
    planned = plan_rows(params, rows)
    models = {name: model_report(params, rows, name, found, planned, samples, floors[name])
              for name in params.models}
    write(models, header(params, rows, planned), decide_across.build(params, measured, samples, planned, models))
    st.done("ok", None, [line for line in summary(models) if line.strip()])
    exit_if_failed(rows)


if __name__ == "__main__":
    main()
