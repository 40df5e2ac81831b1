"""decision.md's long-context section (eval.long_context): per variant, next-token KL and top-1 agreement
against the baseline by token position, and per quantized KV mode up to which length it is shown
non-inferior to the same tier with the baseline's KV cache (pipeline/scoring/verdict/long_kv.py). Pure."""
from __future__ import annotations

from dataclasses import asdict

from pipeline import paths
from pipeline.domain.result.facts import Bucket, LongContext
from pipeline.report.cells import md_row
from pipeline.report.document import ModelReport
from pipeline.scoring.verdict.long_kv import as_json, measured, planned_length
from pipeline.scoring.verdict.rows import Row


def _num(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(ci, digits: int = 4) -> str:
    return "" if not ci else f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def bucket_cell(b: Bucket) -> str:
    if b.kl_mean is None:
        return "-"
    top1 = f"{b.top1:.1f}%" if b.top1 is not None else "-"
    return f"{_num(b.kl_mean)}{_ci(b.kl_ci)} / {top1}"


def first_measured(m: ModelReport) -> LongContext | None:
    """The long_context record of the first variant measured (its texts, length and edges are every one's)."""
    return next((r.facts.long_context for r in m.rows if measured(r.facts)), None)


def why_not(r: Row) -> str:
    lc = r.facts.long_context
    if lc is None:
        return "not measured: no long-context record"
    return f"{lc.status}: {lc.why or 'no reason recorded'}"


def kv_cell(kb) -> str:
    if kb.increase is None:
        return "-"
    return f"{kb.increase:+.4f}{_ci(kb.ci)} {kb.verdict}"


def long_lines(m: ModelReport, max_model_len: int) -> list[str]:
    if m.long_tolerance is None:
        return []
    first = first_measured(m)
    lines = ["### Long context: fidelity by position", ""]
    if first is None:
        # per row: on vLLM a variant that failed first and one whose engine cannot read the cache differ
        return lines + ["Not measured on any variant; why, per variant:", "", md_row(["Variant", "Why not measured"]),
                        md_row(["---"] * 2),
                        *[md_row([r.variant, why_not(r)]) for r in m.rows if r.judgement.overall != "baseline"], ""]
    edges = first.edges
    buckets = [f"{lo:,}-{hi:,}" for lo, hi in zip(edges, edges[1:])]
    lines += [f"Each variant teacher-forced on {first.texts} long texts of {first.positions or 0:,} tokens "
              f"(eval.long_context), the baseline's top-{first.k} stored per position (KL on them, the rest "
              "of the mass as one bucket: a lower bound); per position bucket the mean over texts of each "
              f"text's mean KL (nats/token) with a {first.confidence or 0.95:.0%} t interval over texts, and top-1 "
              "agreement. The baseline is the reference (0 and 100%)."
              + (f" Read through {first.path}: the KL on the ids in both engines' top-{first.k}, a lower "
                 "bound; top-1 each engine's own." if first.path else ""), ""]
    lines += ["**KV cache by length.** A quantized KV mode against the same tier with the baseline's KV cache: "
              "per bucket the paired KL increase over texts, non-inferior where its upper bound is within "
              f"{m.long_tolerance:g} nats/token.", ""]
    for f in m.long_kv:
        lines.append(f"- {f.sentence()}")
    if not m.long_kv:
        lines.append("- no quantized KV mode was measured beside its tier's baseline-KV row")
    lines.append("")
    if m.long_kv:
        lines += [md_row(["Tier", "KV mode", *buckets, "non-inferior up to"]), md_row(["---"] * (len(buckets) + 3))]
        for f in m.long_kv:
            lines.append(md_row([f.tier, f.kv, *[kv_cell(b) for b in f.buckets], f"{f.up_to:,}"]))
        lines.append("")
        planned = planned_length([r.facts for r in m.rows], max_model_len)
        short = [f for f in m.long_kv if f.up_to < planned]
        if short:
            lines += [f"Barred from every pick, page 1's and each target GPU's (not shown up to {planned:,} tokens: "
                      "memory.max_model_len, at most the model's context; decision.kv_kl_tolerance): "
                      + ", ".join(f"{f.tier} + {f.kv} KV" for f in short) + ".", ""]
    lines += [f"![next-token KL by position]({paths.position_plot(m.name)})", ""]
    lines += [md_row(["Variant", *buckets]), md_row(["---"] * (len(buckets) + 1))]
    for r in m.rows:
        if r.judgement.overall == "baseline":
            continue
        if measured(r.facts) and r.facts.long_context.edges == edges:
            lines.append(md_row([r.variant, *[bucket_cell(b) for b in r.facts.long_context.buckets]]))
        else:
            lines.append(md_row([r.variant, why_not(r), *[""] * (len(buckets) - 1)]))
    return lines + [""]


def long_json(m: ModelReport) -> dict:
    if m.long_tolerance is None:
        return {"configured": False}
    return {"configured": True, "kl_tolerance": m.long_tolerance, "kv": as_json(m.long_kv),
            "rows": {r.variant: asdict(r.facts.long_context) if r.facts.long_context else None
                     for r in m.rows if r.judgement.overall != "baseline"}}
