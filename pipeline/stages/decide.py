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
from pipeline.backends import launch
from pipeline.domain import hardware, machine, memory, tasks
from pipeline.report import plots
from pipeline.report import render as report
from pipeline.scoring import analysis, decision, planner
from pipeline.scoring.decision import Row

MAX_NUM_SEQS_CAP = 256   # vLLM's default --max-num-seqs; the planner never suggests more


def hardware_desc() -> str:
    return machine.describe(machine.cpu_info(), machine.accelerator_available())


def tier_kind(params: schema.Params, model: str, tier: str) -> str:
    t = params.tiers[tier]
    return t.hardware or ("bf16" if params.models[model].dtype == "bfloat16" else "fp16")


def load_samples(model: str, tier: str, kv: str) -> dict[str, list[dict]]:
    return tasks.read_samples(paths.eval_dir(model, tier, kv))


def build_row(params: schema.Params, model: str, tier: str, kv: str) -> Row:
    result_file = paths.eval_dir(model, tier, kv) / "result.json"
    scheme = params.tiers[tier].label or params.tiers[tier].method
    if not result_file.is_file():
        row = Row(model, tier, kv, status="failed", reason=f"no result: {result_file} is missing")
        row.extra.update(scheme=scheme, hardware=tier_kind(params, model, tier))
        return row
    res = io.read_json(result_file)
    record_file = paths.quantize_record(model, tier)
    record = io.read_json(record_file) if record_file.is_file() else {}
    row = Row(model, tier, kv, status=res["status"], backend=res.get("backend"), reason=res.get("reason"))
    row.extra.update(scheme=scheme, serving=res.get("serving", {}), num_samples=res.get("num_samples", {}),
                     task_metrics=res.get("metrics", {}), hardware=tier_kind(params, model, tier),
                     versions=res.get("versions", {}))
    for task_metrics in res.get("metrics", {}).values():
        row.metrics.update(task_metrics)
    row.tokens_per_s = res.get("throughput", {}).get("gen_tokens_per_s")
    row.extra["throughput"] = res.get("throughput", {})
    row.extra["serve_path"] = record.get("serve_path")
    row.extra["load_quantization"] = record.get("load_quantization")
    row.weight_bytes = record.get("weight_bytes") or res.get("serving", {}).get("weight_bytes_serving")
    hf = record.get("geometry")
    if hf:
        nbytes = memory.kv_dtype_bytes(params.kv_modes[kv].cache_dtype, params.models[model].dtype)
        row.kv_bytes_per_token = memory.kv_bytes_per_token(hf, nbytes)
        row.extra["kv_formula"] = engine_kv_check(hf, params.kv_modes[kv].cache_dtype, row.extra["serving"])
    return row


def engine_kv_check(hf: dict, cache_dtype: str, serving: dict) -> str | None:
    """The planner's formula applied to the KV memory vLLM reported, beside the tokens it logged."""
    gib, tokens = serving.get("kv_cache_gib"), serving.get("kv_cache_tokens")
    if not gib or not tokens:
        return None
    served = str(serving.get("engine", {}).get("dtype", "float16")).replace("torch.", "")
    per_token = memory.kv_bytes_per_token(hf, memory.kv_dtype_bytes(cache_dtype, served))
    formula = planner.kv_capacity_tokens(gib * planner.GIB, per_token, 16)
    return f"{formula:,} tokens ({(formula - tokens) / tokens:+.2%}) from {gib} GiB x {per_token:,} B/token"


def compare(params: schema.Params, rows: list[Row]) -> dict:
    """Intervals, flips, regressions and KV length sensitivity for every ok row vs its baseline."""
    rule = params.decision
    bases = decision.baselines(rows, rule)
    samples = {(r.model, r.tier, r.kv): load_samples(r.model, r.tier, r.kv) for r in rows if r.status == "ok"}
    by_key = {(r.model, r.tier, r.kv, r.backend): r for r in rows}
    extra: dict = {"flips": {}, "regressions": {}, "kv_length": []}
    for r in rows:
        base = bases.get((r.model, r.backend))
        if r.status != "ok" or base is None or base is r:
            continue
        mine, theirs = samples[(r.model, r.tier, r.kv)], samples[(base.model, base.tier, base.kv)]
        regress: dict[str, list] = {}
        for task, task_rows in mine.items():
            if task not in theirs:
                continue
            pairs = analysis.align(theirs[task], task_rows)
            r.intervals.update(analysis.intervals(list(r.extra["task_metrics"].get(task, {})), pairs, rule.bootstrap))
            if "logliks" in task_rows[0]:
                extra["flips"].setdefault(r.model, {}).setdefault(r.variant, {})[task] = analysis.flips(pairs)
            regress[task] = analysis.largest_regressions(pairs, rule.regressions_per_task)
        extra["regressions"].setdefault(r.model, {})[r.variant] = regress
        ref = by_key.get((r.model, r.tier, rule.baseline.kv, r.backend))
        if r.kv != rule.baseline.kv and ref is not None and ref.status == "ok":
            ref_samples = samples[(ref.model, ref.tier, ref.kv)]
            for task, task_rows in mine.items():
                if task in ref_samples:
                    buckets = analysis.by_length(analysis.align(ref_samples[task], task_rows), rule.length_buckets)
                    extra["kv_length"].append((r.model, r.variant, ref.variant, task, buckets))
    return extra


