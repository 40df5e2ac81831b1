"""The details under the verdict table: how each variant ran, and one table per task with every
gated metric's score, delta, interval and verdict (classification tasks: the flips too). Pure."""
from __future__ import annotations

from pipeline.report.cells import is_baseline, label, md_row, metric_cell, shown_metrics, tasks_of
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline


def compute_cell(serving: dict | None, compute_dtype: str | None) -> str:
    """The activation dtype, and the W8A8 arithmetic where the reference backend recorded one
    (serving.w8a8_arithmetic: `int8 W8A8 as vLLM: exact integer accumulation (...)...`)."""
    cell = compute_dtype or "–"
    w8a8 = (serving or {}).get("w8a8_arithmetic")
    return f"{cell}; {w8a8}" if w8a8 else cell


def variants_table(m: ModelReport) -> list[str]:
    """The scheme, backend and activation dtype each variant ran at."""
    lines = [md_row(["Variant", "Scheme", "Backend", "Compute"]), "|---|---|---|---|"]
    for r in m.rows:
        f = r.facts
        lines.append(md_row([r.variant, f.scheme, f.backend or "–", compute_cell(f.serving, f.compute_dtype)]))
    return lines + [""]


def task_tables(m: ModelReport, baseline: Baseline) -> list[str]:
    """One table per task: its metrics' cells `score (delta [95% CI], verdict)` per variant."""
    lines: list[str] = []
    for task in tasks_of(m.rows):
        mids = shown_metrics(m.rows, task)
        n = m.num_samples.get(task)
        flips = {v: f[task] for v, f in m.flips.items() if task in f}
        head = ["Variant"] + [label(x, with_task=False) for x in mids] + (["Flips (R→W / W→R)"] if flips else [])
        lines += [f"#### {task}" + (f" ({n} samples)" if n else ""), "", md_row(head), "|" + "---|" * len(head)]
        for r in m.rows:
            if r.facts.status != "ok":
                continue
            cells = [r.variant] + [metric_cell(r, x, is_baseline(r, baseline)) for x in mids]
            if flips:
                f = flips.get(r.variant)
                cells.append(f"{f.right_to_wrong}/{f.wrong_to_right}" if f else "–")
            lines.append(md_row(cells))
        lines.append("")
    return lines
