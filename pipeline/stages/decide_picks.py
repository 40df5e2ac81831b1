"""Stage decide's picks: which variants a pick may take (kv_barred), page 1's pick and each target GPU's,
each with its `vllm serve` line. Page 1's pick and the per-GPU picks hold the same quantized KV
modes (decision.kv_kl_tolerance), so the two recommendations cannot disagree on a KV mode silently: a
per-GPU pick differs only where the GPU cannot serve a variant (its kernels or memory), and where the
bar changed page 1's pick its reason says so. Each recommendation is read from the two-axis pick per
(model, GPU filter) (pick/axes.py: a fixed sequence per axis and one over the combinations), kept on it for
every line that names a stopper.
Tests: `.venv/bin/python -m pytest -n 0 -q tests/test_report_knobs.py tests/test_decide.py`.
"""
from __future__ import annotations

import dataclasses

from pipeline import schema
from pipeline.domain.model import sources
from pipeline.report import commands
from pipeline.scoring.verdict import long_kv
from pipeline.scoring.pick import recommend
from pipeline.scoring.planning import planner
from pipeline.scoring.pick.recommend import Recommendation
from pipeline.scoring.pick.axes import Axes, axes
from pipeline.scoring.verdict.rows import Row


def kv_barred(params: schema.Params, rows: list[Row], model: str,
              by_length: list[long_kv.LongKv] | None) -> set[tuple[str, str]]:
    """(tier, kv) of the model's variants no pick may take, page 1's or a target GPU's: with
    eval.long_context (`by_length`), every quantized KV mode not shown non-inferior (within
    decision.kv_kl_tolerance) up to memory.max_model_len, the length the serve lines are made for
    (scoring/verdict/long_kv.py barred); without it, none. The one place that decides which KV modes are allowed."""
    if by_length is None:
        return set()
    return long_kv.barred([r.facts for r in rows if r.facts.model == model], by_length, params.decision.baseline.kv,
                          params.memory.max_model_len)


def two_axes(params: schema.Params, rows: list[Row], model: str, allowed: set[tuple[str, str]] | None = None,
             held: set[tuple[str, str]] | None = None) -> Axes:
    b = params.decision.baseline
    return axes(rows, model, b.tier, b.kv, allowed, held or set())


def explain(params: schema.Params, a: Axes, fits: bool = False) -> Recommendation:
    """The recommendation from `a` at one verdict's one-sided alpha per chain (decision.confidence)."""
    return recommend.explain_axes(a, (1 - params.decision.confidence) / 2, fits)


def overall_recommendation(params: schema.Params, rows: list[Row], model: str,
                           barred: set[tuple[str, str]]) -> Recommendation:
    """Page 1's pick: the two-axis pick over the model's variants (pick/axes.py), `barred` (kv_barred, as
    each target GPU's) held as not passing where they stand in each chain; where that changed the pick,
    its reason says so (the same chains with nothing held)."""
    rec = explain(params, two_axes(params, rows, model, held=barred))
    unbarred = two_axes(params, rows, model).chosen
    if barred and unbarred is not None and unbarred is not rec.row:
        names = ", ".join(f"`{t}-{k}`" for t, k in sorted(barred))
        rec = dataclasses.replace(rec, why=(
            f"{rec.why}; without decision.kv_kl_tolerance's bar the pick would be `{unbarred.variant}`: "
            f"{names} not shown non-inferior up to {params.memory.max_model_len:,} tokens by the long-context "
            f"KL (within {params.decision.kv_kl_tolerance:g} nats/token), so no pick takes them"))
    if rec.row is not None:
        rec = dataclasses.replace(rec, command=serve_command(params, model, rec.row))
    return rec


def gpu_recommendations(params: schema.Params, rows: list[Row], model: str, planned: planner.Planned,
                        barred: set[tuple[str, str]] | None = None) -> dict[str, Recommendation]:
    """Per target GPU: the two-axis pick over the variants that GPU can serve (what it cannot is known
    before any verdict, so it leaves the chains), `barred` held as not passing (kv_barred: the same KV modes page
    1's pick holds), and its command."""
    plans = planned.for_model(model)
    barred = barred or set()
    recs = {}
    for name, gpu in planned.gpus.items():
        rec = explain(params, two_axes(params, rows, model, recommend.gpu_candidates(rows, model, name, gpu, plans),
                                       barred), fits=True)
        if rec.row is not None:
            # an endpoint has no plan (recommend.gpu_candidates): its line names the server, sized by no GPU
            rec = dataclasses.replace(rec, command=serve_command(params, model, rec.row, planned.budget,
                                                                 plans.get(rec.row.variant, {}).get(name)))
        recs[name] = rec
    return recs


def serve_command(params: schema.Params, model: str, row: Row, budget: schema.Memory | None = None,
                  plan: planner.Plan | None = None) -> str:
    return commands.serve_command(row, sources.storage_dtype(params, model), params.kv_modes[row.facts.kv].cache_dtype,
                                  budget, plan)
