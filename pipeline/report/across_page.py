"""decision.md's "Across models" section and decision.json's "across" entry (decision.baseline.model;
docs/across-models.md). Pure: an AcrossReport in, lines or a dict out."""
from __future__ import annotations

from pipeline.domain.hardware.memory import mib
from pipeline.report.document import AcrossReport
from pipeline.scoring.pick.across_pick import Difference, GpuPick, name
from pipeline.scoring.verdict.rows import NOT_RUN, Row, confidence_text


def key_name(key: tuple[str, str, str]) -> str:
    return f"{key[0]}/{key[1]}-{key[2]}"


def lines(a: AcrossReport) -> list[str]:
    ref = a.across.reference
    out = ["## Across models", ""]
    if ref is None:
        return out + ["The reference across models (decision.baseline.model) did not run: no decision across models.", ""]
    out += [f"Every variant of every model against the reference **`{ref.model}/{ref.variant}`** on the same items "
            f"(paired by document over those both read), with the per-model verdict rule; each task's interval at "
            f"the confidence of the look its read stopped at ({confidence_text(a.confidence)} where read in full). "
            "Prompt formats: " + "; ".join(f"`{m}` {f}" for m, f in a.formats.items()) + ".", ""]
    out += ["### Pick per target GPU, across models", "",
            "| GPU | pick | runner-up | pick - runner-up (paired, points) | `vllm serve` |", "|---|---|---|---|---|"]
    for gpu, p in a.picks.items():
        diff = a.differences.get(gpu) or []
        out.append(f"| {gpu} | {cell(p.pick)} | {cell(p.runner_up)} | {difference_cell(diff[-1] if diff else None)} | "
                   + (f"`{a.commands[gpu]}`" if gpu in a.commands else "–") + " |")
    out += [""] + [f"- {gpu}: {p.why}" for gpu, p in a.picks.items()] + [""]
    out += ["### Every variant against the reference", "",
            "| variant | weights (MiB) | verdict | " + " | ".join(a.limits) + " |", "|---|---:|---|" + "---|" * len(a.limits)]
    for r in a.across.rows:
        if r.facts.status not in ("ok",):
            continue
        out.append(f"| {name(r)} | {mib(r.facts.weight_bytes):.1f} | {r.judgement.overall} | "
                   if r.facts.weight_bytes else f"| {name(r)} | – | {r.judgement.overall} | ")
        out[-1] += " | ".join(metric_cell(r, m) for m in a.limits) + " |"
    out += ["", "Each cell: the paired delta against the reference in points [its interval] and the verdict against "
            "minus the allowed drop (" + ", ".join(f"{m} {v:.2f}" for m, v in a.limits.items()) + ")."]
    if a.plot:
        out += ["", f"![quality against memory, every model]({a.plot})"]
    return out + [""]


def cell(r: Row | None) -> str:
    return "–" if r is None else f"`{name(r)}` ({r.judgement.overall})"


def difference_cell(d: Difference | None) -> str:
    if d is None:
        return "–"
    return "; ".join(f"{m} {iv.delta:+.2f} [{iv.lo:+.2f}, {iv.hi:+.2f}] {d.finding(m).replace('smaller', 'pick').replace('larger', 'runner-up')}"
                     for m, iv in d.intervals.items())


def metric_cell(r: Row, metric: str) -> str:
    v, iv = r.judgement.verdicts.get(metric), r.evidence.intervals.get(metric)
    if v is None:
        return "–"
    if v.verdict == NOT_RUN or iv is None:      # not run says why: "not run (the variant failed ...)"
        return v.text()
    return f"{iv.delta:+.2f} [{iv.lo:+.2f}, {iv.hi:+.2f}] {v.verdict}"


def as_json(a: AcrossReport) -> dict:
    ref = a.across.reference
    return {
        "reference": None if ref is None else {"model": ref.model, "tier": ref.tier, "kv": ref.kv},
        "confidence": a.confidence, "prompt_formats": a.formats, "limits": a.limits,
        "verdicts": [{"model": r.facts.model, "tier": r.facts.tier, "kv": r.facts.kv, "overall": r.judgement.overall,
                      "verdicts": {m: {"verdict": v.verdict, "why": v.why, "confidence": v.confidence}
                                   for m, v in r.judgement.verdicts.items()},
                      "intervals": {m: iv.as_dict() for m, iv in r.evidence.intervals.items()}}
                     for r in a.across.rows],
        "per_gpu": {gpu: pick_json(p, a.commands.get(gpu), a.differences.get(gpu) or []) for gpu, p in a.picks.items()},
    }


def pick_json(p: GpuPick, command: str | None, diffs: list[Difference]) -> dict:
    def row(r: Row | None) -> dict | None:
        return None if r is None else {"model": r.facts.model, "tier": r.facts.tier, "kv": r.facts.kv}
    return {"pick": row(p.pick), "why": p.why, "command": command, "runner_up": row(p.runner_up),
            "sequence": [key_name(r.key) for r in p.sequence], "run": [key_name(r.key) for r in p.run],
            "differences": [{"larger": key_name(d.larger), "smaller": key_name(d.smaller),
                             "intervals": {m: {**iv.as_dict(), "finding": d.finding(m)} for m, iv in d.intervals.items()}}
                            for d in diffs]}
