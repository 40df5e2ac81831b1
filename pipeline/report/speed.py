"""results/speed.md: what was timed, apart from decision.md. Timings differ from run to run and rank no
variant, so decision.md links here and two runs of one commit give the same decision.md (but for its
time stamp line). Pure: the same inputs as decision.md in, text out.

  per model: generation speed per variant, what the looked evaluations cost against a fixed-n run
  (report/looks.py), and on vLLM the startup, load test, service level and speed floor (report/serving.py)
"""
from __future__ import annotations

from pipeline.report import looks, provenance, serving
from pipeline.report.cells import md_row
from pipeline.report.document import Header, ModelReport

FILE = "speed.md"                    # under results/, beside decision.md
LINK = ("Speed and the run's cost, as timed on this machine: [speed.md](speed.md) (timings differ from run to run; "
        "no verdict or pick reads them).")


def speed_table(m: ModelReport, machines: dict[str, str]) -> list[str]:
    """Batched greedy generation speed and evaluate's stage seconds per variant, with where they ran."""
    rows = [r for r in m.rows if r.facts.status == "ok"]
    if not rows:
        return []
    lines = [md_row(["Variant", provenance.speed_header(m.rows), "Evaluate stage (s)", "Measured on"]),
             "|---|---|---|---|"]
    for r in rows:
        f = r.facts
        lines.append(md_row([r.variant, f"{f.tokens_per_s:.1f}" if f.tokens_per_s else "–",
                             f"{f.seconds:.0f}" if f.seconds is not None else "–",
                             provenance.row_cell(r, machines)]))
    return lines + [""]


def render(models: dict[str, ModelReport], header: Header) -> str:
    rows = [r for m in models.values() for r in m.rows]
    machines = provenance.machines(rows)
    lines = ["# qtier speed", "", f"Generated {header.generated} by stage decide, beside decision.md. Gen tok/s is "
             "batched greedy generation on the device each result was measured on; on a CPU it does not rank "
             "quantized GPU kernels.", ""] + provenance.header_lines(rows, header.versions)
    for m in models.values():
        lines += [f"## {m.name}", ""] + speed_table(m, machines) + looks.cost_line(m)
        lines += serving.load_lines(m, header.baseline)
    return "\n".join(lines) + "\n"
