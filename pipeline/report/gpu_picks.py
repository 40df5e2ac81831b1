"""Page 1's per-GPU picks: for each target GPU (memory.target_gpus) the weight tier and KV format the
two-axis pick chose there (scoring/pick/axes.py, read from the GPU's Recommendation), the KV capacity and
concurrency that buys against the baseline's on the same GPU (the memory plan, scoring/planning/planner.py),
what it costs in quality (the deltas and worst bounds of the pick's own verdicts) and, for a quantized KV
format, by input length (the long-context KL verdict, scoring/verdict/long_kv.py). GPUs with the same pick
share a line. Pure. Tests: `.venv/bin/python -m pytest -n 0 -q tests/test_gpu_picks.py`.
"""
from __future__ import annotations

from pipeline.report.cells import label
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.judge import PASS
from pipeline.scoring.verdict.rows import Row


def capacity(m: ModelReport, r: Row, gpu: str, base: Row | None, length: int) -> str:
    """'6.55 M KV tokens, 1,599 sequences of 4,096 at once, 2.00x the baseline's' (`length`:
    memory.max_model_len, what the plan's concurrency is counted in), '' without a plan."""
    p = m.plans.get(r.variant, {}).get(gpu)
    if p is None or not p.fits:
        return ""
    text = f"{p.kv_tokens / 1e6:,.2f} M KV tokens, {p.max_concurrency:,.0f} sequences of {length:,} at once"
    b = m.plans.get(base.variant, {}).get(gpu) if base is not None and base is not r else None
    if b is not None and b.fits and b.kv_tokens:
        text += f", {p.kv_tokens / b.kv_tokens:.2f}x the baseline's"
    return text


def quality(r: Row) -> str:
    """The pick's passing verdicts: delta and the bound that passed it, e.g. 'classification Accuracy -0.8
    (at worst -2.9)'."""
    deltas = r.evidence.deltas
    parts = [f"{label(mid)} {deltas[mid]:+.1f} (at worst {v.lo:+.1f})" for mid, v in r.judgement.verdicts.items()
             if v.verdict == PASS and mid in deltas and v.lo is not None]
    return "; ".join(parts)


def by_length(m: ModelReport, r: Row, base_kv: str) -> str:
    """The KV format's long-context verdict on the pick's tier (else on the baseline's tier, where the
    format was judged alone), with its largest per-bucket KL increase."""
    if r.facts.kv == base_kv:
        return ""
    found = (next((k for k in m.long_kv if (k.tier, k.kv) == (r.facts.tier, r.facts.kv)), None)
             or next((k for k in m.long_kv if k.kv == r.facts.kv), None))
    if found is None:
        return f"KV `{r.facts.kv}` not judged by input length (eval.long_context off)"
    worst = max((b for b in found.buckets if b.increase is not None), key=lambda b: b.increase, default=None)
    return found.sentence().replace(" (every bucket within the tolerance)", "") + (
        f", largest KL increase {worst.increase:+.4f} nats/token at {worst.lo:,}-{worst.hi:,}" if worst is not None else "")


def lines(m: ModelReport, base: Row | None, base_kv: str, length: int) -> list[str]:
    """One sentence per distinct pick across the target GPUs, GPUs with the same capacity named together;
    none without target GPUs."""
    groups: dict[str, list[str]] = {}
    picks: dict[str, Row | None] = {}
    for gpu, rec in m.gpu_recs.items():
        key = rec.row.variant if rec.row is not None else ""
        groups.setdefault(key, []).append(gpu)
        picks[key] = rec.row
    out = []
    for key, names in groups.items():
        r = picks[key]
        if r is None:
            out.append(f"On {', '.join(names)}: nothing to recommend ({m.gpu_recs[names[0]].why}).")
            continue
        by_cap: dict[str, list[str]] = {}
        for g in names:
            by_cap.setdefault(capacity(m, r, g, base, length), []).append(g)
        where = " and ".join(f"{', '.join(gs)}" + (f" ({c})" if c else "") for c, gs in by_cap.items())
        cost, kv_by_length = quality(r), by_length(m, r, base_kv)
        out.append(f"Per GPU: `{r.facts.tier}` + KV `{r.facts.kv}` on {where}" + (f"; quality vs baseline: {cost}" if cost else "")
                   + (f"; by input length: {kv_by_length}" if kv_by_length else "") + ".")
    return out
