"""The top of the report: each model's recommendation and why in three lines, then one compact row
per variant (verdict per task with the deltas that decided it, memory, where it was
measured). Pure."""
from __future__ import annotations

from pipeline.domain.hardware.memory import mib
from pipeline.report.cells import NOT_CAPABLE_CELL, is_baseline, md_row, status_cell, task_cell, tasks_of
from pipeline.report import provenance
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline
from pipeline.scoring.verdict.judge import ENDPOINT

def recommendation_lines(m: ModelReport) -> list[str]:
    """Three lines: what to ship, why, and the command."""
    rec = m.recommendation
    if rec.row is None:
        return [f"**{m.name}: no tier can be recommended**: {rec.why}.", ""] + sanity_lines(m)
    f = rec.row.facts
    # an endpoint is served already, sized by its own server: no target GPU changes its line
    where = ("sized by its server; the same line under *Per target GPU*" if f.backend == ENDPOINT
             else "sized per target GPU under *Per target GPU*")
    return [f"**Recommended: `{f.tier}` with KV cache `{f.kv}`** for {m.name}.  ",
            f"Why: {rec.why}.  ",
            f"Serve: `{rec.command}` ({where}).", ""] + sanity_lines(m)


def sanity_lines(m: ModelReport) -> list[str]:
    """What looks wrong with the baseline's own outputs, and why it may be so (pipeline/scoring/estimators/sanity.py),
    and a tokenizer check prepare was told to pass over."""
    checked = next((r.facts.tokenizer_check for r in m.rows if r.judgement.overall == "baseline"), None)
    lines = []
    if checked is not None and checked.overridden:
        lines = [f"**Tokenizer check overridden** (`models.{m.name}.check_tokenizer: false`): "
                 + "; ".join(checked.findings) + ". Every prompt length and probe is in this tokenizer.", ""]
    if not m.sanity:
        return lines
    return lines + ["**Check the baseline first**: every variant is judged against these outputs.", "",
            "| task | what the baseline did | likely causes |", "|---|---|---|"] + [
        f"| {s.task} | {s.what} | {s.causes} |" for s in m.sanity] + [""]


def verdict_table(m: ModelReport, base: Baseline | None, machines: dict[str, str]) -> list[str]:
    """One row per variant. `machines`: provenance.machines of the run (the header lists them)."""
    names = tasks_of(m.rows)
    head = (["Tier", "KV cache", "Verdict"] + names
            + ["Weights (MiB)", "KV bytes/token", "Measured on"])
    lines = [md_row(head), "|" + "---|" * len(head)]
    for r in m.rows:
        f = r.facts
        verdict = "baseline" if is_baseline(r, base) and f.status == "ok" else status_cell(r)
        lines.append(md_row([f.tier, f.kv, verdict] + [task_cell(r, t, base) for t in names]
                            + [f"{mib(f.weight_bytes):.1f}" if f.weight_bytes else "–",
                               f"{f.kv_bytes_per_token:,}" if f.kv_bytes_per_token else "–",
                               provenance.row_cell(r, machines)]))
    return lines + ["", "Task cells: the task's verdict and the deltas (variant - baseline, metric points) of the "
                    f"metrics that decided it; *{NOT_CAPABLE_CELL}*: the baseline scores below "
                    "`decision.min_baseline` on every gated metric of the task, so it judges no variant. "
                    "The reasons are under *Why each verdict*; *Measured on* names a machine listed under "
                    "*The run*.", ""]
