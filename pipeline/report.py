"""Render decision rows as results/decision.md. Pure: rows in, markdown out."""
from __future__ import annotations

from pipeline.decision import Row
from pipeline.memory import mib

METRIC_LABELS = {"bleu": "BLEU", "chrf": "chrF", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2",
                 "rougeL": "ROUGE-L", "acc": "Accuracy", "macro_f1": "Macro-F1"}
TABLE_METRICS = ("bleu", "chrf", "rougeL", "acc")
MARK = {"pass": "pass", "fail": "**FAIL**", "inconclusive": "inconclusive"}


def metric_cell(r: Row, metric: str, is_baseline: bool) -> str:
    if r.status != "ok":
        return "–"
    if metric not in r.metrics:
        return "not measured"
    value = f"{r.metrics[metric]:.1f}"
    if is_baseline:
        return f"{value} (baseline)"
    verdict = r.verdicts.get(metric)
    delta = r.deltas.get(metric)
    d = f"{delta:+.1f}" if delta is not None else "n/a"
    return f"{value} ({d}, {MARK[verdict[0]]})" if verdict else f"{value} ({d})"


def status_cell(r: Row) -> str:
    if r.status == "ok":
        return MARK.get(r.overall, r.overall)
    return f"{r.status}: {r.reason}" if r.reason else r.status


def table(rows: list[Row], baseline: tuple[str, str]) -> list[str]:
    head = (["Tier", "KV cache", "Scheme"] + [METRIC_LABELS[m] for m in TABLE_METRICS]
            + ["Verdict", "Weights (MiB)", "KV bytes/token", "Gen tok/s (this CPU)", "Backend"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        is_base = (r.tier, r.kv) == baseline
        cells = [r.tier, r.kv, r.extra.get("scheme", "")]
        cells += [metric_cell(r, m, is_base) for m in TABLE_METRICS]
        cells += [status_cell(r) if not is_base or r.status != "ok" else "baseline",
                  f"{mib(r.weight_bytes):.1f}" if r.weight_bytes else "–",
                  f"{r.kv_bytes_per_token:,}" if r.kv_bytes_per_token else "–",
                  f"{r.tokens_per_s:.1f}" if r.tokens_per_s else "–",
                  r.backend or "–"]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return lines


def reasons(rows: list[Row]) -> list[str]:
    out = []
    for r in rows:
        parts = [f"{METRIC_LABELS.get(m, m)} {v}: {why}" for m, (v, why) in r.verdicts.items()]
        if parts:
            out.append(f"- **{r.variant}**: " + "; ".join(parts))
    return out


def render(models: dict[str, dict], baseline: tuple[str, str], notes: list[str], header: dict) -> str:
    """models: name -> {"rows": [...], "recommended": Row|None, "why": str, "command": str|None,
    "source": str, "num_samples": {...}}"""
    lines = ["# qtier decision", "",
             f"Generated {header['generated']} by `dvc repro` on {header['hardware']}. "
             f"Baseline: tier `{baseline[0]}` with KV cache `{baseline[1]}`.", ""]
    for name, m in models.items():
        lines += [f"## {name}", "", f"Source: `{m['source']}`. Samples per task: "
                  + ", ".join(f"{t} {n}" for t, n in m["num_samples"].items()) + ".", ""]
        rec = m["recommended"]
        if rec is not None:
            lines += [f"**Recommended: `{rec.tier}` with KV cache `{rec.kv}`** - {m['why']}.", "",
                      "Launch it with vLLM:", "", "```bash", m["command"], "```", ""]
        else:
            lines += [f"**No tier can be recommended**: {m['why']}.", ""]
        lines += table(m["rows"], baseline) + [""]
        lines += ["Why each verdict:", ""] + reasons(m["rows"]) + [""]
    lines += ["## How to read this", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)