def plan_rows(params: schema.Params, rows: list[Row]) -> dict:
    mem = params.memory
    # memory.* in params carries the planner's budget under the same names
    budget = planner.Budget(**{f.name: getattr(mem, f.name) for f in dataclasses.fields(planner.Budget)})
    gpus = {n: planner.Gpu(n, g.memory_gib, g.bandwidth_gbps, g.compute_capability) for n, g in mem.target_gpus.items()}
    plans: dict = {}
    for r in rows:
        if r.weight_bytes and r.kv_bytes_per_token:
            plans[(r.model, r.variant)] = {n: planner.plan(g, budget, r.weight_bytes, r.kv_bytes_per_token)
                                           for n, g in gpus.items()}
    return {"budget": budget, "gpus": gpus, "plans": plans}


def gpu_recommendations(params: schema.Params, rows: list[Row], model: str, planned: dict) -> dict:
    recs = {}
    for name, gpu in planned["gpus"].items():
        allowed = {(r.tier, r.kv) for r in rows if r.model == model
                   and hardware.supports(r.extra.get("hardware", "fp16"), gpu.compute_capability)
                   and planned["plans"].get((model, r.variant), {}).get(name) is not None
                   and planned["plans"][(model, r.variant)][name].fits}
        best, why = decision.recommend(rows, model, allowed)
        command = None
        if best is not None:
            p = planned["plans"][(model, best.variant)][name]
            command = serve_command(params, model, best, planned["budget"], p)
        recs[name] = (best, why, command)
    return recs


def serve_command(params: schema.Params, model: str, row: Row, budget: planner.Budget | None = None,
                  plan: planner.Plan | None = None) -> str:
    kind = hardware.kind(row.extra.get("hardware", "fp16"))
    extra: dict[str, object] = {"quantization": kind.vllm_quantization_flag}
    if budget is not None and plan is not None:
        extra.update(max_model_len=budget.max_model_len, gpu_memory_utilization=budget.gpu_memory_utilization,
                     max_num_seqs=max(1, min(MAX_NUM_SEQS_CAP, int(plan.max_concurrency))))
    target = row.extra["serve_path"]
    return launch.as_shell(launch.vllm_serve_args(target, params.models[model].dtype,
                                                  params.kv_modes[row.kv].cache_dtype, extra))


def main() -> None:
    params = schema.load_or_exit()
    rows = [build_row(params, *v) for v in params.variants()]
    extra = compare(params, rows)
    decision.judge(rows, params.decision)
    planned = plan_rows(params, rows)
    base = (params.decision.baseline.tier, params.decision.baseline.kv)
    models, dvc_metrics, summary = {}, {}, []
    for name, m in params.models.items():
        mine = [r for r in rows if r.model == name]
        rec, why = decision.recommend(rows, name)
        regress_links = {}
        for variant, per_task in extra["regressions"].get(name, {}).items():
            link = f"regressions/{name}-{variant}.md"
            io.atomic_write_text(paths.RESULTS / link, report.regressions_md(name, variant, base, per_task))
            regress_links[variant] = link
        plot = f"plots/{name}-quality_vs_memory.png"
        base_row = next((r for r in mine if (r.tier, r.kv) == base and r.status == "ok"), None)
        limits = {k: decision.allowed_drop(t, base_row.metrics.get(k, 0.0)) for k, t in params.decision.tolerances.items()
                  if base_row is not None}
        plots.quality_vs_memory(mine, list(params.decision.tolerances), paths.RESULTS / plot,
                                f"{name}: quality delta (95% CI) vs weight memory", limits)
        models[name] = report.ModelReport(
            name=name, source=m.source, rows=mine, recommended=rec, why=why,
            command=serve_command(params, name, rec) if rec else None,
            num_samples=next((r.extra["num_samples"] for r in mine if r.extra.get("num_samples")), {}),
            flips=extra["flips"].get(name, {}), regression_links=regress_links,
            kv_length=[x[1:] for x in extra["kv_length"] if x[0] == name],
            plans={v: p for (mn, v), p in planned["plans"].items() if mn == name},
            gpu_recs=gpu_recommendations(params, rows, name, planned), plot=plot)
        dvc_metrics[name] = report.dvc_metrics(mine)
        counts = {k: sum(1 for r in mine if (r.overall if r.status == "ok" else r.status) == k)
                  for k in ("pass", "fail", "inconclusive", "unsupported", "failed")}
        summary.append(f"  {name}: recommended " + (f"{rec.tier} + KV {rec.kv}" if rec else f"none ({why})"))
        summary.append("    variants: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
        for gpu, (grow, _, _) in models[name].gpu_recs.items():
            summary.append(f"    {gpu}: " + (f"{grow.tier} + KV {grow.kv}" if grow else "nothing passes and fits"))
    header = {"generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "hardware": hardware_desc(), "baseline": base,
              "bootstrap": params.decision.bootstrap, "budget": planned["budget"], "gpus": planned["gpus"],
              "hardware_docs": hardware.table()[0],
              "versions": next((r.extra["versions"] for r in rows if r.extra.get("versions")), {})}
    io.atomic_write_text(paths.RESULTS / "decision.md", report.render(models, header))
    io.atomic_write_json(paths.RESULTS / "decision.json", report.decision_json(models, header))
    io.atomic_write_json(paths.RESULTS / "metrics.json", dvc_metrics)
    failed = [r for r in rows if r.status == "failed"]
    print("\n".join(["", "qtier: decision written to results/decision.md (details: results/decision.json)",
                      *summary]))
    if failed:
        print(f"qtier: {len(failed)} variant(s) failed: "
              + ", ".join(f"{r.model}/{r.variant} ({r.reason})" for r in failed), file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
