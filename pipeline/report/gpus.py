"""Per target GPU: the recommendation and where its sequence stopped, which GPUs can serve each tier, and the
memory bill. Pure. Tests: `.venv/bin/python -m pytest -n 0 -q tests/test_decide.py tests/test_walk.py`."""
from __future__ import annotations

from pipeline.domain.hardware import gpus as hardware
from pipeline.domain.hardware.memory import mib
from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.schema import TargetGpu
from pipeline.scoring.pick.walk import Walk


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
    """Per target GPU: the recommendation among what it can serve and fit, where its sequence stopped (both
    from its one walk, scoring/pick/walk.py) and its sized command."""
    lines = [md_row(["Target GPU", "Recommended", "Sequence stops at", "Command"]), "|---|---|---|---|"]
    for gpu, rec in m.gpu_recs.items():
        stops = (stop_cell(rec.walk) if rec.axes is None else
                 "; ".join(f"{n}: {stop_cell(w)}" for n, w in rec.axes.chains if w.stopper is not None) or "–")
        if rec.row is None:
            lines.append(md_row([gpu, f"nothing to recommend: {rec.why}", stops, "–"]))
        else:
            lines.append(md_row([gpu, f"`{rec.row.facts.tier}` + KV `{rec.row.facts.kv}`", stops, f"`{rec.command}`"]))
    return lines


def stop_cell(w: Walk | None) -> str:
    """The walk's stopper and why, '–' where every candidate passed (or no walk was recorded)."""
    if w is None or w.stopper is None:
        return "–"
    return f"`{w.stopper.variant}` ({'held' if w.stopper_held else w.stop_reason})"
