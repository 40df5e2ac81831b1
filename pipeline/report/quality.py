"""The quality sections: the verdict table, one table per task, why each verdict and its power. Pure."""
from __future__ import annotations

from pipeline.domain import hardware
from pipeline.domain.memory import mib
from pipeline.report.cells import (is_baseline, label, md_row, metric_cell, shown_metrics, status_cell, task_cell,
                                   tasks_of)
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline
from pipeline.scoring.rows import Row
from pipeline.scoring.planner import Gpu


def main_table(m: ModelReport, baseline: Baseline, gpus: dict[str, Gpu] | None = None) -> list[str]:
    cc = {n: g.compute_capability for n, g in (gpus or {}).items()}
    names = tasks_of(m.rows)
    head = (["Tier", "KV cache", "Scheme"] + names
            + ["Flips (R→W / W→R)", "Verdict", "Weights (MiB)", "KV bytes/token", "Gen tok/s (this CPU)", "Backend",
               "Compute", "vLLM GPUs"])
    lines = [md_row(head), "|" + "---|" * len(head)]
    for r in m.rows:
        f = r.facts
        is_base = is_baseline(r, baseline)
        flips = m.flips.get(r.variant, {})
        flip = ", ".join(f"{x.right_to_wrong}/{x.wrong_to_right}" for x in flips.values()) if flips else "–"
        verdict = "baseline" if is_base and f.status == "ok" else status_cell(r)
        if r.variant in m.regression_links and f.status == "ok":
            verdict += f" ([regressions]({m.regression_links[r.variant]}))"
        lines.append(md_row([f.tier, f.kv, f.scheme]
                            + [task_cell(r, t, is_base) for t in names]
                            + [flip, verdict,
                               f"{mib(f.weight_bytes):.1f}" if f.weight_bytes else "–",
                               f"{f.kv_bytes_per_token:,}" if f.kv_bytes_per_token else "–",
                               f"{f.tokens_per_s:.1f}" if f.tokens_per_s else "–", f.backend or "–",
                               f.compute_dtype or "–", hardware.describe(f.hardware, cc) if cc else "–"]))
    return lines


def task_tables(m: ModelReport, baseline: Baseline) -> list[str]:
    """One table per task: its metrics' cells `score (delta [95% CI], verdict)` per variant."""
    lines: list[str] = []
    for task in tasks_of(m.rows):
        mids = shown_metrics(m.rows, task)
        n = m.num_samples.get(task)
        lines += [f"#### {task}" + (f" ({n} samples)" if n else ""), "",
                  md_row(["Variant"] + [label(x, with_task=False) for x in mids]), "|" + "---|" * (1 + len(mids))]
        for r in m.rows:
            if r.facts.status == "ok":
                lines.append(md_row([r.variant] + [metric_cell(r, x, is_baseline(r, baseline)) for x in mids]))
        lines.append("")
    return lines



def reasons(rows: list[Row], baseline: Baseline | None = None) -> list[str]:
    out = []
    for r in rows:
        verdicts = r.judgement.verdicts
        parts = [f"{label(x)} {v.verdict}: {v.why}" for x, v in verdicts.items()]
        if r.facts.status == "ok" and not is_baseline(r, baseline):
            bare = [label(x) for x in r.facts.metrics if x not in r.evidence.intervals and x not in verdicts]
            if bare and baseline is not None:
                parts.append(f"reported without an interval (no per-sample form): {', '.join(bare)}")
        if parts:
            out.append(f"- **{r.variant}** → {r.judgement.overall}. " + "; ".join(parts))
            out += power_line(r)
    return out


def power_line(r: Row) -> list[str]:
    """A sub-bullet with each gated metric's power figures (see NOTES), or nothing."""
    if not r.evidence.power:
        return []
    return ["  - power: " + "; ".join(f"{label(x)} {p.compact()}" for x, p in r.evidence.power.items())]
