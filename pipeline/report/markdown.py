"""The decision as markdown: results/decision.md. Pure: a header and one section per model in, text out."""
from __future__ import annotations

from pipeline.report import fidelity, gpus, quality, serving
from pipeline.report.document import Header, ModelReport
from pipeline.report.notes import NOTES


def render(models: dict[str, ModelReport], header: Header) -> str:
    base = header.baseline
    b = header.bootstrap
    budget = header.budget
    lines = ["# qtier decision", "",
             f"Generated {header.generated} by `dvc repro` on {header.hardware}. Baseline: tier "
             f"`{base.tier}` with KV cache `{base.kv}`. Intervals: {b.confidence:.0%} paired bootstrap, "
             f"{b.resamples} resamples, seed {b.seed}.", ""]
    if header.versions:
        lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in header.versions.items()) + ".", ""]
    for m in models.values():
        lines += [f"## {m.name}", "", f"Source: `{m.source}`. Samples per task: "
                  + ", ".join(f"{t} {n}" for t, n in m.num_samples.items()) + ".", ""]
        rec = m.recommendation
        if rec.row is not None:
            lines += [f"**Recommended: `{rec.row.facts.tier}` with KV cache `{rec.row.facts.kv}`** - {rec.why}.", "",
                      "```bash", rec.command or "", "```", "",
                      "Sized for each target GPU (`--max-model-len`, `--gpu-memory-utilization`, `--max-num-seqs`) "
                      "under *Per target GPU* below.", ""]
        else:
            lines += [f"**No tier can be recommended**: {rec.why}.", ""]
        lines += quality.main_table(m, base, header.gpus) + ["", "### Quality by task", ""] + quality.task_tables(m, base)
        lines += ["Why each verdict:", ""] + quality.reasons(m.rows, base) + [""]
        lines += fidelity.fidelity_lines(m)
        lines += fidelity.kv_scale_lines(m, base)
        lines += serving.serving_lines(m, base)
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
    lines += ["## How to read this", ""] + [f"- {n}" for n in NOTES] + [""]
    return "\n".join(lines)
