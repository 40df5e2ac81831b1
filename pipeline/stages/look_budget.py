"""A model's per-variant time budget on vLLM, sized from what stage baseline (and stage noise) measured
on this machine, and the items each task reads at each look as evaluate reads them (`look_reads`: the
design's own sizes, a choice task in strata of the baseline's margins); pipeline/scoring/planning/time_budget.py
has the arithmetic and says why the room is split. Not a stage of its own: stage baseline
prints the prediction once it has measured; stage evaluate runs each variant with the fitted budget, and
stops with one line before serving it when serving.vllm.budget.max_total_s cannot fit one look per
variant (check cannot know: nothing is measured before the baseline).

    python -m pipeline.stages.baseline <model>     # its line, then "predicted: N variants x at most ..."
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline import paths, schema
from pipeline.domain.result import contract
from pipeline.domain.sets import task_rows
from pipeline.domain.result.contract import Result
from pipeline.evaluation import stratified
from pipeline.schema.params import with_wall_budget
from pipeline.scoring.planning import time_budget
from pipeline.domain.sets.sample_row import SampleRow

Rows = dict[str, list[SampleRow]]        # task -> the baseline's per-sample rows (its samples/)


@dataclass(frozen=True)
class Fitted:
    """What the fit read and gave: `need_s` None where the baseline measured no seconds for a gated
    task in this run (every sample read from the sample cache): the budgets are then the user's."""
    need_s: float | None
    variants: int
    max_wall_s: float | None
    gpu_max_wall_s: float | None
    why_unsized: str | None = None


def seconds_per_sample(res: Result | None) -> dict[str, float]:
    """task -> seconds per sample computed in that stage (result.json sample_cache.tasks); a task it read
    wholly from the cache has none."""
    if res is None or res.status != "ok":
        return {}
    tasks = res.sample_cache.tasks if res.sample_cache else {}
    return {t: v.seconds / v.computed for t, v in tasks.items() if v.computed}


def look_reads(params: schema.Params, caps: dict[str, int], rows: Rows) -> dict[str, list[int]]:
    """task -> the items evaluate reads by each of its looks at these caps: a registry task (lm_eval) and
    every task without eval.sequential in one look, a local task by stratified.sizes (in strata of the
    baseline's `rows` where eval.sequential.strata holds for it, else sequential.look_sizes)."""
    ev = params.eval
    whole = {t for t, task in ev.tasks.items() if task.kind == "lm_eval"}
    return {t: [n] if ev.sequential is None or t in whole else stratified.sizes(ev, n, rows.get(t))
            for t, n in caps.items()}


def first_look(params: schema.Params, base: Result, rows: Rows) -> dict[str, int]:
    """gated task -> samples at its first look, from the baseline's caps (its num_samples)."""
    gated = {mid.split("/")[0] for mid in base.metrics if params.tolerance(mid) is not None}
    caps = {t: n for t, n in base.num_samples.items() if t in gated and n}
    return {t: sizes[0] for t, sizes in look_reads(params, caps, rows).items()}


def variants_of(params: schema.Params, model: str) -> int:
    b = params.decision.baseline
    return sum(1 for m, t, k in params.variants() if m == model and (t, k) != (b.tier, b.kv))


def fit(params: schema.Params, model: str, base: Result, rows: Rows, noise: Result | None,
        count: bool = True) -> Fitted:
    """The model's per-variant budgets (CPU and GPU) from the baseline's and the noise floor's measured
    speed; `rows`: the baseline's samples (the strata of a stratified task). time_budget.CapTooSmall when
    the user's total cannot fit one look per variant. `count`: read the model's variants from params
    (every tier and KV mode) even without a total to share: stage baseline's prediction does; evaluate
    only when max_total_s is set, so that a variant's stage depends on its own tier and KV mode alone
    (dvc.yaml)."""
    budget = params.serving.vllm.budget
    n = variants_of(params, model) if count or budget.max_total_s is not None else 1
    base_s, noise_s = seconds_per_sample(base), seconds_per_sample(noise)
    per = {t: s + noise_s.get(t, 0.0) for t, s in base_s.items()}
    first = first_look(params, base, rows) if base.status == "ok" else {}
    try:
        if not first:
            raise KeyError("the baseline measured no gated task")
        need = time_budget.first_look_s(per, first, base.phases.get("load", 0.0), budget.first_look_margin)
    except KeyError as e:
        # nothing to size from: the user's budgets, within the total's share where one is set
        cap = None if budget.max_total_s is None else budget.max_total_s / max(n, 1)
        low = [v if cap is None else cap if v is None else min(v, cap)
               for v in (budget.max_wall_s, budget.gpu_max_wall_s)]
        return Fitted(None, n, *low, why_unsized=e.args[0])
    return Fitted(need, n, time_budget.per_variant_s(need, budget.max_wall_s, budget.max_total_s, n),
                  time_budget.per_variant_s(need, budget.gpu_max_wall_s, budget.max_total_s, n))


def load(model: str) -> tuple[Result, Rows, Result | None]:
    """The baseline's result and samples, and the noise floor's result (None where it has not run)."""
    noise = paths.noise_dir(model) / paths.RESULT_FILE
    return (contract.load(paths.baseline_dir(model) / paths.RESULT_FILE),
            task_rows.read_samples(paths.baseline_dir(model)), contract.load(noise) if noise.is_file() else None)


def fitted_params(params: schema.Params, model: str) -> schema.Params:
    """`params` with the variant's fitted budgets (stage evaluate, before the variant is served); a cap
    that cannot fit one look per variant is a ConfigError: one line, exit 2 (stages/evaluation.run_stage)."""
    try:
        found = fit(params, model, *load(model), count=False)
    except time_budget.CapTooSmall as e:
        raise schema.ConfigError(str(e)) from None
    return with_wall_budget(params, found.max_wall_s, found.gpu_max_wall_s)


def prediction(params: schema.Params, model: str, base: Result, rows: Rows, device: str) -> str:
    """Stage baseline's line: the variants' predicted wall time on this device, or why evaluate will stop.
    Stage noise is not this stage's input (it may not have run yet): with eval.noise_floor on, the check
    of what settles at look 1 is counted at the baseline's own seconds per sample (it reads the same
    items again), and the line says so; evaluate sizes it from stage noise's measured speed."""
    check = params.eval.noise_floor
    try:
        found = fit(params, model, base, rows, base if check else None)
    except time_budget.CapTooSmall as e:
        return f"evaluate will stop before the first variant: {e}"
    per = found.gpu_max_wall_s if device == "gpu" else found.max_wall_s
    if found.need_s is None:
        return (f"not sized ({found.why_unsized}; a sample read from the cache is not timed): each of {found.variants} variants within "
                + ("no time budget" if per is None else f"{per:,.0f} s"))
    return time_budget.predicted_line(found.need_s, per, found.variants) + (
        "; the check in the second arithmetic counted at the baseline's speed (evaluate sizes it from stage noise's)"
        if check else "")
