"""The quality sections: the verdict table, one table per task, why each verdict and its power. Pure."""
from __future__ import annotations

from pipeline.domain import hardware
from pipeline.domain.memory import mib
from pipeline.report.cells import md_row, label, metric_cell, shown_metrics, status_cell, task_cell, tasks_of
from pipeline.report.document import ModelReport
from pipeline.scoring.decision import Row
from pipeline.scoring.planner import Gpu


def main_table(m: ModelReport, baseline: tuple[str, str], gpus: dict[str, Gpu] | None = None) -> list[str]:
    cc = {n: g.compute_capability for n, g in (gpus or {}).items()}
    names = tasks_of(m.rows)
    head = (["Tier", "KV cache", "Scheme"] + names
            + ["Flips (R→W / W→R)", "Verdict", "Weights (MiB)", "KV bytes/token", "Gen tok/s (this CPU)", "Backend",
               "Compute", "vLLM GPUs"])
    lines = [md_row(head), "|" + "---|" * len(head)]
    for r in m.rows:
        is_base = (r.tier, r.kv) == baseline
        flips = m.flips.get(r.variant, {})
        flip = ", ".join(f"{f.right_to_wrong}/{f.wrong_to_right}" for f in flips.values()) if flips else "–"
        verdict = "baseline" if is_base and r.status == "ok" else status_cell(r)
        if r.variant in m.regression_links and r.status == "ok":
            verdict += f" ([regressions]({m.regression_links[r.variant]}))"
        lines.append(md_row([r.tier, r.kv, r.info.scheme]
                            + [task_cell(r, t, is_base) for t in names]
                            + [flip, verdict,
                               f"{mib(r.weight_bytes):.1f}" if r.weight_bytes else "–",
                               f"{r.kv_bytes_per_token:,}" if r.kv_bytes_per_token else "–",
                               f"{r.tokens_per_s:.1f}" if r.tokens_per_s else "–", r.backend or "–",
                               r.compute_dtype or "–", hardware.describe(r.info.hardware, cc) if cc else "–"]))
    return lines


def task_tables(m: ModelReport, baseline: tuple[str, str]) -> list[str]:
    """One table per task: its metrics' cells `score (delta [95% CI], verdict)` per variant."""
    lines: list[str] = []
    for task in tasks_of(m.rows):
        mids = shown_metrics(m.rows, task)
        n = m.num_samples.get(task)
        lines += [f"#### {task}" + (f" ({n} samples)" if n else ""), "",
                  md_row(["Variant"] + [label(x, with_task=False) for x in mids]), "|" + "---|" * (1 + len(mids))]
        for r in m.rows:
            if r.status == "ok":
                lines.append(md_row([r.variant] + [metric_cell(r, x, (r.tier, r.kv) == baseline) for x in mids]))
        lines.append("")
    return lines



def reasons(rows: list[Row], baseline: tuple[str, str] | None = None) -> list[str]:
    out = []
    for r in rows:
        parts = [f"{label(x)} {v}: {why}" for x, (v, why) in r.verdicts.items()]
        if r.status == "ok" and (r.tier, r.kv) != baseline:
            bare = [label(x) for x in r.metrics if x not in r.intervals and x not in r.verdicts]
            if bare and baseline is not None:
                parts.append(f"reported without an interval (no per-sample form): {', '.join(bare)}")
        if parts:
            out.append(f"- **{r.variant}** → {r.overall}. " + "; ".join(parts))
            out += power_line(r)
    return out


def power_line(r: Row) -> list[str]:
    """A sub-bullet with each gated metric's power figures (see NOTES), or nothing."""
    if not r.power:
        return []
    return ["  - power: " + "; ".join(f"{label(x)} {p.compact()}" for x, p in r.power.items())]
