"""Stage decide's decision across models (decision.baseline.model; docs/across-models.md): every row of
every model judged against the reference (scoring/verdict/across.py), the pick per target GPU over the
candidates of all models it can serve (scoring/pick/across_pick.py) with its `vllm serve` line, and the
paired differences along each GPU's passing run. Reads the prompt formats from evaluate's results;
judges nothing itself."""
from __future__ import annotations

from pipeline import paths, schema
from pipeline.report.document import AcrossReport, ModelReport
from pipeline.scoring.pick import across_pick, recommend
from pipeline.scoring.planning import planner
from pipeline.scoring.verdict import across, judge
from pipeline.scoring.verdict.rows import Measured
from pipeline.stages.decide_inputs import Samples, prompt_format
from pipeline.stages.decide_picks import serve_command


def allowed(rows, model_reports: dict[str, ModelReport], name: str, gpu: schema.TargetGpu,
            planned: planner.Planned) -> set[tuple[str, str, str]]:
    """(model, tier, kv) a GPU can serve (recommend.gpu_candidates per model)."""
    return {(m, t, k) for m in model_reports
            for t, k in recommend.gpu_candidates(rows, m, name, gpu, planned.for_model(m))}


def held(model_reports: dict[str, ModelReport]) -> set[tuple[str, str, str]]:
    """Each model's barred KV modes (the same bar as its own picks), held as not passing."""
    return {(m, t, k) for m, rep in model_reports.items() for t, k in rep.kv_barred}


def build(params: schema.Params, measured: list[Measured], samples: Samples, planned: planner.Planned,
          model_reports: dict[str, ModelReport]) -> AcrossReport | None:
    """None when decision.baseline.model is not set (the per-model decisions alone, as before)."""
    rule = params.decision
    if rule.baseline.model is None:
        return None
    found = across.judge_all(measured, samples, rule, params.eval.tasks)
    picks, commands, diffs = {}, {}, {}
    for name, gpu in planned.gpus.items():
        p = across_pick.pick(found.rows, name, allowed(found.rows, model_reports, name, gpu, planned),
                             held(model_reports))
        picks[name] = p
        if p.pick is not None:
            m = p.pick.facts.model
            plan = planned.for_model(m).get(p.pick.variant, {}).get(name)
            commands[name] = serve_command(params, m, p.pick, planned.budget, plan)
        diffs[name] = across_pick.differences(p.run, samples, rule)
    ref = found.reference
    limits = {mid: judge.allowed_drop(tol, ref.metrics[mid]) for mid in (ref.metrics if ref else {})
              if (tol := params.tolerance(mid)) is not None}
    formats = {m: prompt_format(m, rule.baseline.tier, rule.baseline.kv) for m in params.models}
    return AcrossReport(found, picks, commands, diffs, formats, rule.confidence, limits,
                        paths.ACROSS_PLOT if ref is not None else None)
