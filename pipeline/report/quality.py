"""The details under the verdict table: how each variant ran, and one table per task with every
gated metric's score, delta, interval and verdict (classification tasks: the flips too). Pure."""
from __future__ import annotations

from pipeline.domain.result.facts import KvWrite, Serving
from pipeline.report.cells import is_baseline, label, md_row, metric_cell, shown_metrics, tasks_of
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline


def compute_cell(serving: Serving | None, compute_dtype: str | None) -> str:
    """The activation dtype, and the W8A8 arithmetic where the reference backend recorded one
    (serving.w8a8_arithmetic: `int8 W8A8 as vLLM: exact integer accumulation (...)...`)."""
    cell = compute_dtype or "–"
    w8a8 = serving.w8a8_arithmetic if serving else None
    return f"{cell}; {w8a8}" if w8a8 else cell


def kv_write_sentence(found: KvWrite) -> str:
    """How the engine stored fp8 K/V (serving.kv_write, pipeline/engines/vllm/kv_write.py), in words."""
    if found.rounding is None:
        return f"not read ({found.why or 'unknown'})"
    shares = (f"{found.as_truncation or 0:.0%} of {found.values or 0:,} values as truncation, "
              f"{found.as_nearest or 0:.0%} as round-to-nearest")
    if found.rounding == "truncation":
        return (f"**truncated toward zero** ({shares}), where a GPU's conversion and the reference's simulation "
                "round to nearest: by KL on long texts these fp8-KV rows move further from the baseline than a GPU's "
                "would, and on short-prompt tasks the engines differ in either direction (docs/kv-cache.md)")
    if found.rounding == "nearest":
        return f"rounded to nearest ({shares}), as on a GPU and in the reference's simulation"
    return f"neither rounded to nearest nor truncated ({shares}): not what the reference simulates"


def variants_table(m: ModelReport) -> list[str]:
    """The scheme, backend and activation dtype each variant ran at; how the engine stored fp8 K/V."""
    lines = [md_row(["Variant", "Scheme", "Backend", "Compute"]), "|---|---|---|---|"]
    for r in m.rows:
        f = r.facts
        lines.append(md_row([r.variant, f.scheme, f.backend or "–", compute_cell(f.serving, f.compute_dtype)]))
    writes = {r.variant: r.facts.serving.kv_write if r.facts.serving else None for r in m.rows}
    said = sorted({kv_write_sentence(w) for w in writes.values() if w})
    if said:
        lines += ["", "fp8 K/V as the engine stored them (its cache kernel, read at the start of each fp8-KV "
                  f"variant: {', '.join(v for v, w in writes.items() if w)}): " + "; ".join(said) + "."]
    return lines + [""]


def task_tables(m: ModelReport, baseline: Baseline) -> list[str]:
    """One table per task: its metrics' cells `score (delta [interval], verdict)` per variant, and for a
    choice task its flips and exact ties (the best choices' log-likelihoods equal; scored in float32,
    ties are rare: a tie goes to no label in particular, task_rows.choose)."""
    lines: list[str] = []
    for task in tasks_of(m.rows):
        mids = shown_metrics(m.rows, task)
        n = m.num_samples.get(task)
        flips = {v: f[task] for v, f in m.flips.items() if task in f}
        ties = {v: t[task] for v, t in m.ties.items() if task in t}
        head = (["Variant"] + [label(x, with_task=False) for x in mids] + (["Flips (R→W / W→R)"] if flips else [])
                + (["Exact ties"] if ties else []))
        lines += [f"#### {task}" + (f" ({n} samples)" if n else ""), "", md_row(head), "|" + "---|" * len(head)]
        for r in m.rows:
            if r.facts.status != "ok":
                continue
            cells = [r.variant] + [metric_cell(r, x, is_baseline(r, baseline)) for x in mids]
            if flips:
                f = flips.get(r.variant)
                read = m.reads.get(r.variant, {}).get(task)
                cells.append(f"{f.right_to_wrong}/{f.wrong_to_right}" + (read.label() if read else "") if f else "–")
            if ties:
                t = ties.get(r.variant)
                cells.append(f"{t[0]} of {t[1]:,}" if t else "–")
            lines.append(md_row(cells))
        lines.append("")
    return lines
