"""results/regressions/<model>-<variant>.md: the samples that got worse most. Pure."""
from __future__ import annotations

from pipeline.schema import Baseline
from pipeline.scoring.estimators.analysis import Read, Regression


def regressions_md(model: str, variant: str, baseline: Baseline, per_task: dict[str, list[Regression]],
                   reads: dict[str, Read] | None = None) -> str:
    """`reads`: task -> the pairs ranked (comparison.read_of: those its verdict was read on)."""
    lines = [f"# Largest regressions: {model} {variant} vs {baseline.tier}-{baseline.kv}", ""]
    for task, regs in per_task.items():
        lines += [f"## {task}", ""]
        read = (reads or {}).get(task)
        if read is not None:
            lines += [f"Ranked over the {read.n:,} sample pairs " + (
                "its verdict was read on." if read.n == read.verdict_n else
                f"read (its verdict was read on {read.verdict_n:,}: this result.json records no look order)."), ""]
        if not regs:
            lines += ["No sample got worse.", ""]
            continue
        for g in regs:
            inp = "; ".join(f"{k}: {v}" for k, v in g.base.input.items() if k != "reference")
            lines += [f"### doc {g.doc_id} (drop {g.drop:.2f})", "", f"- **input**: {inp}",
                      f"- **reference**: {g.base.target}"]
            if g.base.logliks is not None:
                ch = g.base.choices
                lines += [f"- **baseline**: {ch[g.base.pred]} (log-likelihoods {g.base.logliks})",
                          f"- **{variant}**: {ch[g.tier.pred]} (log-likelihoods {g.tier.logliks})"]
            else:
                lines += [f"- **baseline**: {g.base.output}", f"- **{variant}**: {g.tier.output}"]
            lines.append("")
    return "\n".join(lines)
