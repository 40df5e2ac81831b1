"""decide's inputs: each variant's row from its declared results (evaluate's result.json, the serving
record), and the per-sample logs, read once. Used by pipeline/stages/decide.py; reads files, judges nothing."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline import io, paths, schema
from pipeline.domain.hardware import kv_formats
from pipeline.domain.model import sources
from pipeline.domain.result import contract, kv_repaired, serving_record
from pipeline.domain.sets import task_rows
from pipeline.domain.result.facts import OK, Fidelity, Serving
from pipeline.scoring.estimators import fidelity
from pipeline.scoring.planning import planner
from pipeline.scoring.verdict.rows import Measured
from pipeline.domain.sets.sample_row import SampleRow


def tier_kind(params: schema.Params, model: str, tier: str) -> str:
    t = params.tiers[tier]
    return t.hardware or ("bf16" if sources.storage_dtype(params, model) == "bfloat16" else "fp16")


def build_row(params: schema.Params, model: str, tier: str, kv: str) -> Measured:
    """One variant's row from its declared results: evaluate's result.json and the serving record
    (quantize's, or kvscales' for calibrated k/v scales). Either missing: a failed row saying which."""
    out = paths.eval_dir(model, tier, kv)
    result_file = paths.eval_result(model, tier, kv)
    scheme, kind = params.tiers[tier].label or params.tiers[tier].method, tier_kind(params, model, tier)
    if not result_file.is_file():
        return Measured(model, tier, kv, missing=f"no result: {result_file} is missing", scheme=scheme, hardware=kind)
    record_file = paths.serving_record(model, tier, kv, params.kv_modes[kv].calibrated)
    if not record_file.is_file():
        # evaluate read this record to serve the variant: without it neither the weights nor the
        # serve path are known, and the result cannot be trusted to be of this checkpoint
        return Measured(model, tier, kv, missing=f"no serving record: {record_file} is missing", scheme=scheme,
                        hardware=kind)
    res = contract.load(result_file)
    record = serving_record.read(record_file)
    scheme = record.label if record.repair and record.label else scheme     # the label names what was promoted
    hf = record.geometry.as_dict() if record.geometry else None
    mode = kv_repaired.mode(params, model, tier, kv)       # a repaired mode: the layers kvrepair kept
    # the result is held whole (metrics are `<task>/<metric>`, each one's direction from its task's YAML)
    return Measured(
        model, tier, kv, res, scheme=scheme, hardware=kind,
        weight_bytes=record.weight_bytes or (res.serving.weight_bytes_serving if res.serving else None),
        kv_bytes_per_token=kv_formats.bytes_per_token(hf, mode.cache_dtype, sources.storage_dtype(params, model),
                                                      tuple(mode.skip_layers)) if hf else None,
        serve_path=record.served_as,
        kv_formula=engine_kv_check(hf, params.kv_modes[kv].cache_dtype, res.serving, params.memory.block_size)
        if hf else None,
        fidelity=fidelity_summary(res.fidelity, out, params), repair=record.repair,
        kv_skip_layers=tuple(mode.skip_layers), kv_repair=kv_repaired.record(model, tier, kv))


def fidelity_summary(recorded: Fidelity | None, eval_dir: Path, params: schema.Params) -> fidelity.Read | None:
    """evaluate's per-position KL and top-1 agreement, summarized with intervals over texts (a percentile
    bootstrap: report.fidelity_bootstrap, at decision.confidence)."""
    if recorded is None or recorded.status != OK:
        return None if recorded is None else fidelity.Read(recorded)
    rows = io.read_jsonl(eval_dir / paths.FIDELITY_ROWS, ("kl", "agree"))
    boot = params.report.fidelity_bootstrap
    return fidelity.Read(recorded, fidelity.summarize([np.asarray(r["kl"], dtype=float) for r in rows],
                                                      [np.asarray(r["agree"], dtype=bool) for r in rows],
                                                      boot.resamples, boot.seed, params.decision.confidence))


def engine_kv_check(hf: dict, cache_dtype: str, serving: Serving | None, block_size: int) -> str | None:
    """The planner's formula applied to the KV memory vLLM reported, beside the tokens it logged, in
    blocks of `block_size` tokens (memory.block_size, what the planner assumes). None when the engine
    logged no KV memory, tokens or dtype."""
    if serving is None or not serving.kv_cache_gib or not serving.kv_cache_tokens:
        return None
    gib, tokens = serving.kv_cache_gib, serving.kv_cache_tokens
    served = serving.engine.dtype if serving.engine else None
    if not served:
        return None
    per_token = kv_formats.bytes_per_token(hf, cache_dtype, str(served).replace("torch.", ""))
    formula = planner.kv_capacity_tokens(gib * planner.GIB, per_token, block_size)
    return (f"{formula:,} tokens ({(formula - tokens) / tokens:+.2%}) from {gib} GiB x {per_token:,} B/token "
            f"in blocks of {block_size}")


Samples = dict[tuple[str, str, str], dict[str, list[SampleRow]]]   # (model, tier, kv) -> task -> per-sample rows


def read_all_samples(rows: list[Measured]) -> Samples:
    """The per-sample logs evaluate wrote, read once for every use below."""
    return {r.key: task_rows.read_samples(paths.eval_dir(*r.key)) for r in rows if r.status == "ok"}


def baseline_of(params: schema.Params, measured: list[Measured], model: str) -> Measured | None:
    """`model`'s baseline row (decision.baseline), None when it did not run."""
    b = params.decision.baseline
    return next((r for r in measured if (r.model, r.tier, r.kv) == (model, b.tier, b.kv) and r.status == "ok"), None)


def prompt_format(model: str, tier: str, kv: str) -> str:
    """How evaluate formatted `model`'s prompts (result.json chat_template, add_bos_token), as the page
    names it: 'chat template, BOS' / 'plain, no BOS'; 'not recorded' without a result."""
    result_file = paths.eval_result(model, tier, kv)
    if not result_file.is_file():
        return "not recorded"
    res = contract.load(result_file)
    if res.chat_template is None and res.add_bos_token is None:
        return "not recorded"
    return (("chat template" if res.chat_template else "plain") + ", "
            + ("BOS" if res.add_bos_token else "no BOS"))
