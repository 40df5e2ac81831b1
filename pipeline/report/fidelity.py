"""Fidelity to the baseline's next-token distributions, and the fp8 KV cache with calibrated scales
beside uncalibrated. Pure."""
from __future__ import annotations

from pipeline.report.cells import ci, is_baseline, label, md_row, metric_cell, shown_metrics, status_cell, tasks_of
from pipeline.report.document import ModelReport
from pipeline.schema import Baseline


def fidelity_lines(m: ModelReport) -> list[str]:
    """Next-token KL and top-1 agreement vs the baseline per variant (report-only: no verdict uses them)."""
    found = [(r, r.facts.fidelity) for r in m.rows if r.facts.fidelity]
    if not found:
        return []
    lines = ["### Fidelity to the baseline's next-token distributions", "",
             "Teacher-forced on the fidelity texts (eval.fidelity); intervals over texts. Report-only: the "
             "verdicts above come from the task metrics. Bands (mean KL): <0.1 excellent, 0.1-1 moderate, >1 large.",
             "", md_row(["Variant", "KL mean (nats/token)", "KL p99", "Top-1 agreement (%)", "Band", "Texts / tokens"]),
             "|" + "---|" * 6]
    notes: dict[str, set[str]] = {}          # support text -> the backends it describes
    for r, f in found:
        s = f.summary
        if s is None:
            lines.append(md_row([r.variant, f"{f.record.status}: {f.record.why}", "–", "–", "–", "–"]))
            continue
        lines.append(md_row([r.variant, f"{s.kl_mean:.4f} {ci(s.kl_mean_ci, '.4f')}",
                             f"{s.kl_p99:.3f} {ci(s.kl_p99_ci, '.3f')}",
                             f"{s.top1_agreement:.1f} {ci(s.top1_agreement_ci, '.1f')}", f.band,
                             f"{s.n_texts} / {s.n_tokens:,}"]))
        if f.record.support:
            notes.setdefault(f.record.support, set()).add(r.facts.backend or "?")
    return lines + [""] + [f"KL support ({'; '.join(sorted(b))}): {n}." for n, b in notes.items()] + [""]


def kv_scale_lines(m: ModelReport, baseline: Baseline) -> list[str]:
    """Each tier's calibrated fp8 KV rows beside its uncalibrated ones: scores with their delta to the
    baseline [CI], and the fidelity KL, so the effect of calibrating the k/v scales reads across."""
    if not m.kv_pairs:
        return []
    rows = {(r.facts.tier, r.facts.kv): r for r in m.rows}
    mids = [mid for t in tasks_of(m.rows) for mid in shown_metrics(m.rows, t)]
    head = ["Tier", "KV mode", "k/v scales"] + [label(x) for x in mids] + ["KL mean [CI]", "Verdict"]
    intro = ("The calibrated mode serves the tier re-made with llm-compressor's `kv_cache_scheme` (per-layer "
             "k/v scales from the calibration set, in the checkpoint vLLM loads); the uncalibrated one uses its "
             "`kv_modes.<mode>.scale` (" + ", ".join(f"`{p.uncalibrated}`: {p.scale}" for p in m.kv_pairs)
             + "; vLLM's default is 1.0).")
    lines = ["### fp8 KV cache: calibrated scales beside uncalibrated", "", intro, "", md_row(head),
             "|" + "---|" * len(head)]
    tiers = list(dict.fromkeys(r.facts.tier for r in m.rows))
    for pair in m.kv_pairs:
        for tier in tiers:
            for kv, how in ((pair.uncalibrated, f"{pair.scale} (uncalibrated)"), (pair.calibrated, "calibrated")):
                r = rows.get((tier, kv))
                if r is None:
                    continue
                s = r.facts.fidelity.summary if r.facts.fidelity else None
                kl = f"{s.kl_mean:.4f} {ci(s.kl_mean_ci, '.4f')}" if s is not None else "–"
                lines.append(md_row([tier, kv, how] + [metric_cell(r, x, is_baseline(r, baseline)) for x in mids]
                                    + [kl, status_cell(r)]))
    return lines + [""]


def kv_length_lines(m: ModelReport) -> list[str]:
    if not m.kv_length:
        return ["No KV-quantized variant had a same-tier reference to compare against."]
    lines = [md_row(["Variant", "vs", "Task", "Buckets (prompt chars: n, mean score delta)"]), "|---|---|---|---|"]
    worse_long = 0
    comparable = 0
    for k in m.kv_length:
        # an empty bucket says nothing: only the lengths the task's prompts have are shown
        parts = [f"{b.lo}-{b.hi if b.hi is not None else '∞'}: n={b.n}, "
                 + ("–" if b.delta is None else f"{b.delta:+.2f}") for b in k.buckets if b.n]
        filled = [b for b in k.buckets if b.delta is not None]
        if len(filled) >= 2:
            comparable += 1
            worse_long += filled[-1].delta < filled[0].delta
        lines.append(md_row([k.variant, k.reference, k.task, "; ".join(parts)]))
    lines += ["", "Each row over the documents the variant's verdict on the task was read on (the look it settled "
              "at; a stratified read weighted as its delta is), paired with the same tier under the baseline's KV.",
              "", f"Longest bucket worse than shortest in {worse_long} of {comparable} comparisons "
              "(field experience says KV quantization hurts long inputs most; with these sample sizes a "
              "difference of a few points is within noise)."]
    return lines
