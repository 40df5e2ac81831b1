"""The decision as markdown: results/decision.md, read top-down. Pure: a header and one section per
model in, text out.

  1. page 1, per model (report/page_one.py): the recommendation, what a pass means, the baseline's scores,
     memory saved, provenance and caveats, one compact row per variant
  2. every variant in full; the run: baseline, intervals, where the results were measured, versions
  3. per model, the details: how each variant ran, quality by task, why each verdict, power,
     fidelity, KV scales, the engine's facts, per target GPU, memory bill, KV by input length
What was timed is in speed.md (report/speed.py): it differs from run to run, so two runs of one commit
give the same decision.md but for its "Generated" line.
  4. how to read it
"""
from __future__ import annotations

from pipeline.report import (fidelity, gpus, long_context, looks, noise, provenance, quality, retrieval, serving,
                             summary, verdicts)
from pipeline.report.document import Header, ModelReport
from pipeline.report.notes import notes
from pipeline.report import kv_repaired, page_one, repaired, speed
from pipeline.scoring.verdict.rows import Row


def run_lines(header: Header, rows: list[Row]) -> list[str]:
    base = header.baseline
    return ["## The run", "",
            f"Generated {header.generated} by stage decide. Baseline: tier `{base.tier}` with KV cache `{base.kv}`. "
            f"Intervals: {interval_text(header.confidence)}", ""
            ] + provenance.header_lines(rows, header.versions) + [speed.LINK, ""]


def provenance_line(header: Header, rows: list[Row], machines: dict[str, str]) -> str:
    """Where the run came from and where it was measured, in one sentence."""
    found: dict[str, set[str]] = {}     # engine -> its versions (a variant whose engine never started has none)
    for on in (r.facts.measured_on for r in rows):
        if on is not None:
            found.setdefault(on.engine.name, set()).update([on.engine.version] if on.engine.version else [])
    engines = [f"{n} {', '.join(sorted(v))}" if v else f"{n} (version not recorded)" for n, v in sorted(found.items())]
    where = "; ".join(machines) or "not recorded"
    torch = header.versions.get("torch")
    return (f"Run: commit {header.commit}, dvc.lock sources {header.lock}; measured on {where}; engine "
            f"{', '.join(engines) or 'not recorded'}" + (f", torch {torch}" if torch else "") + ".")


def interval_text(confidence: float) -> str:
    """What every interval on the page is, at its real confidence."""
    side = (1 - confidence) / 2
    return (f"each verdict is a one-sided test at {side:.1%} a side ({confidence:.0%} two-sided), kept over every "
            "look: a task read in looks shows the look's repeated interval at its own nominal confidence (e.g. "
            "99.99% at look 1 of 4, about 95.6% at the last; O'Brien-Fleming spending), a task read once its "
            f"{confidence:.0%} interval. Accuracy and exact match: the paired score interval of the discordant "
            "pairs; ROUGE: the floored studentized interval; BLEU and chrF: the same on the corpus score's jackknife "
            "pseudo-values (docs/decisions/graded-interval.md). Error rates by simulation: "
            "`python -m pipeline.scoring.simulation.simulate`.")


def details(m: ModelReport, header: Header) -> list[str]:
    base, budget = header.baseline, header.budget
    lines = [f"## {m.name}: details", "", f"Source: `{m.source}`. Samples per task: "
             + ", ".join(f"{t} {n}" for t, n in m.num_samples.items()) + ".", ""]
    lines += ["### How each variant ran", ""] + quality.variants_table(m)
    lines += ["### Quality by task", ""] + quality.task_tables(m, base)
    lines += verdicts.why_lines(m, base, header.confidence) + verdicts.power_lines(m, base)
    lines += repaired.repaired_lines(m)
    lines += kv_repaired.kv_repaired_lines(m)
    lines += fidelity.fidelity_lines(m)
    lines += noise.noise_lines(m)
    lines += looks.looks_lines(m)
    lines += fidelity.kv_scale_lines(m, base)
    lines += serving.engine_lines(m)
    if m.plot:
        lines += [f"![quality delta vs weight memory]({m.plot.path})", ""]
    lines += [f"### Per target GPU (max_model_len {budget.max_model_len}, gpu_memory_utilization "
              f"{budget.gpu_memory_utilization}, block size {budget.block_size})", ""]
    lines += gpus.gpu_lines(m) + [""]
    lines += ["### Which GPUs can serve each tier (vLLM docs v" + header.hardware_docs + ")", ""]
    lines += gpus.hardware_table(m, header.gpus) + [""]
    lines += ["### Memory bill", "",
              f"available KV = memory x utilization - weights - {budget.activation_peak_gib} GiB activations "
              f"- {budget.non_torch_overhead_gib} GiB non-torch; roofline at context "
              f"{budget.max_model_len // 2} for one sequence.", ""]
    lines += gpus.planner_table(m, header.gpus) + [""]
    lines += ["### KV-cache quantization by input length", ""] + fidelity.kv_length_lines(m) + [""]
    lines += long_context.long_lines(m, budget.max_model_len)
    lines += retrieval.retrieval_lines(m)
    return lines


def render(models: dict[str, ModelReport], header: Header, across: list[str] | None = None) -> str:
    """`across`: the section across models (report/across_page.py), after every model's page one."""
    rows = [r for m in models.values() for r in m.rows]
    machines = provenance.machines(rows)
    lines = ["# qtier decision", ""]
    where = provenance_line(header, rows, machines)
    for m in models.values():
        if len(models) > 1:
            lines += [f"## {m.name}", ""]
        lines += page_one.lines(m, header, where, summary.recommendation_lines(m))
    lines += across or []
    lines += ["## Every variant", ""]
    for m in models.values():
        lines += noise.summary_line(m) + looks.summary_line(m)
        lines += summary.verdict_table(m, header.baseline, machines)
    lines += run_lines(header, rows)
    for m in models.values():
        lines += details(m, header)
    lines += ["## How to read this", ""] + [f"- {n}" for n in notes(header)] + [""]
    return "\n".join(lines)
