"""decision.md's retrieval-by-length section: the retrieval suite's per-length accuracy for every variant,
the baseline's included, with each length's verdict, and per variant the length up to which it is shown
non-inferior (pipeline/scoring/verdict/retrieval_length.py). Pure."""
from __future__ import annotations

from pipeline import paths
from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.retrieval_length import REPORT_ONLY, Cell


def cell_text(c: Cell) -> str:
    if c.accuracy is None:
        return c.verdict
    if c.verdict == "baseline":
        return f"{c.accuracy:.1f}%"
    iv = "" if c.interval is None else f" [{c.interval[0]:+.1f}, {c.interval[1]:+.1f}]"
    delta = "" if c.delta is None else f" ({c.delta:+.1f}{iv})"
    return f"{c.accuracy:.1f}%{delta} {c.verdict}"


def retrieval_lines(m: ModelReport) -> list[str]:
    if not m.retrieval:
        return []
    lengths = [x for x, _ in m.retrieval[0].cells]
    lines = ["### Long context: retrieval by length", "",
             "The retrieval suite (passkey and needle retrieval in generated filler, exact match of the first "
             "number; scripts/retrieval_set.py), one task per prompt length, each judged like any task: paired "
             "intervals and its own tolerance; *not capable*: the baseline scores below its `min_baseline` at "
             "that length, so it judges no variant; *report only*: the length's task has no tolerance (the "
             "default: a few prompts per length can show a lost needle, not non-inferiority), so it is shown "
             "and gates nothing. Per variant: accuracy (delta to the baseline [its paired 95% interval], "
             "points) and the verdict.", ""]
    lines += [md_row(["Variant", *[f"{x.tokens:,} tokens" for x in lengths], "non-inferior up to"]),
              md_row(["---"] * (len(lengths) + 2))]
    for e in m.retrieval:
        base = all(c.verdict == "baseline" for _, c in e.cells)
        shown = all(c.verdict == REPORT_ONLY for _, c in e.cells)
        up_to = "baseline" if base else "report only" if shown else ("-" if e.up_to is None else f"{e.up_to:,}")
        lines.append(md_row([e.variant, *[cell_text(c) for _, c in e.cells], up_to]))
    lines.append("")
    lines += [f"- {e.sentence()}" for e in m.retrieval if not all(c.verdict == "baseline" for _, c in e.cells)]
    lines += ["", f"![retrieval accuracy by length]({paths.retrieval_plot(m.name)})", ""]
    return lines
