"""Per target GPU: the recommendation, which GPUs can serve each tier, and the memory bill. Pure."""
from __future__ import annotations

from pipeline.domain import hardware
from pipeline.domain.memory import mib
from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.schema import TargetGpu


def hardware_table(m: ModelReport, gpus: dict[str, TargetGpu]) -> list[str]:
    cc = {n: g.compute_capability for n, g in gpus.items()}
    seen: dict[str, str] = {}
    for r in m.rows:
        seen.setdefault(r.facts.tier, r.facts.hardware)
    lines = [md_row(["Tier", "vLLM kernel family", "Target GPUs that can serve it", "Basis"]), "|---|---|---|---|"]
    for tier, kind in seen.items():
        k = hardware.kind(kind)
        lines.append(md_row([tier, k.label, hardware.describe(kind, cc), k.source]))
    return lines


def planner_table(m: ModelReport, gpus: dict[str, TargetGpu]) -> list[str]:
    names = list(gpus)
    lines = [md_row(["Variant", "Weights (MiB)"] + [f"{n}: KV tokens / max concurrency / decode roofline tok/s"
                                                    for n in names]), "|" + "---|" * (2 + len(names))]
    for r in m.rows:
        plans = m.plans.get(r.variant)
        if not plans:
            continue
        cells = [r.variant, f"{mib(r.facts.weight_bytes):.1f}"]
        for n in names:
            p = plans[n]
            cells.append(f"{p.kv_tokens:,} / {p.max_concurrency:,.1f} / {p.roofline_tokens_per_s:,.0f}"
                         if p.fits else f"does not fit: {p.reason}")
        lines.append(md_row(cells))
    return lines


def gpu_lines(m: ModelReport) -> list[str]:
    """Per target GPU: the recommendation among what it can serve and fit, and its sized command."""
    lines = [md_row(["Target GPU", "Recommended", "Command"]), "|---|---|---|"]
    for gpu, rec in m.gpu_recs.items():
        if rec.row is None:
            lines.append(md_row([gpu, f"nothing to recommend: {rec.why}", "–"]))
        else:
            lines.append(md_row([gpu, f"`{rec.row.facts.tier}` + KV `{rec.row.facts.kv}`", f"`{rec.command}`"]))
    return lines
